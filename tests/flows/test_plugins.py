"""Plugins end to end: the example plugin through ``sweval run`` by its entry point and by its
import path (with --set), in results.csv, the report and MLflow; and a plugin that raises, which
fails its own units only, through the Prefect flow and without Prefect alike."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from flow_helpers import check_mlflow_matches_results
from sweval_testing import (
    REPO,
    experiment_runs,
    install_example_plugin,
    sweval_cli,
    use_plugins,
)

from sweval.evaluators.run.plan import make_plan
from sweval.evaluators.run.sources import unit_store

EXAMPLE = "sweval_recency.models:RecencyPop"

FAILING_PLUGIN = '''
from sweval.algorithms import Algorithm, TrainData


class FailsInFit(Algorithm):
    def _fit(self, train: TrainData) -> None:
        raise ValueError(f"plugin bug at cutoff {train.cutoff}")


class FailsInScore(Algorithm):
    def _fit(self, train: TrainData) -> None:
        pass

    def score(self, rows):
        raise ZeroDivisionError("plugin score bug")
'''
FAILING = ["failing_models:FailsInFit", "failing_models:FailsInScore"]


def sweval(*args: str, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": os.pathsep.join(map(str, pythonpath)), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "sweval.flows.cli.app", *args], cwd=REPO, env=env, text=True,
        capture_output=True, timeout=300, check=False,
    )


def run_args(data: Path, output: Path, *extra: str) -> list[str]:
    return ["run", "--data", str(data), "--window", "1D", "--folds", "4", "--start", "2024-01-02",
            "--k", "5,10", "--u-min", "5", "--output", str(output), "--no-prefect",
            "--no-tracking", "--no-progress", *extra]


@pytest.mark.slow
def test_example_plugin_runs_from_the_command_line(tmp_path, write_log):
    data = write_log()
    path = install_example_plugin(tmp_path / "site")
    listing = sweval("algorithms", pythonpath=path)
    assert listing.returncode == 0, listing.stderr
    assert "recency-pop" in listing.stdout and "half_life_days=7.0" in listing.stdout
    assert "entry point: sweval_recency.models:RecencyPop (sweval-recency 0.1.0)" in listing.stdout

    by_entry = sweval(*run_args(data, tmp_path / "entry", "--algorithms", "pop,recency-pop",
                                "--set", "recency-pop.half_life_days=0.5"), pythonpath=path)
    by_path = sweval(*run_args(data, tmp_path / "path", "--algorithms", f"pop,{EXAMPLE}",
                               "--set", f"{EXAMPLE}.half_life_days=0.5"), pythonpath=path)
    default = sweval(*run_args(data, tmp_path / "default", "--algorithms", f"pop,{EXAMPLE}"),
                     pythonpath=path)
    for result in (by_entry, by_path, default):
        assert result.returncode == 0, result.stderr[-3000:]
    entry = pd.read_csv(tmp_path / "entry" / "results.csv")
    via_path = pd.read_csv(tmp_path / "path" / "results.csv")
    defaults = pd.read_csv(tmp_path / "default" / "results.csv")
    mine = entry[entry["algorithm"] == "recency-pop"].reset_index(drop=True)
    theirs = via_path[via_path["algorithm"] == EXAMPLE].reset_index(drop=True)
    assert len(mine) == len(entry[entry["algorithm"] == "pop"]) > 0
    assert mine["value"].notna().any()
    pd.testing.assert_series_equal(mine["value"], theirs["value"])  # one model, two names
    assert not defaults[defaults["algorithm"] == EXAMPLE]["value"].reset_index(drop=True).equals(
        theirs["value"])  # --set took effect
    config = json.loads((tmp_path / "entry" / "config.json").read_text())
    assert config["config"]["params"] == {"recency-pop": {"half_life_days": 0.5}}
    assert "recency-pop" in (tmp_path / "entry" / "report.html").read_text()


def test_example_plugin_through_the_flow_is_tracked_in_mlflow(
    tmp_path, monkeypatch, write_log, make_config, mlflow_uri
):
    from sweval.flows.sliding_window import sliding_window_eval

    use_plugins(monkeypatch, *install_example_plugin(tmp_path / "site"))
    cfg = make_config(write_log(), algorithms=["pop", "recency-pop(half_life_days=2)"])
    outputs = sliding_window_eval(config=cfg)
    # labelled as written (a float parameter typed 2 stays 2), tracked under that label
    assert "recency-pop(half_life_days=2)" in set(outputs.results["algorithm"])
    check_mlflow_matches_results(mlflow_uri, cfg.experiment, Path(cfg.output))


@pytest.mark.parametrize("prefect", [True, False], ids=["prefect", "no-prefect"])
@pytest.mark.slow
def test_a_failing_plugin_fails_its_units_only(
    prefect, tmp_path, monkeypatch, write_log, make_config, mlflow_uri, caplog
):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "failing_models.py").write_text(FAILING_PLUGIN)
    use_plugins(monkeypatch, tmp_path / "plugins")
    cfg = make_config(write_log(), algorithms=["pop", *FAILING, "pop-n"], report=True)
    caplog.set_level(logging.ERROR)
    if prefect:
        from sweval.flows.sliding_window import sliding_window_eval

        outputs = sliding_window_eval(config=cfg)
    else:
        from sweval.flows.execute import execute

        outputs = execute(cfg, tracking=True)
    used = sorted(int(f) for f in outputs.folds.loc[~outputs.folds["skipped"], "fold"])
    assert len(used) >= 3
    assert sorted((f.fold, f.label) for f in outputs.failed) == sorted(
        (fold, label) for fold in used for label in FAILING)
    errors = {f.label: f.error for f in outputs.failed}
    assert errors[FAILING[0]].startswith("ValueError: plugin bug at cutoff")
    assert errors[FAILING[1]] == "ZeroDivisionError: plugin score bug"
    # the log names the plugin and carries its traceback
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for label in FAILING:
        assert f"unit failed: fold {used[0]}, {label}" in logged
    assert "Traceback" in logged and 'raise ZeroDivisionError("plugin score bug")' in logged
    # the run record keeps each failure with its traceback; the report lists them
    recorded = json.loads((Path(cfg.output) / "config.json").read_text())["failed_units"]
    assert sorted((f["fold"], f["label"]) for f in recorded) == sorted(
        (f.fold, f.label) for f in outputs.failed)
    assert all(f["traceback"].startswith("Traceback") for f in recorded)
    report = (Path(cfg.output) / "report.html").read_text(encoding="utf-8")
    assert f"{len(outputs.failed)} failed units" in report
    assert f"<td>{FAILING[1]}</td><td>ZeroDivisionError: plugin score bug</td>" in report
    # the other units are stored and written
    results = pd.read_csv(Path(cfg.output) / "results.csv")
    assert set(results.loc[~results["skipped"], "algorithm"]) == {"pop", "pop-n"}
    for name in ("pop", "pop-n"):
        part = results[(results["algorithm"] == name) & ~results["skipped"]]
        assert sorted(part["fold"].unique()) == used and part["value"].notna().all()
    store = unit_store(cfg)
    plan = make_plan(cfg)
    for unit in plan.units:
        assert store.has(unit.key, depth=unit.depth) == (unit.spec.label not in FAILING)
    # MLflow: the others' metrics are logged, the run is marked FAILED
    parents, children = experiment_runs(mlflow_uri, cfg.experiment)
    assert [p.info.status for p in parents] == ["FAILED"]
    assert {"pop", "pop-n"} <= set(children)
    assert children["pop"].data.metrics["mean_recall_at_10"] >= 0


@pytest.mark.slow
def test_a_failing_plugin_makes_the_command_exit_3(tmp_path, write_log):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "failing_models.py").write_text(FAILING_PLUGIN)
    result = sweval(*run_args(write_log(), tmp_path / "out", "--algorithms",
                              f"pop,{FAILING[0]}"), pythonpath=[tmp_path / "plugins"])
    assert result.returncode == 3, result.stderr[-3000:]
    assert f"failed:  fold 1, {FAILING[0]}: ValueError: plugin bug at cutoff" in result.stdout
    assert "unit(s) failed and are left out of the results" in result.stderr
    assert 'raise ValueError(f"plugin bug at cutoff {train.cutoff}")' in result.stderr  # the log
    # the same traceback on every fold: shown once, the other folds' failures one line each
    assert result.stderr.count("Traceback") == 1, result.stderr[-3000:]
    failed_lines = [line for line in result.stderr.splitlines() if "unit failed: fold" in line]
    assert len(failed_lines) >= 3
    first = failed_lines[0].split("unit failed: fold ")[1].split(",")[0]
    assert all(line.endswith(f"(traceback as for fold {first}, above)")
               and "ValueError: plugin bug at cutoff" in line for line in failed_lines[1:])
    results = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(results.loc[~results["skipped"], "algorithm"]) == {"pop"}


@pytest.mark.slow
def test_a_run_whose_every_unit_fails_still_exits_3_with_its_tables(tmp_path, write_log):
    """Nothing scored at all: the failures are listed once and the (empty) tables written, no
    traceback from the summary of an empty results table."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "failing_models.py").write_text(FAILING_PLUGIN)
    result = sweval(*run_args(write_log(), tmp_path / "out", "--algorithms", FAILING[0],
                              "--u-min", "1"), pythonpath=[tmp_path / "plugins"])
    assert result.returncode == 3, result.stderr[-3000:]
    assert f"failed:  fold 1, {FAILING[0]}: ValueError: plugin bug at cutoff" in result.stdout
    # each failure: its log record as it failed (with the traceback) and the summary's line;
    # the closing error counts them
    for fold in range(4):
        assert (result.stdout + result.stderr).count(f"fold {fold}, {FAILING[0]}: ") == 2
    assert result.stderr.rstrip().endswith(
        "error: 4 unit(s) failed and are left out of the results (listed above; tracebacks in "
        "the log).")
    assert "KeyError" not in result.stderr
    assert (tmp_path / "out" / "results.csv").read_text().count("\n") == 1  # its header
    assert (tmp_path / "out" / "summary.csv").exists()


def test_a_plugin_that_cannot_be_imported_stops_the_command_with_exit_2(tmp_path, write_log,
                                                                        capsys):
    code = sweval_cli(*run_args(write_log(), tmp_path / "out", "--algorithms",
                                "pop,no_such_pkg.models:Model"))
    stderr = capsys.readouterr().err
    assert code == 2
    assert "error: algorithm 'no_such_pkg.models:Model': module 'no_such_pkg.models' not found" in (
        " ".join(stderr.split()))
    assert "Traceback" not in stderr


@pytest.mark.slow
def test_the_readme_example_runs_and_prints_what_the_readme_shows(tmp_path):
    """The model and the command of README's "Evaluating your own model", as written there; the
    Recall table it shows is the run's summary."""
    import re
    import shlex

    readme = (REPO / "README.md").read_text()
    model = re.search(r"<!-- readme-model -->\n```python\n(.*?)```", readme, re.DOTALL)[1]
    command = re.search(r"<!-- readme-command -->\n```bash\n(.*?)```", readme, re.DOTALL)[1]
    shown = re.search(r"<!-- readme-command -->\n```bash\n.*?```\n\n```\n(.*?)```", readme,
                      re.DOTALL)[1]
    (tmp_path / "my_models.py").write_text(model)
    argv = shlex.split(command.replace("\\\n", " "))
    assert argv[:4] == ["PYTHONPATH=.", "uv", "run", "sweval"]
    result = sweval(*argv[4:], "--output", str(tmp_path / "out"), "--no-tracking",
                    "--no-progress", pythonpath=[tmp_path])
    assert result.returncode == 0, result.stderr[-3000:]
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    for line in shown.strip().splitlines()[1:]:
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        for k, cell in zip((5, 10, 15, 20), cells[1:5], strict=True):
            row = summary[(summary["algorithm"] == cells[0]) & (summary["metric"] == "recall")
                          & (summary["k"] == k) & (summary["stratum"] == "all")]
            assert f"{row['mean'].item():.4f}" == cell.split()[0], (cells[0], k)


MUTATING_PLUGIN = '''
import numpy as np
from sweval.algorithms import Algorithm, TrainData


class WritesInPlace(Algorithm):
    """Zeroes the fold's matrix and sequences where it finds them (a plugin bug)."""

    def _fit(self, train: TrainData) -> None:
        train.matrix.data[:] = 0
        train.item_sequence[:] = 0

    def score(self, rows):
        return np.zeros((len(rows), 1))


class ReplacesTheMatrix(Algorithm):
    """Rebinds the matrix's arrays and keeps the result: harmless to the others."""

    def _fit(self, train: TrainData) -> None:
        train.matrix.data = np.log1p(train.matrix.data) * 0
        self.items_ = train.transactions_per_item().astype(float)

    def score(self, rows):
        return np.tile(self.items_, (len(rows), 1))
'''


def test_a_plugin_cannot_change_the_data_the_other_algorithms_read(tmp_path, monkeypatch, write_log):
    """Every algorithm of a fold reads one TrainData (and the next fold's is advanced from it):
    a plugin that wrote into it changed item-kNN's and user-kNN's numbers, and the units stored
    from them. Its writes now fail its own units; rebinding an array is its own business."""
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.run.evaluate import evaluate_config

    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "mutating.py").write_text(MUTATING_PLUGIN)
    use_plugins(monkeypatch, tmp_path / "plugins")
    base = dict(data=str(write_log(8)), window="1D", folds=4, k=[5, 10], u_min=5, progress=False)
    others = ["pop", "item-knn", "user-knn"]
    clean = evaluate_config(EvalConfig.build(**base, algorithms=others, output=str(tmp_path / "clean")))
    mixed = evaluate_config(EvalConfig.build(
        **base, algorithms=["mutating:WritesInPlace", "mutating:ReplacesTheMatrix", *others],
        output=str(tmp_path / "mixed"), cache=str(tmp_path / "store")))
    assert {f.label for f in mixed.failed} == {"mutating:WritesInPlace"}
    assert all("assignment destination is read-only" in f.error for f in mixed.failed)
    results = mixed.results[mixed.results["algorithm"].isin(others)].reset_index(drop=True)
    pd.testing.assert_frame_equal(results.drop(columns="config_hash"),
                                  clean.results.drop(columns="config_hash"))
    # ReplacesTheMatrix still saw the counts (its matrix's rebinding reached no one else)
    replaced = mixed.results[(mixed.results["algorithm"] == "mutating:ReplacesTheMatrix")
                             & ~mixed.results["skipped"]]
    assert replaced["value"].notna().all() and len(replaced)


def test_a_traceback_is_shown_once_per_algorithm_and_place():
    """The terminal filter: a failure with the frames of one already shown for the same label
    is one line naming the fold shown; another label, or other frames, keep their traceback."""
    from dataclasses import replace

    from sweval.evaluators.units.failures import UnitFailure
    from sweval.flows.settings import RepeatedFailuresInOneLine

    def failure(fold: int, label: str, line: int) -> UnitFailure:
        trace = (f'Traceback (most recent call last):\n  File "m.py", line {line}, in _fit\n'
                 f"    raise ValueError(x)\nValueError: bad {fold}\n")
        return UnitFailure(fold=fold, label=label, key=f"k{fold}", stratum="all",
                           error=f"ValueError: bad {fold}", traceback=trace)

    shown = RepeatedFailuresInOneLine()

    def said(unit_failure: UnitFailure) -> str:
        record = logging.LogRecord("sweval.evaluators.units.unit", logging.ERROR, "", 0,
                                   "unit failed: %s\n%s",
                                   (unit_failure.describe(), unit_failure.traceback), None)
        record.unit_failure = unit_failure
        assert shown.filter(record)
        return record.getMessage()

    assert "Traceback" in said(failure(3, "a:A", 7))
    assert said(failure(4, "a:A", 7)) == (
        "unit failed: fold 4, a:A: ValueError: bad 4 (traceback as for fold 3, above)")
    assert "Traceback" in said(failure(5, "b:B", 7))  # another algorithm
    assert "Traceback" in said(failure(6, "a:A", 9))  # another place in the same algorithm
    assert said(failure(7, "a:A", 9)).endswith("(traceback as for fold 6, above)")
    stratum = UnitFailure(fold=6, label="a:A", key="k6s", stratum="B", error="ValueError: bad 6",
                          traceback=failure(6, "a:A", 9).traceback)  # the same fold's stratum
    assert said(stratum).endswith("(traceback as for fold 6, above)")
    first_in_b = UnitFailure(fold=2, label="c:C", key="k2s", stratum="B", error="E: e",
                             traceback=failure(2, "c:C", 9).traceback)
    assert "Traceback" in said(first_in_b)
    assert said(replace(first_in_b, fold=3, key="k3s")).endswith(
        "(traceback as for fold 2, stratum B, above)")
    plain = logging.LogRecord("x", logging.ERROR, "", 0, "something else", (), None)
    assert shown.filter(plain) and plain.getMessage() == "something else"
