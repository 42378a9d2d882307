"""Scheduled use: the deployment that `sweval serve` registers, and prefect.yaml."""

from __future__ import annotations

import asyncio

import pytest
import yaml
from sweval_testing import REPO

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.flows.serve import build_deployment


def test_served_deployment_is_registered_with_its_cron_schedule(write_log, make_config) -> None:
    from prefect.client.orchestration import get_client

    config = make_config(write_log(8))
    deployment_id = build_deployment(config, name="test-rolling", cron="0 3 * * *").apply()

    async def read():
        async with get_client() as client:
            return await client.read_deployment_by_name("sliding-window-eval/test-rolling")

    deployment = asyncio.run(read())
    assert deployment.id == deployment_id
    assert len(deployment.schedules) == 1
    assert deployment.schedules[0].schedule.cron == "0 3 * * *"
    assert deployment.schedules[0].schedule.timezone == "UTC"
    assert deployment.schedules[0].active
    assert deployment.parameters["rolling"] is True
    assert EvalConfig.build(**deployment.parameters["config"]) == config
    assert deployment.global_concurrency_limit.limit == 1  # runs of one output dir never overlap
    # a stopped serve pauses it (Runner(pause_on_shutdown=True)); serving it again resumes it
    with get_client(sync_client=True) as client:
        client.pause_deployment(deployment_id)
        assert client.read_deployment(deployment_id).paused
        build_deployment(config, name="test-rolling", cron="0 3 * * *").apply()
        assert not client.read_deployment(deployment_id).paused


def test_deployment_rejects_a_bad_cron_and_needs_no_start(write_log, make_config) -> None:
    config = make_config(write_log(8))
    with pytest.raises(SwevalError, match="--cron"):
        build_deployment(config, cron="every night")
    # without --start, a rolling series' first run fixes t_0 (evaluators/run/rolling.py), as with
    # `sweval run --rolling`; full runs place their folds at the end of the log
    for rolling in (True, False):
        deployment = build_deployment(config.model_copy(update={"start": None}), rolling=rolling)
        assert deployment.parameters["config"]["start"] is None


def test_prefect_yaml_declares_valid_deployments() -> None:
    from prefect.client.schemas.schedules import CronSchedule

    spec = yaml.safe_load((REPO / "prefect.yaml").read_text())
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert set(deployments) == {"nightly-rolling", "full"}
    for deployment in deployments.values():
        # a module path (not file.py:function), so that Dask workers can unpickle the tasks
        from prefect.flows import load_flow_from_entrypoint

        assert ":" not in deployment["entrypoint"]
        assert load_flow_from_entrypoint(deployment["entrypoint"]).name == "sliding-window-eval"
        EvalConfig.build(**deployment["parameters"]["config"])
        assert deployment["work_pool"]["name"] == "local-proc"
    nightly = deployments["nightly-rolling"]
    assert nightly["parameters"]["rolling"] is True
    schedule = nightly["schedules"][0]
    assert CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"]).cron == "0 3 * * *"


def test_runs_left_pending_by_a_stopped_serve_are_crashed_and_free_the_slot(
    write_log, make_config
) -> None:
    """QA: SIGTERM to `sweval serve` while it submitted a run left that run PENDING for good,
    holding the deployment's one concurrency slot: the next run waited 5.5 minutes."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.states import Pending

    from sweval.flows.serve import leave_deployment

    config = make_config(write_log(8))
    deployment_id = build_deployment(config, name="test-pending").apply()
    with get_client(sync_client=True) as client:
        pending = client.create_flow_run_from_deployment(deployment_id)
        assert client.set_flow_run_state(pending.id, Pending()).state.type == StateType.PENDING
        other = client.create_flow_run_from_deployment(deployment_id)  # still SCHEDULED
        assert leave_deployment(deployment_id) == [pending.name]
        assert client.read_flow_run(pending.id).state.type == StateType.CRASHED
        assert client.read_deployment(deployment_id).paused
        # a manual run of the paused deployment is kept, and may start at once (the slot is free)
        assert client.read_flow_run(other.id).state.type == StateType.SCHEDULED
        assert client.set_flow_run_state(other.id, Pending()).state.type == StateType.PENDING
