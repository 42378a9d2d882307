"""The local Dask cluster of ``--task-runner dask`` (no ``--dask-address``), started while the
flow loads the log and closed while it writes the results.

Left to prefect-dask, the cluster started at the first fold task's submission, after the log
was loaded and planned; each worker process then imported SW-EVAL, Prefect and their
dependencies when it unpickled its first task, and the run waited for the workers to stop
before writing its tables. On a 2-core machine at scale 1 those waits were most of Dask's
lead over the sequential runner. Here::

    flow thread     start ─┬─ load + plan the log ── share it ── submit ─ ... ─┬─ results.csv & co ─ join
                           │                                                    │
    helper thread          └─ LocalCluster: spawn the workers, each imports     └─ close the cluster
                              the fold task's modules (:mod:`flows.dask.worker`)

The workers are what prefect-dask would start (one process each, one task thread, the flow's
Prefect API and one BLAS/OpenMP thread in their environment) plus a kernel thread budget: the
usable CPUs shared between the workers (``SWEVAL_KERNEL_THREADS``, unless the environment sets
it), so 2 workers on 2 cores run 2 kernel threads, not 4. Results do not depend on it. One
thing Dask adds is left out: ``MALLOC_TRIM_THRESHOLD_=65536`` in the workers' environment
(``distributed.nanny.pre-spawn-environ``). Setting it fixes glibc's mmap threshold at 128 KiB,
so every array larger than that is mapped fresh and unmapped when freed, and the next one
faults in zeroed pages again: the fold tasks allocate and free such arrays all the time, and a
worker spent twice the system time of one without it (memory returns to the system later).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

from sweval.algorithms.threads import usable_cpus
from sweval.data.errors import SwevalError

_log = logging.getLogger(__name__)

#: Run in every local worker process as it starts (``dask_setup``): the fold task's imports.
WORKER_PRELOAD = "sweval.flows.dask.worker"

#: Set in the local workers' environment: the preload makes them ignore SIGINT.
IGNORE_SIGINT = "SWEVAL_WORKER_IGNORES_SIGINT"

#: distributed's setting that starts its worker processes with ``MALLOC_TRIM_THRESHOLD_=65536``
#: (unset for ours: see the module docstring).
_MALLOC_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


def worker_env(workers: int, api_url: str | None) -> dict[str, str]:
    """Environment of local Dask worker processes: the flow's Prefect API, one BLAS and OpenMP
    thread, ``SWEVAL_KERNEL_THREADS`` (this machine's usable CPUs // ``workers``, at least
    one) unless this process's environment sets it, and :data:`IGNORE_SIGINT` (a Ctrl-C reaches
    the whole process group: the command stops its workers itself, :meth:`LocalDask.stop`).

    Without the API URL each worker would start an ephemeral Prefect server of its own and
    report its task runs there, invisible in the flow's API.
    """
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           IGNORE_SIGINT: "1"}
    env["SWEVAL_KERNEL_THREADS"] = os.environ.get(
        "SWEVAL_KERNEL_THREADS", str(max(1, usable_cpus() // max(1, workers)))
    )
    if api_url:
        env["PREFECT_API_URL"] = api_url.rstrip("/")
    return env


def require_dask() -> None:
    """Make sure Dask is installed (the ``dask`` extra).

    Raises:
        SwevalError: it is not, saying how to install it.
    """
    try:
        import distributed  # noqa: F401
        import prefect_dask  # noqa: F401
    except ImportError:
        raise SwevalError(
            "--task-runner dask needs the dask extra: pip install 'sweval[dask]' "
            "(or: uv sync --extra dask)."
        ) from None


class LocalDask:
    """A local Dask cluster being started in a helper thread (see the module docstring).

    Args:
        workers: worker processes (one task thread each).
        env: their environment (:func:`worker_env`).
    """

    def __init__(self, workers: int, env: dict[str, str]) -> None:
        self.workers = workers
        self.env = env
        self._cluster: Any = None
        self._error: BaseException | None = None
        self._closing: threading.Thread | None = None
        self._started = threading.Thread(target=self._start, name="sweval-dask-start",
                                         daemon=True)
        self._started.start()

    def _start(self) -> None:
        try:
            import dask
            from distributed import LocalCluster

            with dask.config.set({_MALLOC_TRIM: None}):
                self._cluster = LocalCluster(
                    n_workers=self.workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    env=self.env,
                    preload=[WORKER_PRELOAD],
                )
        except BaseException as exc:  # noqa: BLE001  (raised in the flow's thread by task_runner)
            self._error = exc

    def address(self) -> str:
        """The scheduler's address, once the workers are up.

        Raises:
            SwevalError: the cluster could not start.
        """
        return str(self._cluster_up().scheduler_address)

    def task_runner(self) -> Any:
        """prefect-dask's runner on this cluster, once its workers are up (the runner closes
        only its client; :meth:`close` closes the cluster).

        Raises:
            SwevalError: the cluster could not start.
        """
        from prefect_dask import DaskTaskRunner

        return DaskTaskRunner(cluster=self._cluster_up())

    def _cluster_up(self) -> Any:
        """The cluster, once its workers are up.

        Raises:
            SwevalError: the cluster could not start.
        """
        self._started.join()
        if self._cluster is None:
            raise SwevalError(
                f"--task-runner dask: the local Dask cluster did not start: {self._error}"
            ) from self._error
        return self._cluster

    def close_in_background(self) -> None:
        """Start closing the cluster (its workers stop while the flow writes its outputs)."""
        if self._closing is None:
            self._closing = threading.Thread(target=self._close, name="sweval-dask-close",
                                             daemon=True)
            self._closing.start()

    def close(self) -> None:
        """Close the cluster and wait until it is closed (also after a failed start)."""
        self.close_in_background()
        assert self._closing is not None
        self._closing.join()

    def stop(self) -> None:
        """Close the cluster after a stop signal: the workers' fold tasks are abandoned (every
        unit they finished is saved, atomically), so the workers are killed at once instead of
        being asked to finish them, and distributed's reports of workers dying are not logged."""
        import psutil

        self._started.join()
        logging.getLogger("distributed").setLevel(logging.CRITICAL + 1)
        pids = [nanny.pid for nanny in getattr(self._cluster, "workers", {}).values()]
        for pid in pids:
            if pid is not None:
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()
        self.close()

    def _close(self) -> None:
        self._started.join()
        if self._cluster is None:
            return
        try:
            self._cluster.close()
        except Exception as exc:  # noqa: BLE001  (the exit sweep stops what is left)
            _log.warning("the local Dask cluster did not close cleanly: %s", exc)
