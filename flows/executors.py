"""Executors that run a command's jobs outside its own threads: Prefect tasks (the flow), or a
Dask cluster (``--task-runner dask``); and which executor a configuration asks for.

Each job goes to its worker as the command's :class:`~evaluators.run.work.Recipe` and the
job (group index, labels): the worker makes the work once from the recipe
(:func:`~evaluators.run.work.work_of`) and computes the job's units into the command's unit
store (:func:`~evaluators.run.driver.compute_group`). A worker of a cluster that may not share
the store's file system (``--dask-address``) sends the units' files back; the command writes
them.

Chains (:func:`chain_starts`): a job that waits for the one before it runs where that one ran,
so a local cluster of W workers advances W chains of consecutive folds, each worker moving its
training data one window at a time instead of walking the whole timeline in steps of W.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from sweval.algorithms.threads import usable_cpus
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.driver import Done, Driver, Executor, Sequential, Threads, compute_group
from sweval.evaluators.run.work import Job, Outcome, Recipe, work_of

_log = logging.getLogger(__name__)


def worker_count(config: EvalConfig) -> int:
    """Jobs that run at once: ``--workers``, or the usable CPUs when it is not given
    (``--workers 1`` is one: a one-worker Dask cluster is what fan-out is measured against)."""
    return config.workers if config.workers is not None else usable_cpus()


def threads_per_job(config: EvalConfig) -> int | None:
    """BLAS and OpenMP threads each job may use when jobs share this process (the threads
    runner): an equal share of the CPUs, at least one; None (the libraries' defaults)
    otherwise. Dask workers are processes started with one thread each
    (:func:`flows.dask.cluster.worker_env`). implicit's factors do not depend on it: each
    user's and item's solve is done whole by one thread (tested bit for bit)."""
    if config.task_runner != "threads":
        return None
    return max(1, usable_cpus() // worker_count(config))


def chain_starts(n_jobs: int, config: EvalConfig, *, in_order: bool) -> set[int]:
    """The jobs that wait for no other; every other waits for the one before it.

    Warm starts chain every fold. A local Dask cluster of W workers runs W chains of
    consecutive folds, one per worker (see the module docstring). A cluster of one's own
    (``--dask-address``) gets no chains: how many workers it has is not known here, and too few
    chains would leave workers idle. Otherwise no job waits either.
    """
    if in_order:
        return {0}
    if config.task_runner != "dask" or config.dask_address or not config.incremental:
        return set(range(n_jobs))
    chains = min(worker_count(config), n_jobs)
    return {n_jobs * chain // chains for chain in range(chains)}


def compute_remote(recipe: Recipe, job: Job, send_lists: bool = False,
                   threads: int | None = None, after: Any = None) -> Outcome:
    """A job, in whatever process runs it (``after``: the job it waits for, unused)."""
    return compute_group(work_of(recipe), job, recipe.store(), send_lists=send_lists,
                         threads=threads)


def local_executor(config: EvalConfig) -> Executor:
    """The in-process executor of ``config``: one job at a time, or ``--workers`` threads."""
    if config.task_runner == "threads":
        return Threads(worker_count(config))
    return Sequential()


class DaskCluster:
    """Jobs on a Dask cluster without Prefect: the one at ``config.dask_address``, else a
    local one of ``--workers`` processes, started as soon as this executor is made (its
    workers start and import while the command loads its data) and closed when the jobs are
    done."""

    def __init__(self, config: EvalConfig, recipe: Recipe) -> None:
        from sweval.flows.dask.cluster import LocalDask, require_dask, worker_env

        require_dask()  # the missing extra fails here, before anything is loaded
        self.config = config
        self.recipe = recipe
        self.local = None if config.dask_address else LocalDask(
            worker_count(config), worker_env(worker_count(config), None))

    def run(self, driver: Driver, jobs: Sequence[Job]) -> Iterator[Done]:
        from distributed import Client, as_completed

        address = self.config.dask_address or self.local.address()  # type: ignore[union-attr]
        send_lists = bool(self.config.dask_address)
        starts = chain_starts(len(jobs), self.config, in_order=driver.work.in_order)
        try:
            with Client(address) as client:
                futures: dict[Any, Job] = {}
                previous = None
                for index, job in enumerate(jobs):
                    future = client.submit(compute_remote, self.recipe, job, send_lists,
                                           after=None if index in starts else previous,
                                           pure=False, key=f"job-{job.group}-{index}")
                    futures[future] = job
                    previous = future
                for future in as_completed(list(futures)):
                    job = futures[future]
                    try:
                        yield job, future.result()
                    except Exception as exc:  # noqa: BLE001 (the driver raises it at the end)
                        yield job, exc
        except BaseException as exc:
            if self.local is not None:
                from sweval.flows.processes import is_stop

                if is_stop(exc):
                    self.local.stop()
            raise
        finally:
            if self.local is not None:
                self.local.close()


def executor_for(config: EvalConfig, recipe: Recipe) -> Executor:
    """The executor ``--task-runner`` asks for, outside Prefect: sequential, threads, or a
    Dask cluster.

    Raises:
        SwevalError: ``dask`` without the dask extra installed.
    """
    if config.task_runner == "dask":
        return DaskCluster(config, recipe)
    return local_executor(config)
