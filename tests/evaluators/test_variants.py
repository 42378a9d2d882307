"""Variants: one algorithm several times in one run, each with its own parameters and label."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.text import parse_variant, split_top_level
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.run.plan import make_plan


def config(tmp_path: Path, **overrides) -> EvalConfig:
    values = dict(
        data="movielens-latest-small", window="7D", folds=4, u_min=3, k=[5, 10],
        output=str(tmp_path / "out"), progress=False, report=False, tracking=False,
    )
    return EvalConfig.build(**(values | overrides))


def test_entries_split_at_top_level_commas_and_parse_their_parameters():
    assert split_top_level("pop, item-knn(n_neighbors=50,weighting=\"count\") ,als") == [
        "pop", 'item-knn(n_neighbors=50,weighting="count")', "als",
    ]
    assert parse_variant("als(factors=32, regularization=0.1)") == (
        "als", {"factors": 32, "regularization": 0.1},
    )
    assert parse_variant("pop") == ("pop", {})


def test_labels_are_the_entries_as_written_and_one_configuration_twice_is_refused(tmp_path):
    """Issue 46: `days=1` typed for a float parameter was shown `days=1.0` (the validated
    value). A label is the entry as typed, less spaces; two spellings of one configuration
    still share one unit key, and listing them both is refused."""
    cfg = config(tmp_path, algorithms=["item-knn( n_neighbors = 50.0 )",
                                       "als(iterations=3,factors=8)"])
    assert cfg.algorithms == ["item-knn(n_neighbors=50.0)", "als(iterations=3,factors=8)"]
    assert cfg.labels == cfg.algorithms
    with pytest.raises(SwevalError, match="listed twice"):
        config(tmp_path, algorithms=["item-knn(n_neighbors=50)", "item-knn(n_neighbors=50.0)"])
    float_param = config(tmp_path, algorithms=["decay-pop(decay=1)", "pop"])
    specs = make_plan(float_param).specs
    assert [spec.label for spec in specs] == ["decay-pop(decay=1)", "pop"]
    assert specs[0].canonical["decay"] == 1.0 and isinstance(specs[0].canonical["decay"], float)
    same = make_plan(config(tmp_path, algorithms=["decay-pop(decay=1.0)", "pop"]))
    assert same.specs[0].label == "decay-pop(decay=1.0)"
    assert [u.key for u in same.units] == [u.key for u in make_plan(float_param).units]


def test_an_alias_names_an_entry_everywhere_and_takes_set(tmp_path, monkeypatch, capsys):
    """`--algorithms 'knn5=item-knn(n_neighbors=5),pop'`: the tables say knn5; --set knn5.P=V
    applies to that entry; a configuration file's table takes `alias`; an alias is one label
    among the others (refused twice)."""
    from sweval.flows.cli.app import main

    monkeypatch.setattr(sys, "argv", [
        "sweval", "run", "--no-prefect", "--no-tracking", "--no-progress",
        "--data", "movielens-latest-small", "--window", "7D", "--folds", "3", "--u-min", "3",
        "--algorithms", "knn5=item-knn(n_neighbors=5), pop, plain=item-knn",
        "--set", "plain.n_neighbors=7", "--output", str(tmp_path / "cli"),
    ])
    main()
    results = pd.read_csv(tmp_path / "cli" / "results.csv")
    assert list(dict.fromkeys(results["algorithm"])) == ["knn5", "pop", "plain"]
    record = json.loads((tmp_path / "cli" / "config.json").read_text())
    assert record["config"]["algorithms"] == ["knn5=item-knn(n_neighbors=5)", "pop",
                                              "plain=item-knn"]
    assert record["resolved_params"]["plain"]["n_neighbors"] == 7
    assert record["resolved_params"]["knn5"]["n_neighbors"] == 5
    assert "knn5" in capsys.readouterr().out
    path = tmp_path / "run.toml"
    path.write_text('algorithms = [{algorithm = "item-knn", params = {n_neighbors = 5}, '
                    'alias = "k5"}, "pop"]\n')
    assert EvalConfig.load(path).algorithms == ["k5=item-knn(n_neighbors=5)", "pop"]
    with pytest.raises(SwevalError, match="listed twice"):
        config(tmp_path, algorithms=["pop=item-knn", "pop"])
    with pytest.raises(SwevalError, match="expected ALIAS=NAME"):
        config(tmp_path, algorithms=["=item-knn"])


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("item-knn(n_neighbors)", "is not PARAM=VALUE"),
        ("item-knn(bogus=1)", "bogus"),
        ("item-knn(n_neighbors=many)", "n_neighbors"),
        ("item-knn(n_neighbors=1,n_neighbors=2)", "given twice"),
        ("nope(x=1)", "unknown algorithm 'nope'"),
        ("item-knn(n_neighbors=1", "cannot read"),
    ],
)
def test_bad_variants_are_clear_errors(tmp_path, entry, message):
    with pytest.raises(SwevalError, match=message):
        config(tmp_path, algorithms=["pop", entry])


def test_variants_are_algorithms_of_their_own_and_share_units_with_equal_configurations(
    tmp_path, count_units
):
    labels = ["pop", "item-knn(n_neighbors=5)", "item-knn(n_neighbors=100)", "item-knn"]
    outputs = evaluate_config(config(tmp_path, algorithms=labels))
    results = outputs.results
    assert list(dict.fromkeys(results["algorithm"])) == labels
    recall = results[(results["metric"] == "recall") & (results["k"] == 10)]
    by_label = recall.pivot_table(index="fold", columns="algorithm", values="value")
    # n_neighbors=100 is item-kNN's default: the same unit, the same numbers, computed once
    pd.testing.assert_series_equal(by_label["item-knn(n_neighbors=100)"], by_label["item-knn"],
                                   check_names=False)
    assert not by_label["item-knn(n_neighbors=5)"].equals(by_label["item-knn"])
    n_folds = 4
    assert len(count_units) == 3 * n_folds and outputs.n_computed == 3 * n_folds
    record = json.loads((Path(outputs.directory) / "config.json").read_text())
    assert record["resolved_params"]["item-knn(n_neighbors=5)"]["n_neighbors"] == 5


def test_set_applies_to_every_variant_of_an_algorithm_and_their_own_values_win(tmp_path):
    plan = make_plan(config(
        tmp_path, algorithms=["item-knn", "item-knn(n_neighbors=5)"],
        params={"item-knn": {"n_neighbors": 7}},
    ))
    assert [spec.canonical["n_neighbors"] for spec in plan.specs] == [7, 5]


def test_a_configuration_file_takes_variants_as_strings_or_tables(tmp_path):
    path = tmp_path / "eval.toml"
    path.write_text(
        'algorithms = ["pop", "item-knn(n_neighbors=5)", '
        '{algorithm = "als", params = {factors = 8, iterations = 2}}]\n'
    )
    cfg = EvalConfig.load(path)
    assert cfg.algorithms == ["pop", "item-knn(n_neighbors=5)", "als(factors=8,iterations=2)"]


def test_the_command_line_takes_variants_with_commas_inside(tmp_path, monkeypatch, capsys):
    from sweval.flows.cli.app import main

    monkeypatch.setattr(sys, "argv", [
        "sweval", "run", "--no-prefect", "--no-tracking", "--no-progress",
        "--data", "movielens-latest-small", "--window", "7D", "--folds", "3", "--u-min", "3",
        "--algorithms", "pop,als(factors=4,iterations=2,device=\"cpu\"),als(factors=8,iterations=2)",
        "--output", str(tmp_path / "cli"),
    ])
    main()
    out = capsys.readouterr().out
    assert 'als(factors=4,iterations=2,device="cpu")' in out.replace("\n", "")
    results = pd.read_csv(tmp_path / "cli" / "results.csv")
    assert set(results["algorithm"]) == {
        "pop", 'als(factors=4,iterations=2,device="cpu")', "als(factors=8,iterations=2)",
    }
