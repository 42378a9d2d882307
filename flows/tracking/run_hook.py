"""The MLflow logging of an evaluation as the driver runs it: a :class:`~evaluators.run.driver.Hook`.

::

    started      the folds already finished (reused units, skipped folds) are logged first
    job_done     each fold's rows once its units are finished: folds finished within
                 TRACKING_INTERVAL_S of each other go in one log_batch per algorithm
    finish       the summary, the tables and the report as artifacts; the runs end FINISHED
                 (FAILED when a unit failed)
    failed       the folds finished before the error are logged, the runs end FAILED (KILLED
                 when the command was stopped)

If MLflow fails while folds are logged, the run goes on and logs everything at the end (or
fails there): the evaluation never waits on a tracker that does not answer. A tracking server
that accepts connections but does not answer when the run opens its runs
(:class:`~flows.tracking.client.SilentTracker`, seconds) is tried again at the end, once the
tables are written: the run evaluates without waiting on it, then fails with its error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.evaluators.experiments.retraining import FILES as RETRAINING_FILES
from sweval.evaluators.run.driver import Driver, Hook
from sweval.evaluators.run.evaluate import Prepared
from sweval.evaluators.run.outputs import Outputs
from sweval.evaluators.run.rows import Rows, algorithm_rows
from sweval.evaluators.run.work import Job, Outcome

_log = logging.getLogger(__name__)

#: Seconds between two MLflow logging calls for finished folds: folds finished meanwhile go in
#: one ``log_batch`` per algorithm (each call is a round trip to the server, about 30 ms on 2
#: cores, and on the run's critical path). A run that stops between two calls has its last
#: folds in the unit store; the next run logs them (:meth:`RunTracking.started`).
TRACKING_INTERVAL_S = 1.0

#: The files of a run logged as artifacts, when it wrote them.
RUN_FILES = ("results.csv", "summary.csv", "folds.csv", "units.csv", "config.json", "tuning.csv",
             "optimism.csv", "significance.csv", "significance_strata.csv", "overlap.csv",
             "per_user.parquet", *RETRAINING_FILES)


class RunTracking(Hook):
    """Logs one evaluation to MLflow through an open :class:`~flows.tracking.Tracker`."""

    def __init__(self, prepared: Prepared, tracker: Any,
                 reopen: Callable[[], Any] | None = None) -> None:
        """``tracker`` is None when its server did not answer; ``reopen`` then opens it at the
        end of the run."""
        self.plan = prepared.plan
        self.measurer = prepared.work.measurer
        self.tracker = tracker
        self.reopen = reopen
        self.deferred = tracker is None
        self.unlogged: list[Job] = []
        self.logged_at = time.monotonic()
        self.driver: Driver | None = None

    def started(self, driver: Driver) -> None:
        """Log what is already finished (skipped folds included)."""
        self.driver = driver
        pending = driver.pending()
        self._log_folds((index, [spec.label for spec in self.plan.specs
                                 if (index, spec.label) not in pending])
                        for index in range(len(self.plan.folds)))

    def job_done(self, driver: Driver, job: Job, outcome: Outcome) -> None:
        self.unlogged.append(job)
        if time.monotonic() - self.logged_at >= TRACKING_INTERVAL_S:
            self.log_unlogged()

    def log_unlogged(self) -> None:
        """Log the finished folds not logged yet, in one call per algorithm."""
        jobs, self.unlogged = self.unlogged, []
        if not jobs:
            return
        self._log_folds((job.group, list(job.labels)) for job in jobs)
        self.logged_at = time.monotonic()

    def _log_folds(self, folds: Iterable[tuple[int, list[str]]]) -> None:
        """Log the rows of these (fold, labels) in one call per algorithm; if MLflow fails,
        log nothing more until :meth:`finish` (which logs everything)."""
        if self.deferred or self.driver is None:
            return
        context = Rows(self.plan, self.driver.result, self.measurer,
                       failed=frozenset(failure.key for failure in self.driver.failed))
        rows: list[Mapping[str, Any]] = []
        devices: dict[str, str] = {}
        for fold, labels in folds:
            for label in labels:
                fold_rows, record = algorithm_rows(context, fold, label)
                rows += fold_rows
                if record is not None:
                    devices[label] = record["device"]
        try:
            self.tracker.log_rows(rows, devices)
            self.tracker.set_devices(devices)
        except SwevalError as exc:  # keep computing; finish() logs everything or fails
            _log.warning("MLflow logging deferred to the end of the run: %s", exc)
            self.deferred = True

    def finish(self, outputs: Outputs, report_files: Callable[[], list[Path]]) -> None:
        """Complete the MLflow runs: every row, the summary, the tables and (once drawn) the
        report; FAILED when some units failed (their metrics are logged all the same)."""
        from sweval.flows.tracking.client import SilentTracker, check_answers

        directory = Path(outputs.directory)
        try:
            if self.tracker is None and self.reopen is not None:
                self.tracker = self.reopen()
            elif self.deferred:  # a server that stopped answering mid-run: asked once, briefly
                check_answers(self.tracker.uri)
        except SilentTracker as exc:
            raise SilentTracker(
                f"{str(exc).removesuffix('.')}. The tables are written in {directory}; "
                "rerun the same command once MLflow answers to log them (nothing is "
                "computed again).") from None
        files = [directory / name for name in RUN_FILES if (directory / name).exists()]
        self.tracker.finish(outputs.results, outputs.summary, outputs.devices, files,
                            n_folds=len(self.plan.folds), late_files=report_files)
        if outputs.failed:
            self.tracker.fail("FAILED")

    def failed(self, driver: Driver, exc: BaseException) -> None:
        from sweval.flows.processes import stopping

        stopped = stopping(exc)
        if self.tracker is None:  # its server never answered: no run to mark
            return
        if not stopped:  # the folds finished before the error
            try:
                self.log_unlogged()
            except Exception:  # never hide the run's own error behind a logging one
                _log.debug("could not log the last folds to MLflow", exc_info=True)
        self.tracker.fail("KILLED" if stopped else "FAILED")


def run_tracking(
    prepared: Prepared, *, flow_run_id: str | None = None, flow_run_name: str | None = None
) -> RunTracking | None:
    """The MLflow hook of a prepared run, or None when tracking is off. A tracking server that
    does not answer is said in a warning and tried again once the tables are written."""
    from sweval.flows.tracking.client import SilentTracker

    def opened() -> Any:
        return open_tracker(prepared, flow_run_id=flow_run_id, flow_run_name=flow_run_name)

    try:
        tracker = opened()
    except SilentTracker as exc:
        _log.warning("MLflow logging deferred to the end of the run: %s", exc)
        return RunTracking(prepared, None, reopen=opened)
    return RunTracking(prepared, tracker) if tracker is not None else None


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
        fingerprint=prepared.plan.log.fingerprint(),
        source=prepared.plan.log.source,
        mode=prepared.mode,
        flow_run_id=flow_run_id,
        flow_run_name=flow_run_name,
        profile=log_profile(prepared.plan.log),
    )
