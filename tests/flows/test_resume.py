"""Resume: a flow that fails or is killed part-way is rerun; finished units are not recomputed,
the table equals an uninterrupted run's, and MLflow ends with exactly one step per fold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from flow_helpers import check_mlflow_matches_results
from sweval_testing import UNITS_GLOB

import sweval.evaluators.run.driver
from sweval.flows.sliding_window import sliding_window_eval
from sweval.flows.tracking import run_hook


def stored_units(units: Path) -> dict[tuple[int, str], int]:
    """(fold, algorithm) -> mtime of every finished unit in a unit store."""
    found = {}
    for path in units.glob(UNITS_GLOB):
        record = json.loads(path.read_text())
        found[(record["split_index"], record["algorithm"])] = path.stat().st_mtime_ns
    return found


def failing_at_fold(index: int) -> Any:
    """``compute_unit`` that raises for the units of fold ``index``."""
    original = sweval.evaluators.run.driver.compute_unit

    def failing(unit, store, **kwargs):
        if unit.split.index == index:
            raise RuntimeError(f"injected failure in fold {index}")
        return original(unit, store, **kwargs)

    return failing



@pytest.mark.slow
def test_failed_run_resumes_without_recomputing_finished_units(
    write_log, make_config, mlflow_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    count_units: list[tuple[int, str]],
) -> None:
    data = write_log(8)
    config = make_config(data)
    with monkeypatch.context() as patch:
        patch.setattr(sweval.evaluators.run.driver, "compute_unit", failing_at_fold(4))
        with pytest.raises(RuntimeError, match="injected failure"):
            sliding_window_eval(config=config)
    units = Path(config.cache or os.environ["SWEVAL_CACHE"])
    mtimes = stored_units(units)
    assert mtimes and not any(fold == 4 for fold, _ in mtimes)
    assert not (Path(config.output) / "results.csv").exists()
    parent_id = json.loads((Path(config.output) / "tracking.json").read_text())["parent_run_id"]

    count_units.clear()
    sliding_window_eval(config=config)
    assert count_units == [(4, "pop"), (4, "pop-n")]
    kept = {unit: mtime for unit, mtime in stored_units(units).items() if unit in mtimes}
    assert kept == mtimes  # finished units were not rewritten

    reference = make_config(data, output=str(tmp_path / "reference"), tracking=False)
    sliding_window_eval(config=reference)
    assert (Path(config.output) / "results.csv").read_text() == (
        tmp_path / "reference" / "results.csv"
    ).read_text()
    parent = check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))
    assert parent.info.run_id == parent_id  # the rerun completed the same MLflow run


_SLOW_RUN = """
import sys, time
import sweval.evaluators.run.driver as run
original = run.compute_unit
def slow(*args, **kwargs):
    time.sleep(0.4)
    return original(*args, **kwargs)
run.compute_unit = slow
from sweval.flows.cli.app import main
sys.argv = ["sweval", "run", "--config", sys.argv[1]]
main()
"""


def _flow_run_state(flow_run_id: str) -> str:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run_id).state.type.value


@pytest.mark.slow
def test_killed_run_resumes_and_matches_an_uninterrupted_run(
    write_log, make_config, mlflow_uri: str, tmp_path: Path, prefect_api: str,
    count_units: list[tuple[int, str]],
) -> None:
    data = write_log(8)
    config = make_config(data, algorithms=["pop", "pop-n"])
    config_file = tmp_path / "eval.json"
    config_file.write_text(config.to_json())
    env = os.environ | {"PREFECT_API_URL": prefect_api}
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_RUN, str(config_file)],
        env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    units = Path(config.cache or os.environ["SWEVAL_CACHE"])
    deadline = time.monotonic() + 90
    try:
        while len(list(units.glob(UNITS_GLOB))) < 4:
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the run produced no units in time"
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finished = set(stored_units(units))
    all_units = {(f, a) for f in (0, 1, 3, 4, 5, 6) for a in ("pop", "pop-n")}  # fold 2 skipped
    assert 4 <= len(finished) < len(all_units)
    killed = json.loads((Path(config.output) / ".sweval.lock").read_text())["flow_runs"][-1]
    assert _flow_run_state(killed) == "RUNNING"  # no process is left to say otherwise

    count_units.clear()
    sliding_window_eval(config=config)
    assert sorted(count_units) == sorted(all_units - finished)
    assert _flow_run_state(killed) == "CRASHED"  # found by the rerun (it stayed RUNNING)

    reference = make_config(data, output=str(tmp_path / "reference"), tracking=False)
    sliding_window_eval(config=reference)
    assert (Path(config.output) / "results.csv").read_text() == (
        tmp_path / "reference" / "results.csv"
    ).read_text()
    check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))


@pytest.mark.slow
def test_a_changed_configuration_computes_only_the_units_it_changes(
    write_log, make_config, count_units: list[tuple[int, str]]
) -> None:
    data = write_log(8)
    sliding_window_eval(config=make_config(data, tracking=False))
    assert len(count_units) == 12
    count_units.clear()
    sliding_window_eval(config=make_config(data, tracking=False, k=[3, 5]))
    assert count_units == []  # fewer k: measured from the stored lists
    sliding_window_eval(config=make_config(data, tracking=False, workers=2, folds=6,
                                           algorithms=["pop-n", "pop"]))
    assert count_units == []  # orchestration, fold count and order change no unit
    sliding_window_eval(config=make_config(data, tracking=False,
                                           params={"pop-n": {"n_recent": 7}}))
    assert sorted(count_units) == [(f, "pop-n") for f in (0, 1, 3, 4, 5, 6)]


def test_mlflow_outage_during_the_run_is_caught_up_at_the_end(
    write_log, make_config, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch,
    count_units: list[tuple[int, str]],
) -> None:
    from sweval.data.errors import SwevalError
    from sweval.flows.tracking import Tracker

    calls = {"n": 0}
    original = Tracker.log_rows

    def flaky(self, rows, devices=None):
        calls["n"] += 1
        if calls["n"] == 2:  # the first fold's live logging
            raise SwevalError("MLflow tracking at ...: database is locked")
        return original(self, rows, devices)

    monkeypatch.setattr(Tracker, "log_rows", flaky)
    monkeypatch.setattr(run_hook, "TRACKING_INTERVAL_S", 0.0)  # every fold logged as it ends
    config = make_config(write_log(8))
    sliding_window_eval(config=config)
    assert len(count_units) == 12  # every unit computed once, none lost
    check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))


@pytest.mark.parametrize("interval", [0.0, 3600.0])
def test_finished_folds_reach_mlflow_whatever_the_logging_interval(
    write_log, make_config, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch, interval: float,
) -> None:
    """Folds are logged one call per fold (interval 0) or all at the end (an interval longer
    than the run): either way MLflow ends with exactly the rows of results.csv."""
    from sweval.flows.tracking import Tracker

    calls = {"n": 0}
    original = Tracker.log_rows

    def counted(self, rows, devices=None):
        calls["n"] += 1
        return original(self, rows, devices)

    monkeypatch.setattr(Tracker, "log_rows", counted)
    monkeypatch.setattr(run_hook, "TRACKING_INTERVAL_S", interval)
    config = make_config(write_log(8))
    sliding_window_eval(config=config)
    check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))
    live = calls["n"] - 2  # start() and finish() log once each
    assert live == 0 if interval else live > 1


def test_only_flow_runs_left_running_are_marked_crashed_and_the_unsettled_stay_recorded(
    prefect_api: str, tmp_path: Path
):
    """QA: a --no-prefect run into the directory replaced the killed run's id in the lock's
    record, and a run killed just after taking the lock replaced the earlier one's: both stayed
    RUNNING for good."""
    import uuid

    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Completed, Running

    from sweval.evaluators.units.locks import output_lock
    from sweval.flows.orphaned_runs import FLOW_RUNS_FIELD, settle_flow_runs

    @flow
    def earlier() -> None:
        pass

    with get_client(sync_client=True) as client:
        running = [client.create_flow_run(earlier, state=Running()) for _ in range(2)]
        done = client.create_flow_run(earlier, state=Completed())
    out = tmp_path / "out"
    lock_record = out / ".sweval.lock"
    with output_lock(out) as previous:  # a run whose id went into the record, then killed
        assert previous is None
        settle_flow_runs(out, previous, running[0].id)
    for _ in range(2):  # runs that do not settle anything (--no-prefect, a comparison)
        with output_lock(out):
            pass
    record = json.loads(lock_record.read_text())
    record[FLOW_RUNS_FIELD] += [str(done.id), str(uuid.uuid4()), str(running[1].id)]
    lock_record.write_text(json.dumps(record))
    with output_lock(out) as previous:
        said = settle_flow_runs(out, previous, "now")
    assert len(said) == 2 and all("marked CRASHED" in line for line in said)
    assert [_flow_run_state(str(run.id)) for run in running] == ["CRASHED", "CRASHED"]
    assert _flow_run_state(str(done.id)) == "COMPLETED"
    assert json.loads(lock_record.read_text())[FLOW_RUNS_FIELD] == ["now"]  # all settled
    with output_lock(out) as previous:
        assert settle_flow_runs(out, previous, "now") == []  # itself: never crashed here


@pytest.mark.slow
def test_a_reopened_run_finds_every_child_page_by_page(
    write_log, make_config, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reopened parent's children are listed page by page: a run with more children than one
    page of MLflow's search (1,000, e.g. 500 strata × 2 algorithms) took the rest for missing
    and made them again, twice over. Here a page is one child."""
    from mlflow import MlflowClient

    from sweval.flows.tracking import tracker

    config = make_config(write_log(8))
    with monkeypatch.context() as patch:
        patch.setattr(sweval.evaluators.run.driver, "compute_unit", failing_at_fold(4))
        patch.setattr(run_hook, "TRACKING_INTERVAL_S", 0.0)  # the children exist before it fails
        with pytest.raises(RuntimeError, match="injected failure"):
            sliding_window_eval(config=config)
    monkeypatch.setattr(tracker, "SEARCH_PAGE", 1)
    sliding_window_eval(config=config)
    client = MlflowClient(mlflow_uri)
    experiment = client.get_experiment_by_name(config.experiment)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    children = [run.info.run_name for run in runs if "mlflow.parentRunId" in run.data.tags]
    assert sorted(children) == ["pop", "pop-n"]
    check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))


@pytest.mark.slow
def test_a_child_made_but_never_logged_gets_its_params_when_the_run_resumes(
    write_log, make_config, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child's params go with its first metrics (one request less a child). A run whose
    children were made but whose metrics never reached MLflow (every batch failed) leaves
    children without params; the rerun reopens them and logs their params with the metrics."""
    from mlflow import MlflowClient

    from sweval.data.errors import SwevalError
    from sweval.flows.tracking import Tracker
    from sweval.flows.tracking.records import algorithm_params

    config = make_config(write_log(8))

    def refused(self, run_id, metrics, tags):
        raise RuntimeError("database is locked")

    with monkeypatch.context() as patch:
        patch.setattr(Tracker, "_log_batch", refused)
        with pytest.raises(SwevalError):
            sliding_window_eval(config=config)
    client = MlflowClient(mlflow_uri)
    experiment = client.get_experiment_by_name(config.experiment)
    assert experiment is not None
    children = [run for run in client.search_runs([experiment.experiment_id])
                if "mlflow.parentRunId" in run.data.tags]
    assert children and all(not run.data.params for run in children)  # made, never logged

    sliding_window_eval(config=config)
    check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))
    for run in client.search_runs([experiment.experiment_id]):
        if "mlflow.parentRunId" in run.data.tags:
            assert run.data.params == algorithm_params(config, run.info.run_name)
