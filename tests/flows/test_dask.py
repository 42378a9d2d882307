"""The fold tasks on a 2-worker local Dask cluster (prefect-dask) give the same table, and the
workers report their task runs to the flow's Prefect API."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import psutil
import pytest

from sweval.flows.sliding_window import sliding_window_eval

pytestmark = pytest.mark.slow
pytest.importorskip("prefect_dask", reason="the dask extra is not installed")


async def _fold_task_states(flow_run_id: str) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async with get_client() as client:
        runs = await client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    return [run.state_name for run in runs if run.name.startswith("fold-")]


def test_dask_task_runner_on_a_two_worker_local_cluster(
    write_log, make_config, tmp_path: Path
) -> None:
    data = write_log(8)
    dask = make_config(
        data, output=str(tmp_path / "dask"), task_runner="dask", workers=2, tracking=False
    )
    state = sliding_window_eval(config=dask, return_state=True)
    outputs = state.result()
    reference = make_config(data, output=str(tmp_path / "seq"), tracking=False)
    sliding_window_eval(config=reference)
    assert (tmp_path / "dask" / "results.csv").read_text() == (
        tmp_path / "seq" / "results.csv"
    ).read_text()
    assert len(list(Path(dask.cache or os.environ["SWEVAL_CACHE"]).glob("*/*/unit.json"))) == 12
    assert not (tmp_path / "dask" / "shared-log").exists()  # the workers' copy is removed
    assert set(outputs.devices) == {"pop", "pop-n"}
    assert _worker_processes() == []  # the local cluster is closed when the flow returns

    # The 6 fold tasks ran on the workers and were recorded by this flow's API.
    deadline = time.monotonic() + 30
    while (states := asyncio.run(_fold_task_states(str(state.state_details.flow_run_id)))) != [
        "Completed"
    ] * 6:
        assert time.monotonic() < deadline, states
        time.sleep(0.5)


def _worker_processes() -> list[str]:
    """Live Dask worker processes started by this process (multiprocessing's spawned children;
    its resource tracker exits with this process)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            if "spawn_main" in command and child.status() != psutil.STATUS_ZOMBIE:
                found.append(command)
        except psutil.Error:
            continue
    return found


def test_local_workers_share_the_cpus_as_kernel_threads(monkeypatch) -> None:
    from sweval.flows.dask import cluster as dask_cluster

    monkeypatch.delenv("SWEVAL_KERNEL_THREADS", raising=False)
    monkeypatch.setattr(dask_cluster, "usable_cpus", lambda: 8)
    env = dask_cluster.worker_env(2, "http://127.0.0.1:4200/api/")
    assert env["SWEVAL_KERNEL_THREADS"] == "4"
    assert env["PREFECT_API_URL"] == "http://127.0.0.1:4200/api"
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
    assert dask_cluster.worker_env(16, None)["SWEVAL_KERNEL_THREADS"] == "1"
    assert "PREFECT_API_URL" not in dask_cluster.worker_env(16, None)
    monkeypatch.setenv("SWEVAL_KERNEL_THREADS", "3")  # the user's choice wins
    assert dask_cluster.worker_env(2, None)["SWEVAL_KERNEL_THREADS"] == "3"


def _malloc_trim() -> str | None:
    import os

    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


def test_local_workers_keep_glibcs_own_malloc_thresholds(monkeypatch) -> None:
    from distributed import Client

    from sweval.flows.dask.cluster import LocalDask, worker_env

    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    local = LocalDask(1, worker_env(1, None))
    try:
        local.task_runner()  # the cluster is up
        with Client(local._cluster) as client:
            assert list(client.run(_malloc_trim).values()) == [None]
    finally:
        local.close()


def test_a_local_cluster_that_cannot_start_is_a_clear_error(monkeypatch) -> None:
    import distributed

    from sweval.data.errors import SwevalError
    from sweval.flows.dask.cluster import LocalDask

    def refuse(**_: object) -> None:
        raise OSError("no ports left")

    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    local = LocalDask(2, {})
    with pytest.raises(SwevalError, match="did not start: no ports left"):
        local.task_runner()
    local.close()  # nothing to close, and no error


def test_a_failed_heartbeat_is_one_warning_line_without_a_traceback() -> None:
    import io
    import logging

    from sweval.flows.dask.worker import HeartbeatFailureInOneLine

    logger = logging.getLogger("test.distributed.worker")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.addFilter(HeartbeatFailureInOneLine())
    try:
        try:
            raise OSError("Stream is closed")
        except OSError:
            logger.exception("Failed to communicate with scheduler during heartbeat.")
            logger.exception("Some other failure.")
    finally:
        logger.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "Failed to communicate with scheduler during heartbeat: Stream is closed"
    assert lines[1] == "Some other failure." and lines[2] == "Traceback (most recent call last):"


@pytest.mark.parametrize(("options", "n_jobs", "starts"), [
    ({"task_runner": "dask", "workers": 2}, 30, {0, 15}),
    ({"task_runner": "dask", "workers": 3}, 7, {0, 2, 4}),
    ({"task_runner": "dask", "workers": 4}, 3, {0, 1, 2}),  # fewer folds than workers
    ({"task_runner": "dask", "workers": 2, "incremental": False}, 4, {0, 1, 2, 3}),
    ({"task_runner": "dask", "workers": 2, "dask_address": "tcp://h:8786"}, 4, {0, 1, 2, 3}),
    ({"task_runner": "sequential"}, 4, {0, 1, 2, 3}),
    ({"task_runner": "threads", "workers": 2}, 4, {0, 1, 2, 3}),
])
def test_local_dask_workers_each_take_a_chain_of_consecutive_folds(
    options: dict, n_jobs: int, starts: set[int]
) -> None:
    """W local workers: W chains of consecutive fold tasks (each task waits for the one
    before it, except a chain's first), so that each worker advances its training data one
    window at a time. A cluster of one's own (how many workers it has is not known here: too
    few chains would leave workers idle), no incremental training data and the other runners:
    no task waits. Warm starts chain every fold."""
    from sweval.evaluators.config.model import EvalConfig
    from sweval.flows.executors import chain_starts

    config = EvalConfig(**options)
    assert chain_starts(n_jobs, config, in_order=False) == starts
    assert chain_starts(n_jobs, config, in_order=True) == {0}
