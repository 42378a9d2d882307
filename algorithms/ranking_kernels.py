"""Compiled per-row top-k ranking with the SPEC §3 tie rule (numba, ``nogil``).

:func:`top_k_dense` ranks rows of dense scores, :func:`top_k_weighted_sum` sparse scores given
as a product H @ W, both through a bounded heap and with each row's seen columns excluded:
per-row top-k with an exact tie rule, which numpy could only express with full sorts. Used by
:mod:`algorithms.ranking`.

The kernels compile on first use and are cached on disk (``cache=True``), release the GIL
(rows are split over threads by :mod:`algorithms.row_chunks`), and use no fast-math, so every
float is the IEEE result of the formula in the docstring.

The ordering used throughout is "value descending, index ascending": entry (v, c) comes before
(v', c') when v > v', or v == v' and c < c'. NaN counts as -inf and -inf is never returned.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sweval.algorithms.scores import SCORE_DECIMALS

_SNAP_SCALE = 10.0**SCORE_DECIMALS


@njit(cache=True, nogil=True, inline="always")
def snap(value: float) -> float:
    """``np.round(value, SCORE_DECIMALS)``, bit for bit: ``rint(value · 10¹⁰) / 10¹⁰``."""
    return np.rint(value * _SNAP_SCALE) / _SNAP_SCALE


# The order itself, with a copy in each kernel file that ranks (neighbour_kernels.py,
# ranked_neighbour_kernels.py, ranking_kernels.py): numba's disk cache is invalidated only by a
# change to the file that defines a kernel, so a kernel file calls no compiled code of another
# file (tests/algorithms/test_knn.py checks that the copies are the same).
@njit(cache=True, nogil=True, inline="always")
def _comes_before(v1, c1, v2, c2):
    """(v1, c1) ranks before (v2, c2): higher value, or equal value and lower column.

    Written with ``&``/``|`` so that the loops calling it compile without branches.
    """
    return (v1 > v2) | ((v1 == v2) & (c1 < c2))


@njit(cache=True, nogil=True)
def _sift_down(heap_v, heap_c, size, v, c):
    """Place (v, c) at the root of the heap ``[:size]`` and restore the heap order."""
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        right = child + 1  # the root is the worst entry: follow the worse child
        if right < size and _comes_before(
            heap_v[child], heap_c[child], heap_v[right], heap_c[right]
        ):
            child = right
        if not _comes_before(v, c, heap_v[child], heap_c[child]):
            break
        heap_v[i] = heap_v[child]
        heap_c[i] = heap_c[child]
        i = child
    heap_v[i] = v
    heap_c[i] = c


@njit(cache=True, nogil=True)
def _offer(heap_v, heap_c, size, k, v, c):
    """Offer (v, c) to the bounded heap of the best k so far (root: the worst kept); new size."""
    if size < k:
        i = size
        while i > 0:
            parent = (i - 1) >> 1
            if not _comes_before(heap_v[parent], heap_c[parent], v, c):
                break
            heap_v[i] = heap_v[parent]
            heap_c[i] = heap_c[parent]
            i = parent
        heap_v[i] = v
        heap_c[i] = c
        return size + 1
    if _comes_before(v, c, heap_v[0], heap_c[0]):  # better than the worst kept: replace it
        _sift_down(heap_v, heap_c, size, v, c)
    return size


@njit(cache=True, nogil=True)
def _drain(heap_v, heap_c, size, out_row):
    """Write the heap's columns best first into ``out_row``, then -1 padding; empties it."""
    for p in range(size, len(out_row)):
        out_row[p] = -1
    while size > 0:
        size -= 1
        out_row[size] = heap_c[0]  # the worst kept goes last
        _sift_down(heap_v, heap_c, size, heap_v[size], heap_c[size])


@njit(cache=True, nogil=True)
def top_k_dense(scores, seen_indptr, seen_indices, k, out):
    """Top-k columns of each row of dense ``scores``, the row's seen columns excluded.

    Row q of ``out`` gets the k best finite scores of row q (value descending, column
    ascending), seen columns ``seen_indices[seen_indptr[q]:seen_indptr[q + 1]]`` and NaN/-inf
    never, padded with -1. ``scores`` is overwritten (seen cells become -inf). One pass per
    row through a bounded heap: once k are kept, a cell needs one comparison with the worst
    kept score (columns come in ascending order, so an equal score never displaces it).
    """
    n_rows, n_cols = scores.shape
    heap_v = np.empty(k, dtype=np.float64)
    heap_c = np.empty(k, dtype=np.int64)
    for q in range(n_rows):
        row = scores[q]
        for p in range(seen_indptr[q], seen_indptr[q + 1]):
            row[seen_indices[p]] = -np.inf
        size = 0
        threshold = -np.inf
        for c in range(n_cols):
            v = row[c]
            if v > threshold:  # False for NaN and -inf
                size = _offer(heap_v, heap_c, size, k, v, c)
                if size == k:
                    threshold = heap_v[0]
        _drain(heap_v, heap_c, size, out[q])


@njit(cache=True, nogil=True)
def top_k_weighted_sum(
    h_indptr, h_indices, h_data, w_indptr, w_indices, w_data, seen_indptr, seen_indices, k,
    n_cols, snap_sums, out,
):
    """Top-k of sparse scores score(q, ·) = Σ_t H[q, t] · W[t, ·], seen columns excluded.

    The sums are accumulated in the order scipy's sparse product uses (so they are the same
    floats as ``H @ W``) and, with ``snap_sums``, snapped (:func:`snap`). The positive unseen
    scores are ranked (value descending, column ascending), then the unseen columns scoring 0
    follow in column order, then -1 padding.
    Item-kNN: H = the users' histories, W = the item similarities S. User-kNN: H = the users'
    neighbour weights, W = R.
    """
    n_rows = len(h_indptr) - 1
    acc = np.zeros(n_cols, dtype=np.float64)
    hit = np.zeros(n_cols, dtype=np.bool_)
    excluded = np.zeros(n_cols, dtype=np.bool_)
    touched = np.empty(n_cols + 1, dtype=np.int64)  # +1: the branch-free write below
    heap_v = np.empty(k, dtype=np.float64)
    heap_c = np.empty(k, dtype=np.int64)
    for q in range(n_rows):
        count = 0
        for p in range(h_indptr[q], h_indptr[q + 1]):
            t = h_indices[p]
            weight = h_data[p]
            for z in range(w_indptr[t], w_indptr[t + 1]):
                s = w_indices[z]
                touched[count] = s  # branch-free: kept only when s is new
                count += not hit[s]
                hit[s] = True
                acc[s] += weight * w_data[z]
        for p in range(seen_indptr[q], seen_indptr[q + 1]):
            excluded[seen_indices[p]] = True
        size = 0
        for p in range(count):
            s = touched[p]
            v = snap(acc[s]) if snap_sums else acc[s]
            acc[s] = 0.0
            hit[s] = False
            if v > 0 and not excluded[s]:
                # Compared with the worst kept here, before any call: most candidates stop.
                if size < k or _comes_before(v, s, heap_v[0], heap_c[0]):
                    size = _offer(heap_v, heap_c, size, k, v, s)
                excluded[s] = True  # positive: not a 0-score filler
        filled = size
        _drain(heap_v, heap_c, size, out[q])
        c = 0
        while filled < k and c < n_cols:
            if not excluded[c]:
                out[q, filled] = c
                filled += 1
            c += 1
        for p in range(seen_indptr[q], seen_indptr[q + 1]):
            excluded[seen_indices[p]] = False
        for p in range(count):
            excluded[touched[p]] = False
