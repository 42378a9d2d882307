"""Scheduled evaluation: a deployment of ``sliding-window-eval`` with a cron schedule.

``sweval serve --config rolling.toml --cron "0 3 * * *"`` registers the deployment
``sliding-window-eval/<name>`` with the Prefect API and serves it from this process: every
scheduled run re-reads the log and (in rolling mode, the default) evaluates the windows that
became complete since the previous run, appending them to the same MLflow runs.

Schedules need a real Prefect server (``prefect server start``): the ephemeral API that
``sweval run`` starts by itself runs no scheduler, so :func:`serve` refuses to run without
``PREFECT_API_URL``. ``prefect.yaml`` at the repository root declares the same deployment for
``prefect deploy`` and a process work pool.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from types import FrameType
from typing import Any

from prefect.deployments.runner import EntrypointType

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig

DEFAULT_NAME = "rolling"
DEFAULT_CRON = "0 3 * * *"


def build_deployment(
    config: EvalConfig,
    *,
    name: str = DEFAULT_NAME,
    cron: str = DEFAULT_CRON,
    timezone: str = "UTC",
    rolling: bool = True,
) -> Any:
    """The ``RunnerDeployment`` of the flow with ``config`` as its parameters and a cron schedule.

    At most one run of the deployment runs at a time (runs of one output directory must not
    overlap); a run due while another is running waits. In rolling mode without ``start``, the
    series' first run fixes t_0 and records it in the output's ``rolling.json``
    (:mod:`evaluators.run.rolling`), where every later run finds it.

    Raises:
        SwevalError: an invalid cron expression.
    """
    from prefect.schedules import Cron

    from sweval.flows.sliding_window import sliding_window_eval

    try:
        schedule = Cron(cron, timezone=timezone)
    except Exception as exc:
        raise SwevalError(f"--cron {cron!r}: {exc}") from None
    mode = "rolling" if rolling else "full"
    return sliding_window_eval.to_deployment(
        name=name,
        # A module path, not a file path: the served run then imports ``flows.sliding_window``
        # under its package name, which Dask workers need to unpickle the fold tasks.
        entrypoint_type=EntrypointType.MODULE_PATH,
        schedules=[schedule],
        parameters={"config": config.model_dump(mode="json"), "rolling": rolling},
        concurrency_limit=1,
        paused=False,  # a restarted serve resumes the schedule its stop paused
        description=(
            f"SW-EVAL {mode} evaluation of {config.dataset_name} ({config.window} windows), "
            f"cron {cron!r} {timezone}; outputs in {config.output}."
        ),
        tags=["sweval", mode],
    )


def api_url() -> str | None:
    """The configured Prefect API URL (``PREFECT_API_URL`` or the active profile), if any."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return str(url) if url else None


def serve(
    config: EvalConfig,
    *,
    name: str = DEFAULT_NAME,
    cron: str = DEFAULT_CRON,
    timezone: str = "UTC",
    rolling: bool = True,
    announce: Callable[[], None] | None = None,
) -> None:
    """Register the scheduled deployment and run its flow runs from this process (blocks);
    ``announce`` is called once the deployment is valid, before serving starts.

    Raises:
        SwevalError: no Prefect server configured, or an invalid deployment.
    """
    if api_url() is None:
        raise SwevalError(
            "schedules need a Prefect server: start one with `sweval up` (or `prefect server "
            "start` and set PREFECT_API_URL=http://127.0.0.1:4200/api); the ephemeral API of "
            "`sweval run` has no scheduler."
        )
    import asyncio
    import signal

    from prefect.runner import Runner

    from sweval.flows.processes import STOP_SIGNALS, handler_paces_the_stop

    config = _secret_to_environment(config)
    deployment = build_deployment(config, name=name, cron=cron, timezone=timezone, rolling=rolling)
    runner = Runner(pause_on_shutdown=False)  # leave_deployment pauses it, whatever the stop
    deployment_id = runner.add_deployment(deployment)
    # Prefect's runner answers SIGTERM by leaving its event loop at once, and its flow-run
    # processes are killed with the loop's tasks, before they can unwind: their MLflow runs
    # and Prefect flow runs stayed RUNNING. Each stop signal now lets them unwind first.
    runner.handle_sigterm = _stop  # what its start() installs for SIGTERM
    handler_paces_the_stop()
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
    if announce is not None:
        announce()
    try:
        asyncio.run(runner.start())
    finally:
        from sweval.flows.processes import postpone_deadline

        postpone_deadline(10.0)  # the API calls that pause the deployment (bounded)
        leave_deployment(deployment_id)


def _secret_to_environment(config: EvalConfig) -> EvalConfig:
    """A ``--tracking-uri`` holding a password moves to this process's ``MLFLOW_TRACKING_URI``,
    which its flow-run processes inherit: the deployment's parameters, kept and served by the
    Prefect API, get the URI masked (:class:`~evaluators.config.model.EvalConfig`'s dumps), so
    they must not carry it at all."""
    from sweval.evaluators.wording import shown_uri

    uri = config.tracking_uri
    if uri is None or shown_uri(uri) == uri:
        return config
    os.environ["MLFLOW_TRACKING_URI"] = uri
    return config.model_copy(update={"tracking_uri": None})


def leave_deployment(deployment_id: Any) -> list[str]:
    """What ``sweval serve`` does as it stops, after its flow runs have ended:

    - pause the deployment: Prefect deletes its scheduled runs, so none pile up Late while
      nothing serves it, to run back to back (under the old schedule too) when serve starts
      again (:func:`build_deployment` resumes it; the first run after a restart evaluates
      every window that became complete meanwhile);
    - mark CRASHED its flow runs left PENDING: ones this process was submitting when it
      stopped (their process not started yet). Left as they were, they hold the deployment's
      one concurrency slot until Prefect's lease expires (minutes), and the UI shows them
      PENDING for good.

    Returns the crashed runs' names; an API that does not answer is left alone (Prefect's
    lease frees the slot)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    crashed = []
    try:
        with get_client(sync_client=True) as client:
            client.pause_deployment(deployment_id)
            runs = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
                flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType.PENDING]))),
            )
            for run in runs:
                client.set_flow_run_state(run.id, Crashed(
                    message="sweval serve stopped while submitting it"), force=True)
                crashed.append(run.name)
    except Exception as exc:  # noqa: BLE001  (stopping: say it, do not raise over the stop)
        logging.getLogger(__name__).debug("deployment %s left as it is: %s", deployment_id, exc)
    return crashed


def _stop(signum: int, frame: FrameType | None) -> None:
    """``sweval serve``'s stop signals: the flow runs unwind first
    (:func:`flows.processes.stop_children_first`), then the runner's event loop is left. Its
    tasks, cancelled on the way, would each have asyncio log a traceback: not the user's
    business in a process that is stopping."""
    from sweval.flows.processes import stop_children_first

    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    stop_children_first(signum, frame)

