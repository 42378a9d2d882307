"""The Prefect flow ``sliding-window-eval``: a thin adapter over :mod:`evaluators.run.evaluate`.

::

    sliding_window_eval(config, rolling=False)                          flow
    ├── load-log          load + validate the log once, cut the folds   task, I/O retries
    ├── evaluate-fold[f]  one task per fold with missing units: every   tasks, fanned out on
    │                     missing algorithm of fold f on the fold's     the configured task
    │                     shared training matrix; each unit persisted   runner
    │                     as soon as it is finished, then measured
    └── write-results     results.csv, summary.csv, folds.csv, ...      task, I/O retries
    MLflow logging happens in the flow's thread as each fold's task completes; the summary is
    published as a table artifact keyed by the output directory (:mod:`flows.prefect_ui`).

Run it::

    sweval run --config eval.toml                      (the usual way; ephemeral Prefect API)
    python -m sweval.flows.sliding_window --config eval.toml  (the same, without the CLI's summary)
    prefect deployment run 'sliding-window-eval/nightly-rolling'   (a deployed schedule)

The task runner comes from ``config.task_runner``: ``sequential`` (one thread), ``threads``
(``config.workers`` threads) or ``dask`` (prefect-dask: a local cluster of ``config.workers``
processes, started while the log loads and closed while the results are written
(:mod:`flows.dask.cluster`), or the cluster at ``config.dask_address``). With dask the loaded
log is written once as memory-mapped arrays that the workers map instead of loading the file
(:mod:`data.shared`), next to the flow's plan, which they load instead of planning again
(:mod:`evaluators.run.shared_plan`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

if __name__ == "__main__":  # `python -m sweval.flows.sliding_window`: Prefect reads these at import
    from sweval.flows.settings import apply_env_defaults

    apply_env_defaults()

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.driver import Done, Driver, Hook
from sweval.evaluators.run.evaluate import Prepared, evaluate_config, prepare
from sweval.evaluators.run.outputs import Outputs
from sweval.evaluators.run.sources import unit_store
from sweval.evaluators.run.work import Job, Outcome, Recipe
from sweval.evaluators.units.locks import output_lock
from sweval.flows.dask.cluster import LocalDask, require_dask, worker_env
from sweval.flows.executors import chain_starts, compute_remote, threads_per_job, worker_count
from sweval.flows.orphaned_runs import settle_flow_runs
from sweval.flows.prefect_ui import flow_run_name, publish_summary
from sweval.flows.processes import is_stop
from sweval.flows.settings import user_errors_without_traceback

_log = logging.getLogger(__name__)

#: Non-I/O OSErrors: retrying them cannot help.
_PERMANENT_OS_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def retry_on_io(task: Any, task_run: Any, state: Any) -> bool:
    """Retry condition of the tasks: transient I/O errors only (never a bad option or a bug)."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            exc = state.result(raise_on_failure=False)
        except Exception:
            return False
    while exc is not None:
        if isinstance(exc, OSError) and not isinstance(exc, _PERMANENT_OS_ERRORS):
            return True
        exc = exc.__cause__
    return False


_TASK_OPTIONS: dict[str, Any] = {
    "retries": 2,
    "retry_delay_seconds": [1, 5],
    "retry_condition_fn": retry_on_io,
    "cache_policy": NO_CACHE,  # inputs are a config and indices; results live in the unit store
}


@task(name="load-log", **_TASK_OPTIONS)
def load_log(config: EvalConfig, rolling: bool, log: Any = None,
             publish: bool = True) -> Prepared | None:
    """Load and validate the log once, check the options and cut the folds."""
    return prepare(config, rolling=rolling, log=log, publish=publish)


@task(name="evaluate-fold", task_run_name="fold-{fold_index}", **_TASK_OPTIONS)
def evaluate_fold(recipe: Recipe, fold_index: int, labels: tuple[str, ...],
                  send_lists: bool = False, threads: int | None = None) -> Outcome:
    """Every missing algorithm of one fold (units are persisted one by one and measured; a
    unit whose algorithm raises is reported in the outcome, the others go on)."""
    return compute_remote(recipe, Job(fold_index, labels), send_lists, threads)


@task(name="write-results", **_TASK_OPTIONS)
def write_results(function: Any, *args: Any) -> Outputs:
    """results.csv, summary.csv, folds.csv, units.csv and config.json in the output directory."""
    return function(*args)


class TaskSteps:
    """The evaluation's named steps as this flow's tasks."""

    def __call__(self, name: str, function: Any, *args: Any) -> Any:
        if name == "load-log":
            return load_log(*args)
        return write_results(function, *args)


class PrefectTasks:
    """The fold jobs as ``evaluate-fold`` tasks on a Prefect task runner (see
    :mod:`flows.executors` for the chains and what a worker receives)."""

    def __init__(self, config: EvalConfig, prepared: Prepared,
                 local_dask: LocalDask | None) -> None:
        self.config = config
        self.prepared = prepared
        self.local_dask = local_dask

    def run(self, driver: Driver, jobs: Sequence[Job]) -> Iterator[Done]:
        if not jobs:
            return
        config = self.config
        get_run_logger().info("%d units to compute in %d fold tasks (%s task runner)",
                              sum(len(job.labels) for job in jobs), len(jobs),
                              config.task_runner)
        recipe: Recipe = self.prepared.recipe
        shared = None
        if config.task_runner == "dask" and self.prepared.mode == "batch":
            shared = self.prepared.share()  # workers map it instead of loading the file again
            recipe = replace(self.prepared.recipe, shared_log=str(shared))
        threads = threads_per_job(config)
        starts = chain_starts(len(jobs), config, in_order=driver.work.in_order)
        try:
            with _blas_limits(threads), task_runner(config, self.local_dask) as runner:
                futures: dict[Any, Job] = {}
                previous: list[Any] = []
                for index, job in enumerate(jobs):
                    future = runner.submit(
                        evaluate_fold,
                        {"recipe": recipe, "fold_index": job.group, "labels": job.labels,
                         "send_lists": bool(config.dask_address), "threads": threads},
                        wait_for=[] if index in starts else previous,
                    )
                    futures[future] = job
                    previous = [future]
                for future in as_completed(list(futures)):
                    try:
                        yield futures[future], future.result()
                    except Exception as exc:  # noqa: BLE001 (keep collecting the other folds)
                        yield futures[future], exc
            if self.local_dask is not None:
                self.local_dask.close_in_background()  # its workers stop while tables are written
        finally:
            if shared is not None:
                self.prepared.unshare()


def task_runner(config: EvalConfig, local_dask: LocalDask | None = None) -> TaskRunner[Any]:
    """The task runner ``config`` asks for (a fresh instance); with ``dask`` and no address,
    the one of ``local_dask`` (started by :func:`start_local_dask`).

    Raises:
        SwevalError: ``dask`` without prefect-dask installed, or a local cluster that did not
            start.
    """
    if config.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if config.dask_address:
            # The cluster's workers must reach the Prefect API themselves (PREFECT_API_URL in
            # their environment) and read the data path and the output directory.
            return DaskTaskRunner(address=config.dask_address)
        if local_dask is None:
            raise ValueError("a local Dask cluster is started by start_local_dask(config)")
        return local_dask.task_runner()
    if config.task_runner == "threads":
        return ThreadPoolTaskRunner(max_workers=worker_count(config))
    return ThreadPoolTaskRunner(max_workers=1)


def start_local_dask(config: EvalConfig) -> LocalDask | None:
    """Start the local Dask cluster of ``config`` in a helper thread (``--task-runner dask``
    without ``--dask-address``; None otherwise), so that its workers start and import the
    fold task's modules while the flow loads the log (:mod:`flows.dask.cluster`).

    Raises:
        SwevalError: prefect-dask is not installed.
    """
    if config.task_runner != "dask" or config.dask_address:
        return None
    require_dask()  # the missing extra fails here, before the log is loaded
    workers = worker_count(config)
    return LocalDask(workers, worker_env(workers, _flow_api_url()))


def _flow_api_url() -> str | None:
    """This flow's Prefect API URL, for the local workers to report their task runs to."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    if context is not None and context.client is not None:
        return str(context.client.api_url)
    return None


@contextlib.contextmanager
def _blas_limits(threads: int | None) -> Iterator[None]:
    """Cap BLAS at ``threads`` while fold tasks share this process (the threads runner).

    OpenBLAS's thread count is process-wide, so it is set once, around all the tasks (a limit
    entered and restored by each task would be undone by the first to finish). The algorithms'
    own ``threadpool_limits(1, "blas")`` then nest inside it consistently. OpenMP's count is
    per thread and reaches the tasks through :data:`~algorithms.threads.unit_threads`.
    """
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield


def _flow_run_name() -> str:
    """The flow run's name (:func:`flows.prefect_ui.flow_run_name`) from its parameters."""
    from prefect.runtime import flow_run

    parameters = flow_run.parameters or {}
    config = parameters.get("config")
    if isinstance(config, dict):
        config = EvalConfig.build(**config)
    if not isinstance(config, EvalConfig):
        return "sweval"
    return flow_run_name(config, rolling=bool(parameters.get("rolling")))


@flow(name="sliding-window-eval", flow_run_name=_flow_run_name, validate_parameters=True)
def sliding_window_eval(config: EvalConfig, rolling: bool = False) -> Outputs | None:
    """Evaluate ``config`` with the sliding-window protocol (SW-EVAL), resuming finished units.

    Args:
        config: every option of ``sweval run`` (a dict is validated into an EvalConfig).
        rolling: evaluate the complete windows from ``config.start`` that no earlier run of this
            output directory evaluated (scheduled use); ``config.folds`` is then ignored.

    Returns:
        The written tables, or None when a rolling run found no complete window.
    """
    from prefect.runtime import flow_run

    user_errors_without_traceback()
    # one run per output directory (SwevalError otherwise); a live run of its unit store
    with output_lock(config.output) as previous, unit_store(config).in_use():
        for line in settle_flow_runs(config.output, previous, flow_run.id):
            get_run_logger().info("%s", line)
        local_dask = start_local_dask(config)  # its workers start while the log loads
        try:
            return _evaluate(config, rolling, local_dask)
        except BaseException as exc:
            if local_dask is not None and is_stop(exc):
                local_dask.stop()
            raise
        finally:
            if local_dask is not None:
                local_dask.close()


def _evaluate(config: EvalConfig, rolling: bool, local_dask: LocalDask | None) -> Outputs | None:
    """The flow's work, with the output directory locked."""
    from prefect.runtime import flow_run

    from sweval.flows.cli.progress import ProgressHook
    from sweval.flows.tracking.run_hook import RunTracking, run_tracking

    logger = get_run_logger()
    tracking: list[RunTracking] = []

    def prepared(prepared: Prepared) -> list[Hook]:
        plan = prepared.plan
        used = [fold for fold in plan.folds if not fold.skipped]
        logger.info("%s: %d folds (%d skipped), %d algorithms, key %s", plan.log.source,
                    len(plan.folds), len(plan.folds) - len(used), len(plan.config.algorithms),
                    plan.key)
        hook = run_tracking(prepared, flow_run_id=flow_run.id, flow_run_name=flow_run.name)
        tracking.extend([hook] if hook is not None else [])
        return [*tracking, ProgressHook(plan.config)]

    outputs = evaluate_config(
        config, rolling=rolling, steps=TaskSteps(), on_prepared=prepared,
        executor=lambda prepared: PrefectTasks(config, prepared, local_dask),
        on_outputs=lambda outputs, report: [hook.finish(outputs, report) for hook in tracking],
    )
    if outputs is None:
        logger.info("no complete window since %s yet: nothing to evaluate", config.start)
    else:
        key = publish_summary(config, outputs, rolling)
        if key is not None:
            logger.info("summary table: Prefect artifact %s", key)
    for hook in tracking:
        from sweval.flows.tracking import shown_uri

        if hook.tracker is None:
            continue
        logger.info("MLflow: %s %s (%.2f s logging)", shown_uri(hook.tracker.uri),
                    hook.tracker.run_url_hint, hook.tracker.seconds)
    return outputs


def main(argv: list[str] | None = None) -> None:
    """``python -m sweval.flows.sliding_window --config FILE [--rolling]``: run the flow once."""
    import argparse

    from sweval.flows.settings import apply_env_defaults

    parser = argparse.ArgumentParser(prog="python -m sweval.flows.sliding_window")
    parser.add_argument("--config", required=True, help="TOML/YAML/JSON EvalConfig file")
    parser.add_argument("--rolling", action="store_true", help="evaluate new complete windows")
    args = parser.parse_args(argv)
    apply_env_defaults()
    config = EvalConfig.load(args.config)
    outputs = sliding_window_eval(config=config, rolling=args.rolling)
    if outputs is not None:
        print(f"results: {outputs.directory}/results.csv")


if __name__ == "__main__":
    main()
