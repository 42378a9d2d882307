"""How a run ends (evaluators/run/evaluate.py): the report is written in a thread of its own while
MLflow's final logging runs, and its files are logged once written."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

REPORT_FILES = {"report.html", "report-recall-at-10-over-time.png", "report-recall-vs-k.png",
                "report-overlap-at-10.png"}


class FinishingTracker:
    """Stands in for the MLflow tracker: records what ``finish`` is given; the rest is no-op."""

    def __init__(self, started: threading.Event) -> None:
        self.started = started
        self.logged: list[str] = []
        self.written_when_asked: bool | None = None

    def finish(self, results: Any, summary: Any, devices: Any, files: Any, *, n_folds: int,
               late_files: Any) -> None:
        self.started.set()
        late = [Path(path) for path in late_files()]
        self.written_when_asked = all(path.exists() for path in late)
        self.logged = [Path(path).name for path in [*files, *late]]

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def tracked_run(prepared_config: Any, tracker: Any) -> Any:
    """``evaluate_config`` with ``tracker`` standing in for MLflow's (through the run hook)."""
    from sweval.evaluators.run.evaluate import evaluate_config
    from sweval.flows.tracking.run_hook import RunTracking

    hooks: list[RunTracking] = []

    def prepared(prepared: Any) -> list[RunTracking]:
        hooks.append(RunTracking(prepared, tracker))
        return hooks

    return evaluate_config(prepared_config, on_prepared=prepared,
                           on_outputs=lambda outputs, report: hooks[0].finish(outputs, report))


def test_the_report_is_written_while_mlflow_finishes_and_logged_last(
    write_log, make_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweval.evaluators.run import evaluate

    started = threading.Event()
    write_report = evaluate.write_report_quietly

    def report_once_mlflow_is_finishing(directory: str | Path, **kwargs: Any) -> list[Path]:
        # Written before the tracker's finish began (in line with the tables), it would wait
        # here in vain and fail.
        assert started.wait(timeout=10), "the report did not run while MLflow was finishing"
        return write_report(directory, **kwargs)

    monkeypatch.setattr(evaluate, "write_report_quietly", report_once_mlflow_is_finishing)
    tracker = FinishingTracker(started)
    outputs = tracked_run(make_config(write_log(8), tracking=False, k=[10], report=True), tracker)

    assert tracker.written_when_asked is True
    assert REPORT_FILES <= set(tracker.logged)
    assert "results.csv" in tracker.logged
    output = Path(outputs.directory)
    assert all((output / name).exists() for name in REPORT_FILES)


def test_a_report_error_is_the_runs_error(write_log, make_config, monkeypatch) -> None:
    """An unexpected error in the report's thread reaches the run, as it did in line."""
    from sweval.evaluators.run import evaluate

    def broken(directory: str | Path, **kwargs: Any) -> list[Path]:
        raise RuntimeError("the report broke")

    monkeypatch.setattr(evaluate, "write_report_quietly", broken)
    with pytest.raises(RuntimeError, match="the report broke"):
        evaluate.evaluate_config(make_config(write_log(8), tracking=False, report=True))


def test_a_report_error_with_mlflow_on_is_not_taken_for_mlflows(
    write_log, make_config, monkeypatch
) -> None:
    """The report's own error, raised after MLflow's final logging: not wrapped as an MLflow
    tracking error, and the MLflow run is marked FAILED."""
    from sweval_testing import experiment_runs

    from sweval.evaluators.run import evaluate
    from sweval.flows.execute import execute

    def broken(directory: str | Path, **kwargs: Any) -> list[Path]:
        raise RuntimeError("the report broke")

    monkeypatch.setattr(evaluate, "write_report_quietly", broken)
    config = make_config(write_log(8), report=True)
    with pytest.raises(RuntimeError, match="the report broke"):
        execute(config, tracking=True)
    parents, _children = experiment_runs(config.tracking_uri, config.experiment)
    assert [run.info.status for run in parents] == ["FAILED"]


def test_the_runs_report_takes_its_intervals_and_equals_the_report_of_its_directory(
    write_log, make_config, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The run hands its summary's bootstrap intervals to the report instead of having them
    computed again, and the page is the one ``sweval report`` makes of the directory."""
    import re

    from sweval.evaluators.report.page import write_report
    from sweval.evaluators.run.evaluate import evaluate_config
    from sweval.evaluators.stats import significance

    computed: list[int] = []
    with_intervals = significance.with_intervals

    def counted(*args: Any, **kwargs: Any) -> Any:
        computed.append(1)
        return with_intervals(*args, **kwargs)

    monkeypatch.setattr(significance, "with_intervals", counted)
    monkeypatch.setattr("sweval.evaluators.run.outputs.with_intervals", counted)
    monkeypatch.setattr("sweval.evaluators.report.data.with_intervals", counted)
    outputs = evaluate_config(make_config(write_log(8), tracking=False, k=[10], report=True))
    assert len(computed) == 1  # the summary's; the report took them from it
    directory = Path(outputs.directory)
    write_report(directory, destination=tmp_path / "again")
    assert len(computed) == 2  # the report of a directory computes them

    def undated(path: Path) -> str:
        return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "", path.read_text())

    assert undated(directory / "report.html") == undated(tmp_path / "again" / "report.html")
    assert "ci" in (directory / "report.html").read_text()
