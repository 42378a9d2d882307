"""The Prefect flow ``sliding-window-eval``: a thin orchestration layer over :mod:`flows.pipeline`.

::

    sliding_window_eval(config, rolling=False)                          flow
    ├── load-log          load + validate the log once, cut the folds   task, I/O retries
    ├── evaluate-fold[f]  one task per fold with missing units: every   tasks, fanned out on
    │                     missing algorithm of fold f on the fold's     the configured task
    │                     shared training matrix; each unit persisted   runner
    │                     as soon as it is finished, then measured;
    │                     the measured units are returned
    └── write-results     results.csv, summary.csv, folds.csv, ...      task, I/O retries
                          from the measured units
    MLflow logging happens in the flow's thread as each fold's task completes.

Run it::

    sweval run --config eval.toml                      (the usual way; ephemeral Prefect API)
    python -m sweval.flows.sliding_window --config eval.toml  (the same, without the CLI's summary)
    prefect deployment run 'sliding-window-eval/nightly-rolling'   (a deployed schedule)

The task runner comes from ``config.task_runner``: ``sequential`` (one thread), ``threads``
(``config.workers`` threads) or ``dask`` (prefect-dask: a local cluster of ``config.workers``
processes, started while the log loads and closed while the results are written
(:mod:`flows.dask.cluster`), or the cluster at ``config.dask_address``). With dask the loaded
log is written once as memory-mapped arrays that the workers map instead of loading the file
(:mod:`flows.dask.shared_log`), next to the flow's plan, which they load instead of planning again
(:mod:`flows.dask.shared_plan`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

if __name__ == "__main__":  # `python -m sweval.flows.sliding_window`: Prefect reads these at import
    from sweval.flows.settings import apply_env_defaults

    apply_env_defaults()

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from sweval.algorithms.threads import thread_budget, usable_cpus
from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.run.outputs import Outputs
from sweval.evaluators.run.plan import Plan, unit_store
from sweval.flows.dask.cluster import LocalDask, worker_env
from sweval.flows.orphaned_runs import settle_flow_runs
from sweval.flows.pipeline import (
    Evaluation,
    FoldOutcome,
    Prepared,
    compute_fold,
    open_tracker,
    prepare,
)
from sweval.flows.processes import is_stop
from sweval.flows.settings import user_errors_without_traceback
from sweval.flows.cli.summary import progress_bar

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
def load_log(config: EvalConfig, rolling: bool = False) -> Prepared | None:
    """Load and validate the log once, check the options and cut the folds."""
    return prepare(config, rolling=rolling)


@task(name="evaluate-fold", task_run_name="fold-{fold_index}", **_TASK_OPTIONS)
def evaluate_fold(
    config: EvalConfig,
    fold_index: int,
    names: list[str],
    key: str,
    fingerprint: str,
    shared_log: str | None = None,
    send_lists: bool = False,
) -> FoldOutcome:
    """Every missing algorithm of one fold (units are persisted one by one and measured; a
    unit whose algorithm raises is reported in the outcome, the others go on)."""
    with thread_budget(threads_per_task(config)):
        return compute_fold(
            config, fold_index, names, key=key, fingerprint=fingerprint, shared_log=shared_log,
            send_lists=send_lists,
        )


@task(name="write-results", **_TASK_OPTIONS)
def write_results(evaluation: Evaluation) -> Outputs:
    """results.csv, summary.csv, folds.csv, units.csv and config.json in the output directory."""
    return evaluation.outputs()


def task_runner(config: EvalConfig, local_dask: LocalDask | None = None) -> TaskRunner[Any]:
    """The task runner ``config`` asks for (a fresh instance); with ``dask`` and no address,
    the one of ``local_dask`` (started by :func:`start_local_dask`).

    Raises:
        SwevalError: ``dask`` without prefect-dask installed, or a local cluster that did not
            start.
    """
    if config.task_runner == "dask":
        DaskTaskRunner = _dask_task_runner_class()
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


def _dask_task_runner_class() -> Any:
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise SwevalError(
            "--task-runner dask needs the dask extra: pip install 'sweval[dask]' "
            "(or: uv sync --extra dask)."
        ) from None
    return DaskTaskRunner


def start_local_dask(config: EvalConfig) -> LocalDask | None:
    """Start the local Dask cluster of ``config`` in a helper thread (``--task-runner dask``
    without ``--dask-address``; None otherwise), so that its workers start and import the
    fold task's modules while the flow loads the log (:mod:`flows.dask.cluster`).

    Raises:
        SwevalError: prefect-dask is not installed.
    """
    if config.task_runner != "dask" or config.dask_address:
        return None
    _dask_task_runner_class()  # the missing extra fails here, before the log is loaded
    workers = worker_count(config)
    return LocalDask(workers, worker_env(workers, _flow_api_url()))


def _flow_api_url() -> str | None:
    """This flow's Prefect API URL, for the local workers to report their task runs to."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    if context is not None and context.client is not None:
        return str(context.client.api_url)
    return None


def chain_starts(n_jobs: int, plan: Plan) -> set[int]:
    """The fold tasks that wait for no other; every other waits for the one before it.

    Warm starts chain every fold (each starts from the last one's factors). A local Dask
    cluster of W workers runs W chains of consecutive folds, one per worker (a task waiting
    for another runs where that one's result is): each worker then advances its training data
    one window at a time, as the sequential runner does, instead of every worker walking the
    whole timeline in steps of W windows. A cluster of one's own (``--dask-address``) gets no
    chains: how many workers it has is not known here, and too few chains would leave workers
    idle. Otherwise no task waits either.
    """
    config = plan.config
    if plan.warm_starts:
        return {0}
    if config.task_runner != "dask" or config.dask_address or not config.incremental:
        return set(range(n_jobs))
    chains = min(worker_count(config), n_jobs)
    return {n_jobs * chain // chains for chain in range(chains)}


def worker_count(config: EvalConfig) -> int:
    """Fold tasks that run at once: ``--workers``, or the usable CPUs when it is not given
    (``--workers 1`` is one: a one-worker Dask cluster is what fan-out is measured against)."""
    return config.workers if config.workers is not None else usable_cpus()


def threads_per_task(config: EvalConfig) -> int | None:
    """BLAS and OpenMP threads each fold task may use, or None for the libraries' own defaults.

    Only the threads runner puts several fold tasks in one process. Each then gets an equal
    share of the CPUs (at least one): ``usable_cpus() // worker_count(config)``. Without it, two
    concurrent ALS fits on two cores ran four OpenMP threads, and an idle OpenBLAS pool can spin
    against the other task (and before this, the default ``--workers`` set no limit at all).
    Dask workers are separate processes started with one thread each
    (:func:`flows.dask.cluster.worker_env`); the sequential runner leaves the libraries their defaults. implicit's
    factors do not depend on it: each user's and item's solve is done whole by one thread
    (tested bit for bit).
    """
    if config.task_runner != "threads":
        return None
    return max(1, usable_cpus() // worker_count(config))


@contextlib.contextmanager
def _blas_limits(config: EvalConfig) -> Iterator[None]:
    """Cap BLAS at :func:`threads_per_task` while fold tasks share this process.

    OpenBLAS's thread count is process-wide, so it is set once, around all the tasks (a limit
    entered and restored by each task would be undone by the first to finish). The algorithms'
    own ``threadpool_limits(1, "blas")`` then nest inside it consistently. OpenMP's count is
    per thread and reaches the tasks through :data:`~algorithms.threads.unit_threads`.
    """
    threads = threads_per_task(config)
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield


def _flow_run_name() -> str:
    from prefect.runtime import flow_run

    parameters = flow_run.parameters or {}
    config = parameters.get("config")
    if isinstance(config, dict):
        config = EvalConfig.build(**config)
    name = config.dataset_name if isinstance(config, EvalConfig) else "sweval"
    window = config.window if isinstance(config, EvalConfig) else ""
    return f"{name}-w{window}" + ("-rolling" if parameters.get("rolling") else "")


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

    logger = get_run_logger()
    prepared = load_log(config, rolling)
    if prepared is None:
        logger.info("no complete window since %s yet: nothing to evaluate", config.start)
        return None
    plan = prepared.plan
    used = [fold for fold in plan.folds if not fold.skipped]
    logger.info(
        "%s: %d folds (%d skipped), %d algorithms, key %s",
        plan.log.source, len(plan.folds), len(plan.folds) - len(used),
        len(plan.config.algorithms), plan.key,
    )
    tracker = open_tracker(prepared, flow_run_id=flow_run.id, flow_run_name=flow_run.name)
    evaluation = Evaluation(prepared, tracker=tracker)
    try:
        evaluation.start()
        logger.info("%s", evaluation.log_line())
        jobs = evaluation.jobs()
        if jobs:
            logger.info(
                "%d units to compute in %d fold tasks (%s task runner)",
                sum(len(job.names) for job in jobs), len(jobs), plan.config.task_runner,
            )
        errors: list[BaseException] = []
        with progress_bar(plan.config, sum(len(job.names) for job in jobs)) as advance:
            evaluation.progress = advance
            if jobs and plan.config.task_runner == "dask":
                evaluation.share_log()  # workers map it instead of loading the file again
            if jobs:
                with _blas_limits(plan.config), task_runner(plan.config, local_dask) as runner:
                    futures: dict[Any, Any] = {}
                    previous: list[Any] = []
                    starts = chain_starts(len(jobs), plan)
                    for index, job in enumerate(jobs):
                        future = runner.submit(
                            evaluate_fold, evaluation.job_parameters(job),
                            wait_for=[] if index in starts else previous,
                        )
                        futures[future] = job
                        previous = [future]
                    for future in as_completed(list(futures)):
                        try:
                            payloads = future.result()
                        except Exception as exc:  # keep collecting the other folds
                            errors.append(exc)
                            continue
                        evaluation.accept(futures[future], payloads)
        if local_dask is not None:
            local_dask.close_in_background()  # its workers stop while the outputs are written
        evaluation.unshare_log()
        if errors:
            raise errors[0]
        outputs = write_results(evaluation)
        evaluation.finish(outputs)
    except BaseException as exc:
        evaluation.unshare_log()
        evaluation.fail(exc)
        raise
    if tracker is not None:
        from sweval.flows.tracking import shown_uri

        logger.info("MLflow: %s %s (%.2f s logging)", shown_uri(tracker.uri), tracker.run_url_hint,
                    tracker.seconds)
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
