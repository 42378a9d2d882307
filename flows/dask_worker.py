"""Preload of the local Dask workers (:mod:`flows.dask_cluster`): the fold task's imports, done
as each worker process starts, while the flow is still loading the log, instead of when the
worker unpickles its first fold task.

For a cluster of your own, the same warm-up is ``dask worker ... --preload sweval.flows.dask_worker``.
"""

from __future__ import annotations

from typing import Any


def dask_setup(worker: Any) -> None:
    """Import what a fold task runs: the flow module (Prefect, the evaluation engine), the
    algorithm registry and the compiled kernels' module (numba; the kernels themselves load
    from numba's disk cache on first use)."""
    import sweval.algorithms.ranking_kernels  # noqa: F401
    import sweval.flows.sliding_window  # noqa: F401
