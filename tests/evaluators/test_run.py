"""A whole run in-process: outputs, determinism, resume, and the command line's error handling."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from sweval_testing import sweval_cli

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.driver import Driver, compute, compute_group
from sweval.evaluators.run.evaluate import Prepared, evaluate_config
from sweval.evaluators.run.plan import make_plan
from sweval.evaluators.run.sources import unit_store
from sweval.evaluators.run.work import Job


def small_config(tmp_path: Path, **overrides) -> EvalConfig:
    values = dict(
        data="movielens-latest-small", window="7D", folds=6, u_min=3,
        algorithms=["pop", "pop-n"], params={"pop-n": {"n_recent": 500}},
        output=str(tmp_path / "out"), progress=False, report=False,
    )
    values.update(overrides)
    return EvalConfig.build(**values)


def test_outputs_and_byte_identical_rerun(tmp_path):
    config = small_config(tmp_path)
    outputs = evaluate_config(config)
    out = Path(config.output)
    for name in ("results.csv", "folds.csv", "summary.csv", "units.csv", "config.json"):
        assert (out / name).exists()
    results = pd.read_csv(out / "results.csv")
    assert list(results.columns)[:12] == [
        "fold", "t_start", "t_end", "algorithm", "stratum", "metric", "k", "value",
        "n_users", "n_eligible", "skipped", "skip_reason",
    ]
    folds = pd.read_csv(out / "folds.csv")
    assert len(folds) == 6
    # 2 algorithms x (3 metrics x 4 k + r_precision) rows per fold
    assert len(results) == 6 * 2 * 13
    assert outputs.summary["n_folds"].max() + outputs.summary["n_skipped"].max() == 6
    first = (out / "results.csv").read_bytes()
    evaluate_config(small_config(tmp_path, output=str(tmp_path / "again")))
    assert (tmp_path / "again" / "results.csv").read_bytes() == first


def test_resume_recomputes_only_missing_units(tmp_path):
    config = small_config(tmp_path)
    plan = make_plan(config)
    store = unit_store(config)
    # "crash" after the first fold's units
    first_fold = next(f for f in plan.folds if not f.skipped)
    work = Prepared(plan=plan).work
    compute_group(work, Job(first_fold.index, tuple(config.algorithms)), store)
    before = {p: p.stat().st_mtime_ns for p in store.directory.glob("*/*/unit.json")}
    assert len(before) == len(config.algorithms)
    resumed = evaluate_config(config)
    assert resumed.n_computed == len(plan.units) - len(config.algorithms)
    after = {p: p.stat().st_mtime_ns for p in store.directory.glob("*/*/unit.json")}
    assert all(after[path] == mtime for path, mtime in before.items())  # not rewritten
    fresh = evaluate_config(small_config(tmp_path, output=str(tmp_path / "fresh")))
    pd.testing.assert_frame_equal(resumed.results, fresh.results)


def test_a_changed_configuration_keeps_every_unit_and_reuses_what_it_can(tmp_path):
    first = evaluate_config(small_config(tmp_path))
    assert first.n_computed == len(make_plan(small_config(tmp_path)).units)
    units = sorted(unit_store(small_config(tmp_path)).directory.glob("*/*/unit.json"))
    # fewer k: every unit is reused, nothing is deleted
    again = evaluate_config(small_config(tmp_path, k=[3]))
    assert (again.n_reused, again.n_computed) == (first.n_computed, 0)
    assert sorted(unit_store(small_config(tmp_path)).directory.glob("*/*/unit.json")) == units
    # one more algorithm: only its units are computed
    more = evaluate_config(small_config(tmp_path, algorithms=["pop", "pop-n", "item-knn"]))
    assert more.n_computed == len(units) // 2 and more.n_reused == len(units)


def test_relevance_first_and_skipped_folds_in_tables(tmp_path):
    outputs = evaluate_config(small_config(tmp_path, relevance="first", u_min=40))
    skipped = outputs.results[outputs.results["skipped"]]
    assert not skipped.empty and skipped["value"].isna().all()
    assert (skipped["skip_reason"].str.contains("u_min=40")).all()
    assert outputs.summary["n_skipped"].max() == outputs.folds["skipped"].sum()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--data", "missing.csv", "--algorithms", "pop"], "no such file"),
        (["--data", "movielens-latest-small", "--algorithms", "pop,nope"], "unknown algorithm 'nope'"),
        (["--data", "movielens-latest-small", "--algorithms", "pop-n", "--set", "pop-n.bogus=1"], "bogus"),
        (["--data", "movielens-latest-small", "--algorithms", "pop", "--window", "0D"], "longer than zero"),
        (["--data", "movielens-latest-small", "--algorithms", "pop", "--k", "0,10"], "k must be"),
        (["--data", "movielens-latest-small", "--algorithms", "pop", "--start", "2030-01-01"], "no fold lies inside"),
        (["--data", "movielens-latest-small", "--algorithms", "pop", "--time-col", "when"], "missing column"),
    ],
)
def test_cli_errors_are_one_clear_line(args, message, tmp_path, capsys):
    # (the same through Prefect and MLflow: tests/flows/test_cli.py)
    status = sweval_cli("run", *args, "--output", tmp_path / "o", "--no-prefect", "--no-tracking")
    printed = capsys.readouterr()
    assert status == 2, printed.err
    assert message in printed.err
    assert "Traceback" not in printed.err + printed.out


def test_config_errors_are_sweval_errors():
    with pytest.raises(SwevalError, match="folds"):
        EvalConfig.build(folds=0)


# ------------------------------------------------------------------ warm start (a deviation)
def warm_config(tmp_path: Path, name: str, **overrides) -> EvalConfig:
    return small_config(
        tmp_path, output=str(tmp_path / name), algorithms=["als"], folds=5, u_min=2,
        params={"als": {"factors": 8, "iterations": 6, "warm_start": True, "warm_iterations": 2,
                        "device": "cpu"}},
        **overrides,
    )


def test_warm_start_chains_folds_and_a_resumed_run_matches(tmp_path):
    config = warm_config(tmp_path, "warm")
    warm = evaluate_config(config).results
    cold_params = {"als": {"factors": 8, "iterations": 6, "device": "cpu"}}
    cold = evaluate_config(small_config(
        tmp_path, output=str(tmp_path / "cold"), algorithms=["als"], folds=5, u_min=2,
        params=cold_params,
    )).results
    values = ["fold", "metric", "k", "value"]
    warm_v = warm[warm.stratum == "all"][values].dropna().reset_index(drop=True)
    cold_v = cold[cold.stratum == "all"][values].dropna().reset_index(drop=True)
    fitted = sorted(warm_v.fold.unique())
    assert len(fitted) >= 3
    first, later = warm_v.fold == fitted[0], warm_v.fold > fitted[0]
    # The first fitted fold has no state to start from: it is the cold fit, to the bit.
    pd.testing.assert_frame_equal(warm_v[first], cold_v[first])
    assert not warm_v[later].value.equals(cold_v[later].value)
    # Each warm unit names its predecessor in its key and keeps its state for the next fold.
    plan = make_plan(config)
    assert [u.warm_from for u in plan.units] == [None] + [u.key for u in plan.units[:-1]]
    store = unit_store(config)
    assert all((store.directory / u.key[:2] / u.key / "warm.npz").exists() for u in plan.units)

    # A crash before the last fold's unit was saved: the rerun starts that fold from its
    # predecessor's stored state again and computes the same numbers.
    store.remove(plan.units[-1].key)
    (Path(config.output) / "results.csv").unlink()
    resumed = evaluate_config(config)
    assert resumed.n_computed == 1
    pd.testing.assert_frame_equal(resumed.results, warm)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"task_runner": "dask"}, "--task-runner sequential or threads"),
     ({"stratify_by": "policy", "data": None, "scale": 0.05}, "--stratify-by")],
)
def test_warm_start_refuses_what_it_cannot_chain(tmp_path, overrides, message):
    with pytest.raises(SwevalError, match=message):
        make_plan(warm_config(tmp_path, "bad", **overrides))


def test_units_of_other_code_are_recomputed_not_mixed_in(tmp_path, monkeypatch):
    import sweval.evaluators.units.unit as units

    config = small_config(tmp_path)
    evaluate_config(config)
    plan = make_plan(config)
    assert not Driver(Prepared(plan=plan).work, unit_store(config)).missing
    monkeypatch.setattr(units, "code_version", lambda name: f"other-code-{name}")
    changed = make_plan(config)
    work = Prepared(plan=changed).work
    assert len(Driver(work, unit_store(config)).missing) == len(changed.units)
    assert compute(work, unit_store(config)).n_computed == len(changed.units)
    # the other code's units are still there
    assert not Driver(Prepared(plan=plan).work, unit_store(config)).missing


def test_stratify_mode_test_without_a_column_is_refused():
    from sweval.evaluators.run.plan import make_plan

    with pytest.raises(SwevalError, match="--stratify-mode test needs --stratify-by"):
        make_plan(EvalConfig.build(stratify_mode="test", tracking=False, progress=False))


def test_a_policy_column_and_another_stratify_column_are_refused(tmp_path):
    """--policy-col policy --stratify-by bucket stratified by `policy` silently."""
    from sweval.evaluators.run.sources import load_data

    data = tmp_path / "log.csv"
    pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "timestamp": [1, 2],
                  "policy": ["p", "q"], "bucket": ["A", "B"]}).to_csv(data, index=False)
    with pytest.raises(SwevalError, match="--policy-col 'policy' and --stratify-by 'bucket' "
                                          "name different columns"):
        load_data(EvalConfig.build(data=str(data), policy_col="policy", stratify_by="bucket"))
    same = load_data(EvalConfig.build(data=str(data), policy_col="bucket", stratify_by="bucket"))
    assert same.n_users == 2


def test_numeric_policy_labels_sort_as_numbers_in_the_tables():
    """Strata 1, 2, 10 (integer policy ids sort numerically, as every id does: protocol.md §1),
    not 1, 10, 2; text labels sort as text; ``all`` comes first."""
    from sweval.evaluators.run.results import results_frame

    rows = [{"fold": 0, "t_start": 0, "t_end": 1, "algorithm": "pop", "stratum": stratum,
             "metric": "recall", "k": 10, "value": 0.1, "n_users": 1, "n_eligible": 1,
             "skipped": False, "skip_reason": "", "config_hash": ""}
            for stratum in ["10", "2", "all", "1"]]
    assert results_frame(rows, ["pop"])["stratum"].tolist() == ["all", "1", "2", "10"]
    for row, label in zip(rows, ["b", "B", "all", "a"], strict=True):
        row["stratum"] = label
    assert results_frame(rows, ["pop"])["stratum"].tolist() == ["all", "B", "a", "b"]
