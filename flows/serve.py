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
from collections.abc import Callable
from types import FrameType
from typing import Any

from prefect.deployments.runner import EntrypointType

from sweval.data.errors import SwevalError
from sweval.evaluators.config import EvalConfig

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
    (:mod:`flows.rolling`), where every later run finds it.

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

    from sweval.flows.processes import STOP_SIGNALS

    deployment = build_deployment(config, name=name, cron=cron, timezone=timezone, rolling=rolling)
    runner = Runner(pause_on_shutdown=False)
    runner.add_deployment(deployment)
    # Prefect's runner answers SIGTERM by leaving its event loop at once, and its flow-run
    # processes are killed with the loop's tasks, before they can unwind: their MLflow runs
    # and Prefect flow runs stayed RUNNING. Each stop signal now lets them unwind first.
    runner.handle_sigterm = _stop  # what its start() installs for SIGTERM
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
    if announce is not None:
        announce()
    asyncio.run(runner.start())


def _stop(signum: int, frame: FrameType | None) -> None:
    """``sweval serve``'s stop signals: the flow runs unwind first
    (:func:`flows.processes.stop_children_first`), then the runner's event loop is left. Its
    tasks, cancelled on the way, would each have asyncio log a traceback: not the user's
    business in a process that is stopping."""
    from sweval.flows.processes import stop_children_first

    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    stop_children_first(signum, frame)

