"""How many threads the algorithms may use: the usable CPUs and a per-unit thread budget.

Shared by the models (ALS reads :data:`unit_threads`), the compiled kernels' thread pool
(:mod:`algorithms.row_chunks`) and the flow that sets the budget; it imports nothing of the
project, so none of them import each other to get it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and ``taskset`` narrow)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


#: Threads a unit may give a library that starts its own pool per call (implicit's OpenMP ALS
#: fit); None: the library's default, every core. The threads runner sets it in each fold task,
#: so that fold tasks running side by side share the cores instead of each taking all of them.
unit_threads: ContextVar[int | None] = ContextVar("unit_threads", default=None)


@contextlib.contextmanager
def thread_budget(threads: int | None) -> Iterator[None]:
    """Set :data:`unit_threads` for the units run inside the block (None: library defaults).

    Callers use this rather than the variable itself: a ContextVar cannot be pickled, and Dask
    pickles a task's function together with the globals it names.
    """
    token = unit_threads.set(threads)
    try:
        yield
    finally:
        unit_threads.reset(token)
