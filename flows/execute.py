"""Running a configured evaluation in this process, without Prefect (``sweval run --no-prefect``).

The same composition as the flow (:func:`evaluators.run.evaluate.evaluate_config`): the output
directory locked, the jobs on the executor ``--task-runner`` asks for (one after the other,
threads, or a Dask cluster: :mod:`flows.executors`), a progress bar, and MLflow exactly as the
flow logs it. Useful where no Prefect API can start, and fast.
"""

from __future__ import annotations

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.driver import Hook
from sweval.evaluators.run.evaluate import Prepared, evaluate_config
from sweval.evaluators.run.outputs import Outputs
from sweval.evaluators.run.sources import unit_store
from sweval.evaluators.units.locks import output_lock
from sweval.flows.cli.progress import ProgressHook
from sweval.flows.executors import executor_for


def execute(config: EvalConfig, *, rolling: bool = False, tracking: bool = False) -> Outputs | None:
    """Evaluate ``config`` in this process, resuming from finished units, and write the outputs.

    Args:
        config: the run's configuration.
        rolling: evaluate only the complete windows not evaluated yet
            (:mod:`evaluators.run.rolling`).
        tracking: log to MLflow (when ``config.tracking`` is also true).

    Returns:
        The written tables; None when a rolling run found no complete window.

    Raises:
        SwevalError: any problem with the data or the options, or another run writing to
            ``config.output`` (:func:`evaluators.units.locks.output_lock`).
    """
    from sweval.flows.tracking.run_hook import RunTracking, run_tracking

    trackers: list[RunTracking] = []

    def prepared(prepared: Prepared) -> list[Hook]:
        hook = run_tracking(prepared) if tracking else None
        trackers.extend([hook] if hook is not None else [])
        return [*trackers, ProgressHook(prepared.plan.config)]

    with output_lock(config.output), unit_store(config).in_use():
        return evaluate_config(
            config, rolling=rolling, on_prepared=prepared,
            executor=lambda prepared: executor_for(prepared.plan.config, prepared.recipe),
            on_outputs=lambda outputs, report: [hook.finish(outputs, report) for hook in trackers],
        )
