"""Running a compiled kernel over row chunks in parallel threads.

The kernels (:mod:`algorithms.neighbour_kernels`, :mod:`algorithms.ranked_neighbour_kernels`,
:mod:`algorithms.ranking_kernels`) release the GIL and compute every row independently:
:func:`over_row_chunks` splits the rows into contiguous chunks and runs them on a shared thread
pool of :func:`kernel_threads` threads. The result does not depend on the number of threads. Imports no numba.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import TypeVar

import numpy as np

from sweval.algorithms.threads import usable_cpus

#: Rows per chunk below which a kernel call is not split across threads.
MIN_ROWS_PER_THREAD = 64

_T = TypeVar("_T")


def kernel_threads() -> int:
    """Threads a kernel call may use: ``SWEVAL_KERNEL_THREADS``, else the usable CPUs."""
    configured = os.environ.get("SWEVAL_KERNEL_THREADS", "").strip()
    if configured:
        return max(1, int(configured))
    return usable_cpus()


@cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="sweval-kernel")


def over_row_chunks(n_rows: int, work: Callable[[int, int], _T]) -> list[_T]:
    """``[work(lo, hi) for each chunk]`` over contiguous row chunks, run in parallel threads.

    The kernels release the GIL and every row is computed independently, so the result does
    not depend on the number of threads (:func:`kernel_threads`); it is only faster.
    """
    threads = min(kernel_threads(), max(1, n_rows // MIN_ROWS_PER_THREAD))
    if threads == 1:
        return [work(0, n_rows)]
    bounds = np.linspace(0, n_rows, 2 * threads + 1).astype(int)
    chunks = list(zip(bounds[:-1], bounds[1:], strict=True))
    return list(_pool(threads).map(lambda c: work(int(c[0]), int(c[1])), chunks))
