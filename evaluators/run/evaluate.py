"""A sliding-window evaluation, start to end: the composition every way of running it shares
(``sweval run``, ``--no-prefect``, the Prefect flow, scheduled runs, :func:`sweval.evaluate`).

::

    prepared = prepare(config, rolling=...)    load and validate the log once, cut the folds,
                                               plan the units (rolling: only the new windows)
    collected = Driver(prepared.work, store,   compute the missing units through the executor
                       executor, hooks).run()  (evaluators.run.driver); hooks: progress, MLflow
    outputs = tables(plan, collected)          results.csv & co. (evaluators.run.outputs)
    write_outputs(plan, outputs)               published as one set; the report drawn in a
                                               thread while the hooks finish (MLflow's logging)

:class:`Steps` lets an orchestrator run the named steps its own way (the Prefect flow runs
``load-log`` and ``write-results`` as tasks); by default they are plain calls.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run import rolling as rolling_mode
from sweval.evaluators.run.driver import Driver, Executor, Hook
from sweval.evaluators.run.outputs import Outputs, tables, write_outputs
from sweval.evaluators.run.plan import Plan, make_plan
from sweval.evaluators.run.sources import load_data, unit_store
from sweval.evaluators.run.work import Measurer, Work, remember
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.wording import units_line

_log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Prepared:
    """A validated run, ready to compute.

    Attributes:
        plan: the plan (for rolling runs: over every complete window, with the series key).
        mode: ``batch`` or ``rolling``.
        step: the rolling step (None in batch mode).
    """

    plan: Plan
    mode: str = "batch"
    step: rolling_mode.RollingStep | None = None

    @cached_property
    def work(self) -> Work:
        """The plan's units as a :class:`Work`: one group per fold (its every stratum), measured
        at the run's k and metrics."""
        plan = self.plan
        groups: dict[int, list[Any]] = {fold.index: [] for fold in plan.folds}
        for unit in plan.units:
            groups[unit.split.index].append(unit)
        for unit in plan.served:  # with the fold whose model they serve: one fit
            assert unit.fitted is not None
            groups[unit.fitted.split.index].append(unit)
        return Work(groups=[groups[fold.index] for fold in plan.folds],
                    measurer=Measurer(list(plan.config.k), list(plan.config.metrics),
                                      items=plan.items),
                    codes=plan.log.fingerprint(), in_order=plan.warm_starts)

    @cached_property
    def recipe(self) -> RunRecipe:
        """What makes the same work in another process."""
        return RunRecipe(self.plan.config, self.plan.key, self.task_fingerprint)

    def share(self) -> Path:
        """Write the log and the plan once for jobs in other processes (:mod:`data.shared`,
        :mod:`evaluators.run.shared_plan`); the folder."""
        from sweval.data.shared import shared_root, write_shared
        from sweval.evaluators.run.shared_plan import plan_path, write_plan

        folder = write_shared(self.plan.log, shared_root(self.plan.config.output))
        write_plan(self.plan, plan_path(folder, self.recipe.cache_key()))
        return folder

    def unshare(self) -> None:
        """Remove the shared log (the jobs are done)."""
        from sweval.data.shared import remove_shared, shared_root

        remove_shared(shared_root(self.plan.config.output))

    @cached_property
    def task_fingerprint(self) -> str:
        """What a process loading the data again must find: the whole log's fingerprint, or in
        rolling mode that of the transactions before the plan's horizon (the log may grow
        meanwhile; the folds only read what lies before it)."""
        if self.mode != "rolling":
            return self.plan.log.fingerprint()
        horizon = self.plan.folds[-1].t_end
        return f"prefix:{horizon}:{rolling_mode.prefix_fingerprint(self.plan.log, horizon)}"


def prepare(
    config: EvalConfig, *, rolling: bool = False, log: InteractionLog | None = None,
    publish: bool = True,
) -> Prepared | None:
    """Load and validate the log once and plan the run; None when a rolling run has no
    complete window yet. ``publish``: the run will write into ``config.output`` (checked).

    Raises:
        SwevalError: any problem with the data or the options, an output directory SW-EVAL
            may not write (checked before any work: :func:`~evaluators.run.output_dir.claim`),
            or a run without ``rolling`` into a rolling series' output directory.
    """
    if rolling:
        step = rolling_mode.plan_rolling(config, log if log is not None else load_data(config))
        if step is None:
            return None
        prepared = Prepared(plan=step.plan, mode="rolling", step=step)
    else:
        series = Path(config.output) / rolling_mode.STATE_FILE
        if publish and series.exists():
            raise SwevalError(
                f"{config.output} holds a rolling series ({series.name}): a run without "
                "--rolling would replace its MLflow record, and the series' next run would "
                "start a new parent run. Pass --rolling to extend the series, write this run "
                f"elsewhere (--output), or delete {series} to end the series."
            )
        prepared = Prepared(plan=make_plan(config, log))
    if publish:  # before any unit is computed
        from sweval.evaluators.run.output_dir import claim

        claim(config.output)
    remember(prepared.recipe, prepared.work)
    return prepared


@dataclass(frozen=True)
class RunRecipe:
    """A run's work, made again in another process (a Dask worker) from its configuration: on
    the log the command shared as memory-mapped arrays (``shared_log``, :mod:`data.shared`)
    with the plan it pickled beside it (:mod:`evaluators.run.shared_plan`), else planned here
    from the data file.

    Attributes:
        config: the plan's configuration (a rolling run's: its windows fixed).
        key: the run key.
        fingerprint: what the data read here must be (:attr:`Prepared.task_fingerprint`).
        shared_log: the folder of the shared log, or None.
    """

    config: EvalConfig
    key: str
    fingerprint: str
    shared_log: str | None = None

    def cache_key(self) -> str:
        text = self.config.model_copy(update={"progress": False}).model_dump_json()
        return hashlib.sha256(f"{text}\0{self.fingerprint}".encode()).hexdigest()

    def store(self) -> UnitStore:
        return unit_store(self.config)

    def work(self) -> Work:
        """The run's work, planned on the data read here.

        Raises:
            SwevalError: the data read here is not the data the run was planned on.
        """
        plan = None
        log = None
        if self.shared_log is not None and Path(self.shared_log, "ids.pkl").exists():
            from sweval.data.shared import read_shared
            from sweval.evaluators.run.shared_plan import plan_path, read_plan

            log = read_shared(self.shared_log)
            plan = read_plan(plan_path(self.shared_log, self.cache_key()), log)
        if plan is None:
            plan = make_plan(self.config, log)
        mode = "rolling" if self.fingerprint.startswith("prefix:") else "batch"
        prepared = Prepared(plan=replace(plan, key=self.key), mode=mode)
        if prepared.task_fingerprint != self.fingerprint:
            raise SwevalError(
                f"{self.config.data}: the data changed while the evaluation ran (fingerprint "
                f"{prepared.task_fingerprint}, planned on {self.fingerprint}); rerun to start "
                "over."
            )
        return prepared.work


class Steps:
    """How the named steps of an evaluation run: ``step(name, function, *args)``; here plain
    calls (an orchestrator runs them as tasks)."""

    def __call__(self, name: str, function: Callable[..., T], *args: Any) -> T:
        return function(*args)


def evaluate_config(
    config: EvalConfig,
    *,
    rolling: bool = False,
    log: InteractionLog | None = None,
    executor: Executor | Callable[[Prepared], Executor] | None = None,
    hooks: Sequence[Hook] = (),
    steps: Steps | None = None,
    publish: bool = True,
    on_prepared: Callable[[Prepared], Iterable[Hook]] | None = None,
    on_outputs: Callable[[Outputs, Callable[[], list[Path]]], None] | None = None,
) -> Outputs | None:
    """Evaluate ``config`` (see the module docstring), resuming from finished units.

    Args:
        config: the run's configuration.
        rolling: evaluate only the complete windows not evaluated yet (:mod:`evaluators.run.rolling`).
        log: an already loaded log (else ``config.data`` is read).
        executor: how fold jobs run (default: in this thread, one after the other), or a
            function that makes it for the prepared run (one that runs jobs elsewhere sends
            them the run's recipe, :attr:`Prepared.recipe`).
        hooks: told of the start, each finished fold, a failure (progress).
        steps: how the named steps run (default: plain calls).
        publish: write the tables, and the report unless ``config.report`` is false, into
            ``config.output`` (a notebook's :func:`sweval.evaluate` may keep them in memory).
        on_prepared: called with the prepared run; returns more hooks (MLflow's, which needs
            the plan).
        on_outputs: called with the tables once they are written, while the report is drawn
            (MLflow's final logging), and a function that returns the report's files once
            they are written.

    Returns:
        The tables; None when a rolling run found no complete window.

    Raises:
        SwevalError: any problem with the data or the options.
    """
    steps = steps or Steps()
    prepared = steps("load-log", _prepare, config, rolling, log, publish)
    if prepared is None:
        return None
    plan = prepared.plan
    store = unit_store(plan.config)
    more = list(on_prepared(prepared)) if on_prepared is not None else []
    if executor is not None and not isinstance(executor, Executor):
        executor = executor(prepared)
    driver = Driver(prepared.work, store, executor=executor, hooks=[*hooks, *more])
    _log.info("%s", units_line(driver.n_units - len(driver.missing), len(driver.missing),
                               driver.code_changed, planned=True))
    collected = driver.run()
    try:
        outputs = steps("write-results", _write, prepared, collected, store, publish)
        report = (write_report_in_background(outputs.directory, intervals=outputs.summary,
                                             store=outputs.unit_store)
                  if publish and plan.config.report else None)
        try:
            if prepared.step is not None and not outputs.failed:
                rolling_mode.record(prepared.step)
            if on_outputs is not None:
                on_outputs(outputs, lambda: _written(report))
        finally:
            if report is not None:
                report.result()
    except BaseException as exc:
        for hook in driver.hooks:
            with contextlib.suppress(Exception):
                hook.failed(driver, exc)
        raise
    if outputs.failed:
        _log.error("%d unit(s) failed, left out of the results (logged above, with their "
                   "tracebacks)", len(outputs.failed))
    return outputs


def _written(report: Future[list[Path]] | None) -> list[Path]:
    """The report's files once written; none when it failed (its error is raised after the
    hooks' final logging, as the run's own, not as theirs)."""
    if report is None or report.exception() is not None:
        return []
    return report.result()


def _prepare(config: EvalConfig, rolling: bool, log: InteractionLog | None,
             publish: bool = True) -> Prepared | None:
    return prepare(config, rolling=rolling, log=log, publish=publish)


def _write(prepared: Prepared, collected: Any, store: UnitStore, publish: bool) -> Outputs:
    """The run's tables, written into its output directory unless ``publish`` is false."""
    plan = prepared.plan
    outputs = tables(plan, collected, prepared.work.measurer,
                     directory=Path(plan.config.output), unit_store=store.directory)
    if publish:
        write_outputs(plan, outputs)
    return outputs


# ------------------------------------------------------------------------------ the report
def write_report_in_background(
    directory: str | Path, *, intervals: Any = None, store: Path | None = None
) -> Future[list[Path]]:
    """:func:`write_report_quietly` in a thread of its own, so that matplotlib's rendering (CPU)
    runs while MLflow's final logging waits on its server."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweval-report")
    try:
        return executor.submit(write_report_quietly, directory, intervals=intervals,
                               store=store)
    finally:
        executor.shutdown(wait=False)  # the thread ends with its one task


def write_report_quietly(directory: str | Path, *, intervals: Any = None,
                         store: Path | None = None) -> list[Path]:
    """Write ``report.html`` and its PNG figures (``intervals``: the run's summary, whose
    bootstrap intervals the report takes; ``store``: the unit store whose memo keeps the
    figures for a report of the same tables); a report problem never fails the run. A report
    that could not be written removes an earlier one, which would no longer match the
    tables."""
    from sweval.evaluators.report.page import REPORT_PAGE, write_report
    from sweval.evaluators.run.output_dir import discard, manifest
    from sweval.evaluators.units.memo import Memo

    try:
        return write_report(directory, intervals=intervals,
                            memo=Memo(store) if store is not None else None)
    except (SwevalError, OSError, ValueError) as exc:
        _log.warning("could not write the HTML report: %s", exc)
        with contextlib.suppress(OSError):
            if manifest(directory) is not None:
                discard(directory, [REPORT_PAGE])
            else:  # written by an SW-EVAL before manifests
                (Path(directory) / REPORT_PAGE).unlink(missing_ok=True)
        return []
