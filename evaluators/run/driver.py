"""The one loop every command runs: plan the units, compute the missing ones, collect them.

::

    work = Work(groups, measurer)              a command's units, grouped by split (or fold)
    driver = Driver(work, store, executor=Threads(2), hooks=[progress, tracking])
    collected = driver.run()
      missing    the units the store lacks (once per key); how many other code computed
      jobs       one Job per group with missing units, in group order
      executor   runs compute_group(job) for each job: in this process (Sequential, Threads)
                 or elsewhere (Dask, Prefect tasks: flows.executors); every unit is computed
                 under its lock, saved as soon as it is finished and measured while its lists
                 are at hand; a unit whose algorithm raises is reported, the others go on
      hooks      told of the start, of each finished job, and of a failure (progress, MLflow)
      collect    every unit's result: measured where it was computed, else loaded from the
                 store and measured (one pruned or damaged meanwhile: computed again)

Commands turn the collected results into their tables (:mod:`evaluators.run.outputs`,
:mod:`evaluators.experiments.protocol_runs`); nothing else computes a unit.

An executor that runs jobs in other processes cannot send the work itself (its splits hold the
log): it sends the work's :class:`~evaluators.run.work.Recipe`, from which each process makes
the same work once (:func:`~evaluators.run.work.work_of`), and the jobs refer to its groups by
index. The work, the jobs and what they send back are in :mod:`evaluators.run.work`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Protocol, runtime_checkable

from sweval.algorithms.threads import thread_budget, usable_cpus
from sweval.evaluators.run.work import Collected, Job, Outcome, Work
from sweval.evaluators.units.engine import UnitLists, UnitResult
from sweval.evaluators.units.failures import AlgorithmFailed, UnitFailure
from sweval.evaluators.units.files import UnitFiles
from sweval.evaluators.units.serving import FittedModels
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.units.unit import (
    Unit,
    compute_unit,
    describe,
    outdated_by_code,
    read_or_recompute,
)

_log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ one job
def compute_group(work: Work, job: Job, store: UnitStore, *, send_lists: bool = False,
                  threads: int | None = None) -> Outcome:
    """Compute the job's units that ``store`` lacks, each under its lock (a unit another
    process is computing is waited for, then reused), saved as soon as it is finished, and
    measure them. The group's training data is released at the end.

    Args:
        work: the work the job belongs to.
        job: which group and algorithm configurations.
        store: where finished units are, and go.
        send_lists: return the computed units' files too (:attr:`Outcome.files`).
        threads: the threads each unit's libraries may use (None: their defaults).
    """
    units = [unit for unit in work.groups[job.group] if unit.spec.label in job.labels]
    computed: dict[str, UnitLists] = {}
    failed: list[UnitFailure] = []
    models = FittedModels.for_units(units)  # one fit per fold serves the later windows
    with thread_budget(threads):
        try:
            for unit in units:
                if unit.key in computed or store.has(unit.key, depth=unit.depth):
                    continue
                with store.lock(unit.key):
                    if store.has(unit.key, depth=unit.depth):  # another process finished it
                        continue
                    try:
                        computed[unit.key] = compute_unit(unit, store, models=models,
                                                          log_failure=work.log_failures)
                    except AlgorithmFailed as exc:  # logged with its traceback where it failed
                        failed.append(exc.failure)
        finally:
            for unit in work.groups[job.group]:  # the group's training data is not needed again
                unit.split.release()
    first = {unit.key: unit for unit in reversed(units)}  # a key's first label
    return Outcome(
        measured={key: work.measurer.measure(first[key], lists) for key, lists in computed.items()},
        codes=work.codes,
        failed=failed,
        files=({key: UnitFiles.of(lists, first[key].split.log) for key, lists in computed.items()}
               if send_lists else {}),
    )


# ------------------------------------------------------------------------------ executors
#: A job's result: its outcome, or what it raised.
Done = tuple[Job, "Outcome | BaseException"]


@runtime_checkable
class Executor(Protocol):
    """Runs jobs and yields each one's outcome as it finishes (in any order)."""

    def run(self, driver: Driver, jobs: Sequence[Job]) -> Iterator[Done]:
        ...


class Sequential:
    """The jobs one after the other, in this thread."""

    def run(self, driver: Driver, jobs: Sequence[Job]) -> Iterator[Done]:
        for job in jobs:
            try:
                yield job, compute_group(driver.work, job, driver.store)
            except Exception as exc:  # noqa: BLE001 (the driver raises it once the rest is done)
                yield job, exc


class Threads:
    """The jobs in ``workers`` threads of this process, each unit's libraries limited to an
    equal share of the CPUs (at least one thread each): several ALS fits on two cores must not
    each start a thread per core. BLAS's pool is process-wide: it is capped once, around all
    the jobs. Works whose groups must run in order run one job at a time."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or usable_cpus()

    def run(self, driver: Driver, jobs: Sequence[Job]) -> Iterator[Done]:
        if driver.work.in_order or self.workers == 1 or len(jobs) <= 1:
            yield from Sequential().run(driver, jobs)
            return
        from threadpoolctl import threadpool_limits

        threads = max(1, usable_cpus() // self.workers)
        with threadpool_limits(limits=threads, user_api="blas"), \
                ThreadPoolExecutor(self.workers, thread_name_prefix="sweval-job") as pool:
            pending = {pool.submit(compute_group, driver.work, job, driver.store,
                                   threads=threads): job for job in jobs}
            try:
                while pending:
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        job = pending.pop(future)
                        exc = future.exception()
                        yield job, exc if exc is not None else future.result()
            finally:
                for future in pending:  # a stop: the running jobs finish their current unit
                    future.cancel()


# ------------------------------------------------------------------------------ hooks
class Hook:
    """Told what the driver does; every method does nothing unless overridden."""

    def started(self, driver: Driver) -> None:
        """The missing units are known, nothing is computed yet."""

    def job_done(self, driver: Driver, job: Job, outcome: Outcome) -> None:
        """A job finished (its units are stored and measured)."""

    def finished(self, driver: Driver) -> None:
        """Every job finished (the units are collected next)."""

    def failed(self, driver: Driver, exc: BaseException) -> None:
        """The run failed or was stopped."""


# ------------------------------------------------------------------------------ the driver
class Driver:
    """Computes a :class:`Work`'s missing units through an executor and collects every unit.

    Args:
        work: what to compute.
        store: where finished units are, and go.
        executor: how jobs run (default: :class:`Sequential`).
        hooks: told what happens (progress, tracking).
    """

    def __init__(self, work: Work, store: UnitStore, *, executor: Executor | None = None,
                 hooks: Iterable[Hook] = ()) -> None:
        self.work = work
        self.store = store
        self.executor = executor or Sequential()
        self.hooks = list(hooks)
        self.missing = self._missing()
        store.planned()  # every unit it reuses is marked used now (sweval cache prune)
        self.code_changed = outdated_by_code(self.missing, store)
        #: measured results by key: of the jobs, then of the units read from the store
        self.measured: dict[str, UnitResult] = {}
        self.computed: set[str] = set()
        #: the units computed again while collecting (pruned or damaged meanwhile)
        self.recomputed: set[str] = set()
        self.failed: list[UnitFailure] = []

    def _missing(self) -> list[Unit]:
        """The work's units the store does not hold (or with too short lists), once per key
        (a variant with default parameters is the plain algorithm's unit)."""
        missing: dict[str, Unit] = {}
        for unit in self.work.units:
            if unit.key not in missing and not self.store.has(unit.key, depth=unit.depth):
                missing[unit.key] = unit
        return list(missing.values())

    @property
    def n_units(self) -> int:
        return len({unit.key for unit in self.work.units})

    def jobs(self) -> list[Job]:
        """One job per group that misses units, in group order, with the labels whose units
        are missing (a label's units in every stratum of the group)."""
        keys = {unit.key for unit in self.missing}
        jobs = []
        for index, group in enumerate(self.work.groups):
            labels = list(dict.fromkeys(unit.spec.label for unit in group if unit.key in keys))
            if labels:
                jobs.append(Job(index, tuple(labels)))
        return jobs

    def pending(self) -> set[tuple[int, str]]:
        """(group, label) pairs with units still to compute."""
        keys = {unit.key for unit in self.missing} - self.computed
        return {(index, unit.spec.label) for index, group in enumerate(self.work.groups)
                for unit in group if unit.key in keys}

    def run(self) -> Collected:
        """Compute every missing unit and collect every unit of the work.

        Raises:
            Exception: what a job raised (once every other job has finished); the hooks are
                told (:meth:`Hook.failed`), as they are of a stop.
        """
        try:
            for hook in self.hooks:
                hook.started(self)
            errors: list[BaseException] = []
            for job, outcome in self.executor.run(self, self.jobs()):
                if isinstance(outcome, BaseException):
                    errors.append(outcome)
                    continue
                self.accept(job, outcome)
            if errors:
                raise errors[0]
            for hook in self.hooks:
                hook.finished(self)
            return self.collect()
        except BaseException as exc:
            for hook in self.hooks:
                with contextlib.suppress(Exception):  # never hide the run's own error
                    hook.failed(self, exc)
            raise

    def accept(self, job: Job, outcome: Outcome) -> None:
        """Take a finished job: store the units a remote worker sent, keep their results, tell
        the hooks."""
        self.failed += outcome.failed
        group = self.work.groups[job.group]
        for unit in group:
            if unit.key in outcome.files and not self.store.has(unit.key, depth=unit.depth):
                self.store.write(unit.key, outcome.files[unit.key], describe(unit))
        if outcome.codes == self.work.codes:  # measured in this work's codes
            self.measured |= outcome.measured
        self.computed |= outcome.measured.keys()
        for hook in self.hooks:
            hook.job_done(self, job, outcome)

    def result(self, unit: Unit) -> UnitResult | None:
        """The unit's result (None for a failed one): as its job measured it, else read from the
        store and measured; a unit deleted from the store since the run planned (a ``sweval
        cache prune`` beside it) or found damaged as it is read is computed again."""
        if unit.key in {failure.key for failure in self.failed}:
            return None
        found = self.measured.get(unit.key)
        if found is None:
            if not self.store.has(unit.key, depth=unit.depth):
                _log.warning("unit (fold %d, %s) left the store while this run used it; "
                             "computing it again", unit.split.index, unit.spec.label)
                lists, recomputed = compute_unit(unit, self.store), True
            else:
                lists, recomputed = read_or_recompute(unit, self.store)
            if recomputed:
                self.computed.add(unit.key)
                self.recomputed.add(unit.key)
            found = self.measured[unit.key] = self.work.measurer.measure(unit, lists)
        if found.algorithm == unit.spec.label:
            return found
        return replace(found, algorithm=unit.spec.label)

    def collect(self) -> Collected:
        """Every unit's result (:meth:`result`), with the run's counts."""
        failed = {failure.key for failure in self.failed}
        results: dict[str, UnitResult] = {}
        for unit in self.work.units:
            if unit.key not in results and unit.key not in failed:
                found = self.result(unit)
                if found is not None:
                    results[unit.key] = found
        computed = len(self.computed)
        return Collected(
            results=results,
            failed=tuple(self.failed),
            computed=frozenset(self.computed),
            n_reused=self.n_units - computed - len(failed),
            n_computed=computed,
            n_code_changed=min(self.code_changed, computed),
            n_recomputed=len(self.recomputed),
        )


def compute(work: Work, store: UnitStore, *, executor: Executor | None = None,
            hooks: Iterable[Hook] = ()) -> Collected:
    """:class:`Driver` ``.run()``: the work's units, computed where missing, collected."""
    return Driver(work, store, executor=executor, hooks=hooks).run()


def fail_on(collected: Collected) -> Collected:
    """``collected``, or the first failed unit's error (commands that cannot go without a unit:
    ``compare``, ``leakage``, ``gap``, tuning).

    Raises:
        AlgorithmFailed: a unit failed.
    """
    if collected.failed:
        raise AlgorithmFailed(collected.failed[0])
    return collected
