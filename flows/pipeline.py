"""The evaluation driver that the Prefect flow and the in-process path share (no Prefect here).

::

    prepared = prepare(config, rolling=...)          load + validate the log once, cut the folds
    evaluation = Evaluation(prepared, tracker=...)   unit store (resume) + MLflow (resume)
    for job in evaluation.jobs():                    one job per fold with missing units
        outcome = compute_fold(config, job...)       (a Prefect task: runs anywhere, persists
        evaluation.accept(job, outcome)               each unit as it finishes, measures it)
    outputs = evaluation.outputs()                   results.csv & co. from the measured units;
                                                     the report drawn in a thread meanwhile
    evaluation.finish(outputs)                       MLflow summaries, then the report's files

``compute_fold`` receives only small, picklable inputs (the configuration, a fold index, the run
key and the data fingerprint): on a Dask worker it loads the log once per process and checks the
fingerprint; in the flow's own process it reuses the already loaded plan. It sends back each
computed unit measured at the run's k (per-user metric arrays and the top max(k) lists), so the
flow never reads the units back from the store; their lists too only for a cluster that may not
share the flow's unit store (``--dask-address``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.units.engine import UnitResult
from sweval.evaluators.run.outputs import (
    Measuring,
    Outputs,
    algorithm_rows,
    collect,
    measure_computed,
    write_outputs,
)
from sweval.evaluators.run.plan import Plan, make_plan, missing_units, run_fold, unit_store
from sweval.evaluators.units.store import UnitFiles
from sweval.evaluators.units.unit import Unit, UnitFailure, describe, outdated_by_code
from sweval.flows import rolling as rolling_mode
from sweval.flows.processes import is_stop
from sweval.flows.cli.summary import units_line

if TYPE_CHECKING:
    import pandas as pd

_log = logging.getLogger(__name__)

#: Seconds between two MLflow logging calls for finished folds: folds finished meanwhile go in
#: one ``log_batch`` per algorithm (each call is a round trip to the server, about 30 ms on 2
#: cores, and on the run's critical path). A run that stops between two calls has its last
#: folds in the unit store; the next run logs them (:meth:`Evaluation.start`).
TRACKING_INTERVAL_S = 1.0

# ------------------------------------------------------------------------------ plans per process
_PLANS: OrderedDict[tuple[str, str], Plan] = OrderedDict()
_PLANS_LOCK = threading.Lock()
_PLANS_KEPT = 2


def _cache_key(config: EvalConfig, fingerprint: str) -> tuple[str, str]:
    return (config.model_copy(update={"progress": False}).model_dump_json(), fingerprint)


def remember(plan: Plan, fingerprint: str) -> None:
    """Keep ``plan`` for the fold tasks of this process (the last two plans are kept)."""
    with _PLANS_LOCK:
        _PLANS[_cache_key(plan.config, fingerprint)] = plan
        while len(_PLANS) > _PLANS_KEPT:
            _PLANS.popitem(last=False)


def data_fingerprint(plan: Plan, *, rolling: bool) -> str:
    """What a process loading the data again must find: the whole log's fingerprint, or in
    rolling mode that of the transactions before the plan's horizon (the log may grow meanwhile;
    the folds only read what lies before the horizon)."""
    if not rolling:
        return plan.log.fingerprint()
    horizon = plan.folds[-1].t_end
    return f"prefix:{horizon}:{rolling_mode.prefix_fingerprint(plan.log, horizon)}"


def _fingerprint_of(plan: Plan, expected: str) -> str:
    if expected.startswith("prefix:"):
        horizon = int(expected.split(":")[1])
        return f"prefix:{horizon}:{rolling_mode.prefix_fingerprint(plan.log, horizon)}"
    return plan.log.fingerprint()


def plan_for(config: EvalConfig, fingerprint: str, key: str, shared_log: str | None = None) -> Plan:
    """The plan of ``config`` in this process: cached, or (e.g. on a Dask worker) the flow's
    plan on the log it shared (:mod:`flows.dask.shared_log`, :mod:`flows.dask.shared_plan`), else made
    once here from the shared log, else (no shared log, or a worker that cannot see the flow's
    output directory) from the data file.

    Raises:
        SwevalError: the data read here is not the data the run was planned on.
    """
    cache_key = _cache_key(config, fingerprint)
    with _PLANS_LOCK:
        plan = _PLANS.get(cache_key)
        if plan is None:
            log = None
            if shared_log is not None and Path(shared_log, "ids.pkl").exists():
                from sweval.flows.dask.shared_log import read_shared
                from sweval.flows.dask.shared_plan import plan_path, read_plan

                log = read_shared(shared_log)
                plan = read_plan(plan_path(shared_log, cache_key), log)
            if plan is None:
                plan = make_plan(config, log)
            found = _fingerprint_of(plan, fingerprint)
            if found != fingerprint:
                raise SwevalError(
                    f"{config.data}: the data changed while the evaluation ran (fingerprint "
                    f"{found}, planned on {fingerprint}); rerun to start over."
                )
            _PLANS[cache_key] = plan
            while len(_PLANS) > _PLANS_KEPT:
                _PLANS.popitem(last=False)
    return plan if plan.key == key else replace(plan, key=key)


# ------------------------------------------------------------------------------------- preparing
def precheck(config: EvalConfig) -> None:
    """The cheap checks of :func:`evaluators.run.plan.make_plan`, before any server or data load:
    algorithm names and parameters, durations and times, that the data file exists. The CLI runs
    them first, so a typo fails in a second, not after Prefect's temporary server started.

    Raises:
        SwevalError: the first problem found.
    """
    from sweval.data.loaders import source_files
    from sweval.evaluators.run.plan import algorithm_specs, window_spec

    algorithm_specs(config)
    window_spec(config)
    if config.data is not None:
        source_files(config.data)


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

    @property
    def fingerprint(self) -> str:
        """The data fingerprint of the whole log (tracking, config.json)."""
        return self.plan.log.fingerprint()

    @cached_property
    def task_fingerprint(self) -> str:
        """What fold tasks check when they load the data again (see :func:`data_fingerprint`)."""
        return data_fingerprint(self.plan, rolling=self.mode == "rolling")


def prepare(
    config: EvalConfig, *, rolling: bool = False, log: InteractionLog | None = None
) -> Prepared | None:
    """Load and validate the log once and cut the folds; None when a rolling run has no
    complete window yet.

    Raises:
        SwevalError: any problem with the data or the options.
    """
    if rolling:
        if log is None:
            from sweval.evaluators.run.plan import load_data

            log = load_data(config)
        step = rolling_mode.plan_rolling(config, log)
        if step is None:
            return None
        prepared = Prepared(plan=step.plan, mode="rolling", step=step)
    else:
        series = Path(config.output) / rolling_mode.STATE_FILE
        if series.exists():
            raise SwevalError(
                f"{config.output} holds a rolling series ({series.name}): a run without "
                "--rolling would replace its MLflow record, and the series' next run would "
                "start a new parent run. Pass --rolling to extend the series, write this run "
                f"elsewhere (--output), or delete {series} to end the series."
            )
        prepared = Prepared(plan=make_plan(config, log))
    remember(prepared.plan, prepared.task_fingerprint)
    return prepared


# ------------------------------------------------------------------------------------- one fold
@dataclass(frozen=True)
class FoldOutcome:
    """What a fold task returns.

    Attributes:
        measured: the units it computed, measured at the run's k, by key (codes of the log
            whose fingerprint is ``log``).
        log: the fingerprint of the log the task's plan read: the flow uses ``measured`` only
            when it is its own log (a rolling run's worker may read a grown log, other codes).
        failed: the units whose algorithm raised.
        files: the computed units in raw ids, when asked for (a cluster that may not share the
            flow's unit store: the flow writes them there).
    """

    measured: dict[str, UnitResult]
    log: str
    failed: list[UnitFailure]
    files: dict[str, UnitFiles]


def compute_fold(
    config: EvalConfig,
    fold_index: int,
    names: list[str],
    *,
    key: str,
    fingerprint: str,
    shared_log: str | None = None,
    send_lists: bool = False,
) -> FoldOutcome:
    """Compute the named algorithms' missing units of one fold, each saved in the unit store
    as soon as it is finished (units an earlier attempt finished are not recomputed), and
    measure them. A unit whose algorithm raises is logged with its traceback and reported; the
    others go on. ``shared_log``: the folder of the log the flow shared, read instead of the
    data file; ``send_lists``: return the computed units' lists too (:class:`FoldOutcome`)."""
    plan = plan_for(config, fingerprint, key, shared_log)
    store = unit_store(config)
    failed: list[UnitFailure] = []
    computed = run_fold(plan, fold_index, store, names, failures=failed)
    units = plan.units_of(fold_index, names)
    logs = {unit.key: unit.split.log for unit in units}
    return FoldOutcome(
        measured=measure_computed(plan, store, units, computed),
        log=plan.log.fingerprint(),
        failed=failed,
        files=({key: UnitFiles.of(lists, logs[key]) for key, lists in computed.items()}
               if send_lists else {}),
    )


@dataclass(frozen=True)
class FoldJob:
    """A fold with units left to compute."""

    fold: int
    names: list[str]


# ------------------------------------------------------------------------------------- the driver
class Evaluation:
    """One evaluation's bookkeeping in the orchestrating thread: store, MLflow, progress.

    Args:
        prepared: the validated run.
        tracker: an open :class:`flows.tracking.Tracker`, or None for no MLflow.
        progress: optional ``progress(n_units)`` callable.
    """

    def __init__(
        self,
        prepared: Prepared,
        *,
        tracker: Any = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.prepared = prepared
        self.plan = prepared.plan
        self.config = prepared.plan.config
        self.store = unit_store(self.config)
        self.measuring = Measuring(self.plan, self.store)  # for MLflow's rows as folds finish
        self.tracker = tracker
        self.progress = progress
        self.missing = missing_units(self.plan, self.store)
        self.store.planned()  # every unit it reuses is marked used now (sweval cache prune)
        self.code_changed = outdated_by_code(self.missing, self.store)
        self.computed = 0
        self.computed_keys: set[str] = set()
        self.failed: list[UnitFailure] = []
        self.tracking_deferred = False
        #: Finished folds not logged to MLflow yet, and when the last logging call was.
        self.unlogged: list[FoldJob] = []
        self.logged_at = time.monotonic()
        #: The report being written (:meth:`outputs`), in a thread of its own.
        self.report: Future[list[Path]] | None = None
        #: The folder of the log shared with fold tasks in other processes, or None.
        self.shared_log: str | None = None

    @property
    def key(self) -> str:
        return self.plan.key

    @property
    def reused(self) -> int:
        """Units of the plan that were already in the store when the run started."""
        return len({unit.key for unit in self.plan.units}) - len(self.missing)

    @property
    def taken_from_store(self) -> int:
        """Units of the plan this run did not compute itself: those stored when it started and
        those another process sharing the store finished meanwhile."""
        return len({unit.key for unit in self.plan.units}) - self.computed

    def pending_units(self) -> list[Unit]:
        """The plan's units whose key is missing (two labels may share a key)."""
        keys = {unit.key for unit in self.missing}
        return [unit for unit in self.plan.units if unit.key in keys]

    def jobs(self) -> list[FoldJob]:
        """One job per fold that still misses units, in fold order, with the algorithms whose
        units (any stratum) are missing."""
        todo: dict[int, list[str]] = {}
        for unit in self.pending_units():
            names = todo.setdefault(unit.split.index, [])
            if unit.spec.label not in names:
                names.append(unit.spec.label)
        order = {spec.label: i for i, spec in enumerate(self.plan.specs)}
        return [FoldJob(fold, sorted(names, key=order.__getitem__))
                for fold, names in sorted(todo.items())]

    def job_parameters(self, job: FoldJob) -> dict[str, Any]:
        """The keyword arguments of :func:`compute_fold` for ``job``."""
        return {
            "config": self.config,
            "fold_index": job.fold,
            "names": job.names,
            "key": self.key,
            "fingerprint": self.prepared.task_fingerprint,
            "shared_log": self.shared_log,
            "send_lists": self.config.task_runner == "dask" and bool(self.config.dask_address),
        }

    def share_log(self) -> None:
        """Write the log and the plan once for fold tasks in other processes
        (:mod:`flows.dask.shared_log`, :mod:`flows.dask.shared_plan`); batch runs only (a rolling run's
        tasks check a prefix of a log that may grow)."""
        if self.prepared.mode != "batch":
            return
        from sweval.flows.dask.shared_log import shared_root, write_shared
        from sweval.flows.dask.shared_plan import plan_path, write_plan

        folder = write_shared(self.plan.log, shared_root(self.config.output))
        write_plan(self.plan, plan_path(folder, _cache_key(self.config,
                                                           self.prepared.task_fingerprint)))
        self.shared_log = str(folder)

    def unshare_log(self) -> None:
        """Remove the shared log (the fold tasks are done)."""
        if self.shared_log is not None:
            from sweval.flows.dask.shared_log import remove_shared, shared_root

            remove_shared(shared_root(self.config.output))
            self.shared_log = None

    def log_line(self) -> str:
        """``reusing R units, computing C (N because the code changed)``: the plan, at the
        start (the run's summary says what was done)."""
        return units_line(self.reused, len(self.missing), self.code_changed, planned=True)

    def _rows(self, fold: int, names: list[str]) -> tuple[list[Mapping[str, Any]], dict[str, str]]:
        rows: list[Mapping[str, Any]] = []
        devices = {}
        for name in names:
            fold_rows, record = algorithm_rows(
                self.measuring, fold, name,
                skip=frozenset(failure.key for failure in self.failed),
            )
            rows += fold_rows
            if record is not None:
                devices[name] = record["device"]
        return rows, devices

    def start(self) -> None:
        """Log to MLflow what is already finished (skipped folds included)."""
        if self.tracker is None:
            return
        pending = {(unit.split.index, unit.spec.label) for unit in self.pending_units()}
        self._log_folds(
            (fold.index, [spec.label for spec in self.plan.specs
                          if (fold.index, spec.label) not in pending])
            for fold in self.plan.folds
        )

    def accept(self, job: FoldJob, outcome: FoldOutcome) -> None:
        """Take a finished fold: make sure its units are stored, keep their measured results
        (for MLflow's rows now and the tables at the end), log them, advance progress; remember
        its failed units."""
        self.failed += outcome.failed
        for unit in self.plan.units_of(job.fold, job.names):
            if unit.key in outcome.files and not self.store.has(unit.key, depth=unit.depth):
                # the worker may not share our filesystem
                self.store.write(unit.key, outcome.files[unit.key], describe(unit))
        if outcome.log == self.plan.log.fingerprint():  # measured on this log's codes
            self.measuring.results |= outcome.measured
        self.computed += len(outcome.measured)
        self.computed_keys |= outcome.measured.keys()
        if self.tracker is not None and not self.tracking_deferred:
            self.unlogged.append(job)
            if time.monotonic() - self.logged_at >= TRACKING_INTERVAL_S:
                self.log_unlogged()
        if self.progress is not None:
            self.progress(len(job.names))

    def log_unlogged(self) -> None:
        """Log the finished folds not logged yet to MLflow, in one call per algorithm."""
        jobs, self.unlogged = self.unlogged, []
        if self.tracker is None or self.tracking_deferred or not jobs:
            return
        self._log_folds((job.fold, job.names) for job in jobs)
        self.logged_at = time.monotonic()

    def _log_folds(self, folds: Iterable[tuple[int, list[str]]]) -> None:
        """Log the rows of these (fold, algorithm labels) to MLflow in one call per algorithm;
        if MLflow fails, log nothing more until :meth:`finish` (which logs everything)."""
        rows: list[Mapping[str, Any]] = []
        devices: dict[str, str] = {}
        for fold, labels in folds:
            fold_rows, fold_devices = self._rows(fold, labels)
            rows += fold_rows
            devices |= fold_devices
        try:
            self.tracker.log_rows(rows)
            self.tracker.set_devices(devices)
        except SwevalError as exc:  # keep computing; finish() logs everything or fails
            _log.warning("MLflow logging deferred to the end of the run: %s", exc)
            self.tracking_deferred = True

    def outputs(self) -> Outputs:
        """Collect the tables from the store, write them and the report to the output directory."""
        outputs = collect(self.plan, self.store, failed=self.failed,
                          results=self.measuring.results, computed=self.computed_keys)
        computed = self.computed + outputs.n_recomputed
        outputs = replace(
            outputs, n_reused=self.taken_from_store - outputs.n_recomputed
            - len({failure.key for failure in self.failed}),
            n_computed=computed, n_code_changed=min(self.code_changed, computed),
        )
        write_outputs(self.plan, outputs)
        self.report = write_report_in_background(outputs.directory, intervals=outputs.summary)
        return outputs

    def report_files(self) -> list[Path]:
        """The report's files once written (waits for :meth:`outputs`' thread; none before).

        Raises:
            Exception: what the report's thread raised unexpectedly.
        """
        return self.report.result() if self.report is not None else []

    def _written_report_files(self) -> list[Path]:
        """:meth:`report_files`, or none when the thread failed (its error is raised after
        MLflow's final logging, as the run's own, not as MLflow's)."""
        if self.report is None or self.report.exception() is not None:
            return []
        return self.report.result()

    def finish(self, outputs: Outputs) -> None:
        """Record the rolling state and complete the MLflow runs; with failed units, log how
        many (each was logged as it failed), mark the MLflow runs FAILED (their metrics are
        logged all the same) and do not record a rolling step (its windows are evaluated again
        next time). Returns once the report is written: MLflow's final logging runs while it
        is, and its files go last."""
        if self.prepared.step is not None and not outputs.failed:
            rolling_mode.record(self.prepared.step)
        if self.tracker is not None:
            directory = Path(outputs.directory)
            files = [directory / name for name in (
                "results.csv", "summary.csv", "folds.csv", "units.csv", "config.json",
                "tuning.csv", "optimism.csv", "significance.csv", "significance_strata.csv",
                "overlap.csv", "per_user.parquet",
            ) if (directory / name).exists()]
            self.tracker.finish(
                outputs.results, outputs.summary, outputs.devices, files,
                n_folds=len(self.plan.folds), late_files=self._written_report_files,
            )
        self.report_files()
        if outputs.failed:
            _log.error("%d unit(s) failed, left out of the results (logged above, with their "
                       "tracebacks)", len(outputs.failed))
            if self.tracker is not None:
                self.tracker.fail("FAILED")

    def fail(self, exc: BaseException) -> None:
        if self.report is not None:
            self.report.exception()  # wait for the report's thread; the run's error comes first
        if self.tracker is not None:
            stopped = is_stop(exc)
            if not stopped:  # the folds finished before the error
                try:
                    self.log_unlogged()
                except Exception:  # never hide the run's own error behind a logging one
                    _log.debug("could not log the last folds to MLflow", exc_info=True)
            self.tracker.fail("KILLED" if stopped else "FAILED")


def write_report_in_background(
    directory: str | Path, *, intervals: pd.DataFrame | None = None
) -> Future[list[Path]]:
    """:func:`write_report_quietly` in a thread of its own, so that matplotlib's rendering (CPU)
    runs while MLflow's final logging waits on its server."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweval-report")
    try:
        return executor.submit(write_report_quietly, directory, intervals=intervals)
    finally:
        executor.shutdown(wait=False)  # the thread ends with its one task


def write_report_quietly(
    directory: str | Path, *, intervals: pd.DataFrame | None = None
) -> list[Path]:
    """Write ``report.html`` and its PNG figures (``intervals``: the run's summary, whose
    bootstrap intervals the report takes); a report problem never fails the run. A report that
    could not be written removes an earlier one, which would no longer match the tables."""
    from sweval.evaluators.run.output_dir import discard, manifest
    from sweval.evaluators.report.page import REPORT_PAGE, write_report

    try:
        return write_report(directory, intervals=intervals)
    except (SwevalError, OSError, ValueError) as exc:
        _log.warning("could not write the HTML report: %s", exc)
        with contextlib.suppress(OSError):
            if manifest(directory) is not None:
                discard(directory, [REPORT_PAGE])
            else:  # written by an SW-EVAL before manifests
                (Path(directory) / REPORT_PAGE).unlink(missing_ok=True)
        return []


def open_tracker(
    prepared: Prepared, *, flow_run_id: str | None = None, flow_run_name: str | None = None
) -> Any:
    """The MLflow tracker of a prepared run, or None when tracking is off."""
    config = prepared.plan.config
    if not config.tracking:
        return None
    from sweval.flows.tracking import Tracker, log_profile

    return Tracker.open(
        config,
        key=prepared.plan.key,
        fingerprint=prepared.fingerprint,
        source=prepared.plan.log.source,
        mode=prepared.mode,
        flow_run_id=flow_run_id,
        flow_run_name=flow_run_name,
        profile=log_profile(prepared.plan.log),
    )
