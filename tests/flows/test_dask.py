"""The fold tasks on a 2-worker local Dask cluster (prefect-dask) give the same table, and the
workers report their task runs to the flow's Prefect API."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

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
    assert len(list((tmp_path / "dask" / "units").glob("*/*/unit.json"))) == 12
    assert not (tmp_path / "dask" / "shared-log").exists()  # the workers' copy is removed
    assert set(outputs.devices) == {"pop", "pop-n"}

    # The 6 fold tasks ran on the workers and were recorded by this flow's API.
    deadline = time.monotonic() + 30
    while (states := asyncio.run(_fold_task_states(str(state.state_details.flow_run_id)))) != [
        "Completed"
    ] * 6:
        assert time.monotonic() < deadline, states
        time.sleep(0.5)
