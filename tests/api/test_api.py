"""The Python API (``import sweval``): the commands' tables as DataFrames, in memory or written,
equal to what the command line writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

import sweval
from sweval.data.errors import SwevalError

OPTIONS = dict(window="7D", folds=4, u_min=3, algorithms=["pop", "pop-n", "item-knn"],
               params={"pop-n": {"n_recent": 500}})
CLI = ["--data", "movielens-latest-small", "--window", "7D", "--folds", "4", "--u-min", "3",
       "--algorithms", "pop,pop-n,item-knn", "--set", "pop-n.n_recent=500", "--no-tracking",
       "--no-progress"]


def sweval_cli(monkeypatch: pytest.MonkeyPatch, *argv: str | Path) -> int:
    from sweval.flows.cli.app import main

    monkeypatch.setattr(sys, "argv", ["sweval", *map(str, argv)])
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def csv_text(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, float_format="%.10g")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("api") / "units")


@pytest.mark.slow
def test_evaluate_returns_the_tables_sweval_run_writes(tmp_path: Path, store: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    run = sweval.evaluate("movielens-latest-small", cache=store, **OPTIONS)
    assert run.directory is None and not list(tmp_path.iterdir())  # nothing written
    assert sweval_cli(monkeypatch, "run", *CLI, "--no-prefect", "--output", tmp_path / "cli",
                      "--cache", store) == 0
    for name in ("results", "summary", "folds", "significance", "overlap"):
        assert csv_text(getattr(run, name)) == (tmp_path / "cli" / f"{name}.csv").read_text(), name
    again = sweval.evaluate("movielens-latest-small", cache=store, **OPTIONS)
    assert (again.n_computed, again.n_reused) == (0, run.n_computed + run.n_reused)


def test_the_statistics_options_reach_significance(store: str) -> None:
    """--test-unit, --baseline and --correction are keyword arguments like every option."""
    run = sweval.evaluate("movielens-latest-small", cache=store, baseline="pop",
                          correction="bh", **OPTIONS)
    table = run.significance
    assert set(table["unit"]) == {"folds", "users"} and (table["correction"] == "bh").all()
    assert set(table["algorithm_b"]) == {"pop"}
    folds = sweval.evaluate("movielens-latest-small", cache=store, test_unit="folds",
                            **OPTIONS)
    assert set(folds.significance["unit"]) == {"folds"}
    with pytest.raises(SwevalError, match="--baseline 'svd': not one of the run's algorithms"):
        sweval.evaluate("movielens-latest-small", cache=store, baseline="svd", **OPTIONS)


def test_a_dataframe_is_the_same_log_as_its_file(store: str) -> None:
    from sweval.data.loaders import load_log

    log = load_log("movielens-latest-small")
    frame = pd.DataFrame({"user": log.user_ids[log.user], "item": log.item_ids[log.item],
                          "timestamp": log.timestamp})
    by_path = sweval.evaluate("movielens-latest-small", cache=store, **OPTIONS)
    by_frame = sweval.evaluate(frame, cache=store, data_name="ml-small", **OPTIONS)
    columns = [c for c in by_path.results.columns if c != "config_hash"]
    pd.testing.assert_frame_equal(by_frame.results[columns], by_path.results[columns])
    assert by_frame.config.dataset_name == "ml-small"


@pytest.mark.slow
def test_threads_give_the_same_tables(store: str, tmp_path: Path) -> None:
    one = sweval.evaluate("movielens-latest-small", cache=str(tmp_path / "u1"), **OPTIONS)
    two = sweval.evaluate("movielens-latest-small", cache=str(tmp_path / "u2"), workers=2,
                          **OPTIONS)
    assert csv_text(one.results) == csv_text(two.results)


def test_write_report_and_load_round_trip(tmp_path: Path, store: str) -> None:
    run = sweval.evaluate("movielens-latest-small", cache=store, **OPTIONS)
    page = run.report(tmp_path / "run")
    assert page == tmp_path / "run" / "report.html" and page.exists()
    loaded = sweval.load(tmp_path / "run")
    assert csv_text(loaded.results) == csv_text(run.results)
    assert loaded.config.window == "7D"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(SwevalError, match="not an SW-EVAL output directory"):
        run.write(tmp_path / "mine")
    with pytest.raises(SwevalError, match="kept in memory"):
        run.report()


def test_output_writes_what_sweval_run_writes(tmp_path: Path, store: str) -> None:
    run = sweval.evaluate("movielens-latest-small", cache=store, output=tmp_path / "out",
                          **OPTIONS)
    assert run.directory == tmp_path / "out"
    assert (tmp_path / "out" / "results.csv").read_text() == csv_text(run.results)
    assert (tmp_path / "out" / "report.html").exists()


@pytest.mark.slow
def test_compare_returns_the_tables_sweval_compare_writes(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = OPTIONS | {"algorithms": ["pop", "item-knn"], "params": {}}
    comparison = sweval.compare("movielens-latest-small", protocols=["sw-eval", "loocv"],
                                loocv_repeats=2, cache=store, **options)
    assert sweval_cli(monkeypatch, "compare", *CLI[:8], "--algorithms", "pop,item-knn",
                      "--no-tracking", "--no-progress", "--protocols", "sw-eval,loocv",
                      "--loocv-repeats", "2", "--output", tmp_path / "cli", "--cache", store) == 0
    assert csv_text(comparison.results) == (tmp_path / "cli" / "compare.csv").read_text()
    assert csv_text(comparison.kendall) == (tmp_path / "cli" / "kendall.csv").read_text()
    users = comparison.significance
    assert set(users["unit"]) == {"folds", "users"} and (users["correction"] == "holm").all()
    folds = sweval.compare("movielens-latest-small", protocols=["sw-eval", "loocv"],
                           loocv_repeats=2, cache=store, test_unit="folds", baseline="item-knn",
                           correction="bh", **options).significance
    assert set(folds["unit"]) == {"folds"} and (folds["correction"] == "bh").all()
    assert set(zip(folds["algorithm_a"], folds["algorithm_b"])) == {("pop", "item-knn")}


def test_leakage_gap_and_inspect_return_their_tables(tmp_path: Path, store: str) -> None:
    options = dict(window="30D", u_min=3, algorithms=["pop", "item-knn"], cache=store)
    severity = sweval.leakage("movielens-latest-small", test_start="2017-01-01", periods=1,
                              **options)
    assert set(severity.results["fold"]) == {0, 1}
    gap, results = sweval.gap("movielens-latest-small", **options)
    assert set(results["set"]) == {"traditional", "proportional", "cut-off", "test"}
    assert set(gap["validation"]) == {"traditional", "proportional", "cut-off"}
    inspection = sweval.inspect("movielens-latest-small", windows=["7D", "30D"], u_min=3,
                                output=tmp_path / "inspect")
    assert list(inspection.eligibility.iloc[:, 0]) == ["7D", "30D"]
    assert (tmp_path / "inspect" / "inspect.html").exists()
