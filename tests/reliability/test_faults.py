"""Faults: a run killed at random points, MLflow going away mid-run, a full disk.

Nothing finished is lost and nothing is silent: a rerun of the same command completes the run,
computes only the units that were not finished, and produces the same ``results.csv``, byte for
byte, as a run that was never interrupted. Runs go through the real command line
(``sweval run --no-prefect``, in a driver that slows every unit down so that faults land mid-run;
see ``fault_helpers.DRIVER``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fault_helpers import (
    ALGORITHMS,
    Relay,
    base_options,
    finish,
    free_port,
    journal_units,
    kill_group,
    mlflow_server,
    reference_results,
    start_driver,
    tracking_state,
    unit_files,
    unit_names,
    write_config,
)
from fault_helpers import (
    REPO as REPO_ROOT,
)
from prefect_database import prefect_home
from sweval_testing import DAY, T0, check_child_metrics, experiment_runs, log_frame

from sweval.evaluators.config.model import EvalConfig


def all_units(output: Path) -> set[tuple[int, str]]:
    folds = pd.read_csv(output / "folds.csv")
    return {(int(f), a) for f in folds.loc[~folds["skipped"], "fold"] for a in ALGORITHMS}


def assert_unchanged(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], note: str) -> None:
    """Every unit file of ``before`` is still there, the same inode with the same mtime."""
    changed = {name for name, stamp in before.items() if after.get(name) != stamp}
    assert not changed, f"finished units rewritten or lost: {sorted(changed)} ({note})"


def assert_units_whole(output: Path) -> None:
    import pyarrow.parquet as pq

    for path in (output / "units").glob("*/*/unit.json"):
        record = json.loads(path.read_text())  # atomic writes: never a half-written unit
        lists = pq.read_table(path.parent / "lists.parquet")  # written before the record
        assert lists.num_rows == record["n_users"] > 0, path


# ------------------------------------------------------------------------------------ SIGKILL
@pytest.mark.slow
def test_sigkill_at_random_points_then_rerun(tmp_path: Path) -> None:
    seed = int(os.environ.get("SWEVAL_FAULT_SEED") or time.time_ns() % 2**32)
    rng = random.Random(seed)
    data = tmp_path / "log.csv"
    log_frame().to_csv(data, index=False)
    output = tmp_path / "out"
    options = base_options(data, output)
    config = write_config(tmp_path / "eval.json", **options)
    reference = reference_results(options, tmp_path / "reference")
    expected_units = all_units(tmp_path / "reference")
    journal = tmp_path / "journal.txt"

    kills = []
    for round_ in range(4):
        before = unit_files(output)
        if len(before) == len(expected_units):
            break
        process = start_driver(config, journal, delay=0.12)
        if rng.random() < 0.3:  # anywhere: imports, loading, a unit, writing the tables
            point = f"after {rng.uniform(0.5, 4.0):.2f} s"
            deadline = time.monotonic() + float(point.split()[1])
            while process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
        else:  # after a random number of further units, at a random moment of the next one
            target = len(before) + rng.randint(1, 4)
            pause = rng.uniform(0.0, 0.25)
            point = f"after {target} units + {pause:.2f} s"
            deadline = time.monotonic() + 120
            while process.poll() is None and len(unit_files(output)) < target:
                assert time.monotonic() < deadline, "no progress"
                time.sleep(0.01)
            time.sleep(pause)
        kill_group(process)
        status, _out, err = finish(process)
        note = f"seed {seed}, round {round_}, kill {point}"
        kills.append(f"{point}: status {status}, {len(unit_files(output))} units")
        assert status in (-signal.SIGKILL, 0), f"{note}: {err[-3000:]}"
        assert "Traceback" not in err, note
        assert_unchanged(before, unit_files(output), note)
        assert_units_whole(output)
        # a killed run computed each unit at most once, and none that was already finished
        started = journal_units(journal, process.pid)
        assert len(started) == len(set(started)), note
        assert not set(started) & unit_names_of(before), note

    before = unit_files(output)
    finished_before = unit_names(output)
    process = start_driver(config, journal, delay=0.0)
    status, _out, err = finish(process)
    note = f"seed {seed}; kills: {kills}"
    assert status == 0, f"{note}: {err[-3000:]}"
    assert_unchanged(before, unit_files(output), note)
    computed = journal_units(journal, process.pid)
    assert set(computed) == expected_units - finished_before, note  # exactly the missing ones
    assert len(computed) == len(set(computed)), note
    assert (output / "results.csv").read_bytes() == reference, note


# ------------------------------------------------------------------------------------ MLflow
MLFLOW_CLIENT_ENV = {
    # fail fast in tests; the defaults (7 retries, backoff factor 2) wait ~4 minutes first
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}


@pytest.fixture(scope="module")
def mlflow(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The loopback MLflow server: the one conftest.py started early, or one of our own."""
    from fault_helpers import EARLY_MLFLOW, wait_ready

    early = request.config.stash.get(EARLY_MLFLOW, None)
    if early is not None:
        yield wait_ready(early)
        return
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as server:
        yield server


def check_mlflow_holds_results(url: str, experiment: str, output: Path) -> str:
    """One parent run, FINISHED; one child per algorithm with exactly one step per fold for every
    metric, valued as in results.csv. Returns the parent's run id."""
    parents, children = experiment_runs(url, experiment)
    assert len(parents) == 1, [p.info.run_name for p in parents]
    assert parents[0].info.status == "FINISHED"
    assert sorted(children) == sorted(ALGORITHMS)
    results = pd.read_csv(output / "results.csv")
    for child in children.values():
        check_child_metrics(url, child, results)
    return parents[0].info.run_id


@pytest.mark.slow
def test_mlflow_unreachable_at_start_fails_clearly(tmp_path: Path) -> None:
    data = tmp_path / "log.csv"
    log_frame().to_csv(data, index=False)
    output = tmp_path / "out"
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = write_config(tmp_path / "eval.json", **base_options(
        data, output, tracking=True, tracking_uri=uri, experiment="reliability/no-server"))
    status, _out, err = finish(
        start_driver(config, tmp_path / "journal.txt", delay=0.0, env=os.environ | MLFLOW_CLIENT_ENV)
    )
    assert status == 2, err[-3000:]
    assert f"error: MLflow tracking at {uri}" in err, err[-3000:]
    assert "Traceback" not in err
    assert not unit_files(output)  # it stopped before computing anything


def relayed_run(tmp_path: Path, mlflow: Any, experiment: str) -> tuple[Relay, dict[str, Any], Path]:
    """(relay, options, config file) of a tracked run of the small log that reaches ``mlflow``
    through a :class:`Relay` (open; cut it to make the server unreachable)."""
    data = tmp_path / "log.csv"
    log_frame().to_csv(data, index=False)
    relay = Relay(mlflow.port)
    relay.restore()
    options = base_options(
        data, tmp_path / "out", tracking=True, tracking_uri=relay.url, experiment=experiment
    )
    return relay, options, write_config(tmp_path / "eval.json", **options)


def wait_for_units(process: subprocess.Popen, output: Path, count: int) -> None:
    """Wait (up to 120 s) until the running ``process`` has finished ``count`` units."""
    deadline = time.monotonic() + 120
    while len(unit_files(output)) < count:
        assert process.poll() is None, process.stderr.read()[-3000:] if process.stderr else ""
        assert time.monotonic() < deadline, "no units in time"
        time.sleep(0.02)


@pytest.mark.slow
def test_mlflow_outage_mid_run_then_rerun_uploads_the_rest(tmp_path: Path, mlflow: Any) -> None:
    experiment = "reliability/outage"
    relay, options, config = relayed_run(tmp_path, mlflow, experiment)
    output = Path(options["output"])
    journal = tmp_path / "journal.txt"
    env = os.environ | MLFLOW_CLIENT_ENV
    try:
        process = start_driver(config, journal, delay=0.15, env=env)
        wait_for_units(process, output, 4)
        relay.cut()  # the server is unreachable from here on
        status, _out, err = finish(process)
        assert status == 2, err[-3000:]  # the run fails: MLflow does not hold the results
        assert f"error: MLflow tracking at {relay.url}" in err, err[-3000:]
        assert "Traceback" not in err
        kept = unit_files(output)
        assert len(kept) >= 4  # finished units stay on disk
        reference = reference_results(options, tmp_path / "reference")
        if (output / "results.csv").exists():  # the run may go on computing without MLflow ...
            assert (output / "results.csv").read_bytes() == reference  # ... but never half-wrong
        parent_id = tracking_state(output)["parent_run_id"]

        relay.restore()
        process = start_driver(config, journal, delay=0.0, env=env)
        status, _out, err = finish(process)
        assert status == 0, err[-3000:]
    finally:
        relay.cut()
    assert_unchanged(kept, unit_files(output), "rerun after the outage")
    assert not set(journal_units(journal, process.pid)) & unit_names_of(kept)
    assert (output / "results.csv").read_bytes() == reference
    assert check_mlflow_holds_results(mlflow.url, experiment, output) == parent_id


@pytest.mark.slow
def test_short_mlflow_outage_is_ridden_out_by_retries(tmp_path: Path, mlflow: Any) -> None:
    """With MLflow's client retries on, an outage shorter than the retries ends without error."""
    experiment = "reliability/short-outage"
    relay, options, config = relayed_run(tmp_path, mlflow, experiment)
    output = Path(options["output"])
    env = os.environ | {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "4", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
    }
    try:
        process = start_driver(config, tmp_path / "journal.txt", delay=0.15, env=env)
        wait_for_units(process, output, 4)
        relay.cut()
        time.sleep(1.5)
        relay.restore()
        status, _out, err = finish(process)
    finally:
        relay.cut()
    assert status == 0, err[-3000:]
    assert "Traceback" not in err
    # urllib3's retries, said in one line: the outage was met and retried
    assert "does not answer: retrying (MLflow's client" in err, err[-3000:]
    check_mlflow_holds_results(mlflow.url, experiment, output)



@pytest.mark.slow
def test_windows_before_1970_can_be_tracked(tmp_path: Path, mlflow: Any) -> None:
    from sweval.data.errors import SwevalError
    from sweval.flows.execute import execute

    data = tmp_path / "log.csv"
    frame = log_frame()
    frame.assign(timestamp=frame["timestamp"] - 20_000 * DAY).to_csv(data, index=False)
    options = base_options(
        data, tmp_path / "out", start=str(T0 + 2 * DAY - 20_000 * DAY), tracking=True,
        tracking_uri=mlflow.url, experiment="reliability/before-1970",
    )
    try:
        execute(EvalConfig.build(**options), tracking=True)
    except SwevalError as exc:
        raise AssertionError(str(exc)) from exc
    check_mlflow_holds_results(mlflow.url, "reliability/before-1970", tmp_path / "out")

def unit_names_of(files: dict[str, tuple[int, int]]) -> set[tuple[int, str]]:
    return {(int(name[1:5]), name[:-5].split("__", 1)[1]) for name in files}


# ------------------------------------------------------------------------------------ disk full
@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    from fault_helpers import SmallDisk

    disk = SmallDisk(tmp_path / "disk")
    try:
        yield disk
    finally:
        disk.close()


def reference_sizes(reference: Path) -> dict[str, Any]:
    """File sizes of a finished run: per unit its files' sizes, and results.csv."""
    units = sorted((reference / "units").glob("*/*/unit.json"))
    return {
        "units": [[p.stat().st_size for p in unit.parent.iterdir()] for unit in units],
        "results": (reference / "results.csv").stat().st_size,
        # the store's tag and the output's empty manifest, written before any unit
        "bookkeeping": [(reference / "units" / "CACHEDIR.TAG").stat().st_size, 200],
    }


def files_of(units: list[list[int]]) -> list[int]:
    return [size for unit in units for size in unit]


@pytest.mark.slow
def test_disk_full_during_units_reports_clearly_and_resumes(tmp_path: Path, small_disk: Any) -> None:
    data = tmp_path / "log.csv"
    log_frame().to_csv(data, index=False)
    output = small_disk.path / "out"
    options = base_options(data, output)
    reference = reference_results(options, tmp_path / "reference")
    sizes = reference_sizes(tmp_path / "reference")
    config = write_config(tmp_path / "eval.json", **options)
    journal = tmp_path / "journal.txt"

    # room for 7 of the 18 units
    small_disk.leave_free(small_disk.room_for(files_of(sizes["units"][:7])))
    process = start_driver(config, journal, delay=0.0, env=os.environ | small_disk.env())
    status, _out, err = finish(process)
    note = f"({small_disk.kind})"
    assert status == 2, f"{note} {err[-3000:]}"
    assert f"error: {output / 'units'}: cannot write a finished unit" in err, \
        f"{note} {err[-3000:]}"
    assert "No space left on device" in err and "rerun the same command" in err, err[-3000:]
    assert "Traceback" not in err
    kept = unit_files(output)
    assert 1 <= len(kept) < len(sizes["units"]), note
    assert_units_whole(output)
    assert not (output / "results.csv").exists()
    leftovers = sorted(p.name for p in (output / "units").glob(".*.tmp"))
    print("temporary files left by the failed write:", leftovers)

    small_disk.free_up()
    process = start_driver(config, journal, delay=0.0)
    status, _out, err = finish(process)
    assert status == 0, err[-3000:]
    assert_unchanged(kept, unit_files(output), "rerun after freeing space")
    assert not set(journal_units(journal, process.pid)) & unit_names_of(kept)
    assert (output / "results.csv").read_bytes() == reference


def _run_until_tables_do_not_fit(tmp_path: Path, small_disk: Any) -> tuple[Path, bytes, str]:
    """Every unit fits, results.csv only half: the in-process run fails writing the tables."""
    from fault_helpers import install_quota

    from sweval.data.errors import SwevalError
    from sweval.flows.execute import execute

    data = tmp_path / "log.csv"
    log_frame().to_csv(data, index=False)
    output = small_disk.path / "out"
    options = base_options(data, output)
    reference = reference_results(options, tmp_path / "reference")
    sizes = reference_sizes(tmp_path / "reference")
    room = small_disk.room_for(files_of(sizes["units"]) + sizes["bookkeeping"])
    small_disk.leave_free(room + small_disk.room_for([sizes["results"]]) // 2)
    remove = install_quota(small_disk.quota, small_disk.path) if small_disk.quota else None
    try:
        with pytest.raises(SwevalError) as caught:
            execute(EvalConfig.build(**options))
    finally:
        if remove is not None:
            remove()
    return output, reference, str(caught.value)


def test_disk_full_while_writing_the_tables_reports_clearly_and_resumes(
    tmp_path: Path, small_disk: Any
) -> None:
    output, reference, message = _run_until_tables_do_not_fit(tmp_path, small_disk)
    assert f"{output}: cannot write the results" in message and "No space left on device" in message
    kept = unit_files(output)
    assert len(kept) == 18
    small_disk.free_up()
    from sweval.flows.execute import execute

    execute(EvalConfig.build(**base_options(tmp_path / "log.csv", output)))
    assert_unchanged(kept, unit_files(output), "rerun after freeing space")
    assert (output / "results.csv").read_bytes() == reference


@pytest.mark.slow
def test_disk_full_leaves_no_truncated_results_csv(tmp_path: Path, small_disk: Any) -> None:
    output, _reference, _message = _run_until_tables_do_not_fit(tmp_path, small_disk)
    assert not (output / "results.csv").exists(), (output / "results.csv").stat().st_size


def test_failed_unit_write_leaves_no_temporary_file(small_disk: Any) -> None:
    import numpy as np
    from fault_helpers import install_quota

    from sweval.data.errors import SwevalError
    from sweval.data.log import InteractionLog
    from sweval.evaluators.units.engine import UnitLists
    from sweval.evaluators.units.store import UnitStore

    store = UnitStore(small_disk.path / "out")
    n = 2000
    log = InteractionLog.from_frame(pd.DataFrame({
        "user": [f"user-{i:06d}" for i in range(n)], "item": [f"item-{i:06d}" for i in range(n)],
        "timestamp": np.arange(n),
    }))
    lists = UnitLists(users=np.arange(n), items=np.tile(np.arange(50), (n, 1)))
    small_disk.leave_free(small_disk.room_for([100]))
    remove = install_quota(small_disk.quota, small_disk.path) if small_disk.quota else None
    try:
        with pytest.raises(SwevalError, match="No space left on device"):
            store.save("ab" * 12, lists, log, {})
    finally:
        if remove is not None:
            remove()
    assert not list(store.directory.glob("**/.*.tmp"))
    assert not store.has("ab" * 12)


# ------------------------------------------------------------------------------------ determinism
#: Runs the Prefect flow once per ``NAME:RUNNER:WORKERS`` argument, in one process (one ephemeral
#: Prefect API for all of them), each into ``<output>/<NAME>``.
FLOW_DRIVER = r"""
import json, os, sys
from sweval.flows.settings import apply_env_defaults
apply_env_defaults()
from sweval.evaluators.config.model import EvalConfig
from sweval.flows.sliding_window import sliding_window_eval
base = json.loads(open(sys.argv[1]).read())
for spec in sys.argv[2:]:
    name, runner, workers = spec.split(":")
    config = EvalConfig.build(**(base | {
        "task_runner": runner, "workers": int(workers), "output": os.path.join(base["output"], name),
    }))
    sliding_window_eval(config=config)
    print("finished", name, flush=True)
"""

ALL_SIX = {
    "algorithms": ["pop", "pop-n", "item-knn", "user-knn", "svd", "als"],
    "params": {
        "pop-n": {"n_recent": 100}, "item-knn": {"n_neighbors": 10},
        "user-knn": {"n_neighbors": 10}, "svd": {"factors": 8},
        "als": {"factors": 8, "iterations": 3, "device": "cpu"},
    },
}


@pytest.mark.slow
def test_results_are_byte_identical_whatever_the_runner_and_workers(tmp_path: Path) -> None:
    from sweval.evaluators.run.evaluate import evaluate_config
    from sweval.flows.execute import execute

    data = tmp_path / "log.csv"
    log_frame().to_csv(data, index=False)
    options = base_options(data, tmp_path / "flow") | ALL_SIX
    config = write_config(tmp_path / "eval.json", **options)
    variants = ["sequential-1:sequential:1", "threads-2:threads:2"]
    try:
        import prefect_dask  # noqa: F401

        variants.append("dask-2:dask:2")
    except ImportError:  # the dask extra is optional
        pass
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(prefect_home(tmp_path / "prefect")), "COLUMNS": "200"}
    flows = subprocess.Popen(  # the flow runs go on while this process computes its own
        [sys.executable, "-c", FLOW_DRIVER, str(config), *variants], cwd=REPO_ROOT, env=env,
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        outputs = {}
        for name, run in (("library-a", evaluate_config), ("library-b", evaluate_config),
                          ("no-prefect", execute)):
            run(EvalConfig.build(**(options | {"output": str(tmp_path / name)})))
            outputs[name] = tmp_path / name / "results.csv"
        status, out, err = finish(flows, timeout=400)
    finally:
        kill_group(flows)
    assert status == 0, err[-4000:]
    assert "Traceback" not in err
    for spec in variants:
        name = spec.split(":")[0]
        outputs[f"flow {name}"] = tmp_path / "flow" / name / "results.csv"
    first = outputs["library-a"].read_bytes()
    assert len(pd.read_csv(outputs["library-a"])["algorithm"].unique()) == 6
    differing = [name for name, path in outputs.items() if path.read_bytes() != first]
    assert not differing, f"results.csv differs from the library run's: {differing}"

