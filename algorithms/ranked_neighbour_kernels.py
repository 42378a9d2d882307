"""Compiled neighbour selection for sets numbered by size rank (numba, ``nogil``).

:func:`ranked_cosine_neighbours` gives the same rows, bit for bit, as
:func:`algorithms.neighbour_kernels.cosine_neighbours` on a self-join whose sets are ranked by
(size, index) (:func:`algorithms.incidence_kernels.size_order`): within one overlap count the
better neighbour is the lower rank, so it counts all but the longest of a row's lists and
selects only the lowest ranks of each count. Ties are broken by index as SPEC §3 says.

The kernels compile on first use and are cached on disk (``cache=True``), release the GIL
(rows are split over threads by :mod:`algorithms.row_chunks`), and use no fast-math, so every
float is the IEEE result of the formula in the docstring. The selection helpers are copies of
those in :mod:`algorithms.neighbour_kernels` (numba's disk cache only watches the file that
defines a kernel; tests/algorithms/test_knn.py checks that the copies are the same).

The ordering used throughout is "value descending, index ascending": entry (v, c) comes before
(v', c') when v > v', or v == v' and c < c'. NaN counts as -inf and -inf is never returned.
"""

from __future__ import annotations

import numpy as np
from numba import njit


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


@njit(cache=True, nogil=True, inline="always")
def _swap(cols, vals, a, b):
    cols[a], cols[b] = cols[b], cols[a]
    vals[a], vals[b] = vals[b], vals[a]


@njit(cache=True, nogil=True)
def _select_best(cols, vals, count, n):
    """Reorder ``cols[:count]``/``vals[:count]`` (in step) so that the first n are the best.

    Best = value descending, column ascending: a strict total order (columns are distinct), so
    the n best are unique and no tie pass is needed. Hoare's selection with a median-of-three
    pivot and a branch-free Lomuto partition (a mispredicted branch per comparison is what made
    a plain partition slow). The first n − 1 come in no particular order; position n − 1 holds
    the n-th best itself (the selection ends with it in its sorted place).
    """
    lo, hi, kth = 0, count - 1, n - 1
    while hi > lo:
        mid = (lo + hi) >> 1
        if _comes_before(vals[mid], cols[mid], vals[lo], cols[lo]):
            _swap(cols, vals, mid, lo)
        if _comes_before(vals[hi], cols[hi], vals[lo], cols[lo]):
            _swap(cols, vals, hi, lo)
        if _comes_before(vals[mid], cols[mid], vals[hi], cols[hi]):
            _swap(cols, vals, mid, hi)
        pivot_c, pivot_v = cols[hi], vals[hi]  # the median of the three
        i = lo
        for j in range(lo, hi):
            c, v = cols[j], vals[j]
            before = _comes_before(v, c, pivot_v, pivot_c)
            cols[j], vals[j] = cols[i], vals[i]
            cols[i], vals[i] = c, v
            i += before
        _swap(cols, vals, i, hi)
        if i == kth:
            return
        if i < kth:
            lo = i + 1
        else:
            hi = i - 1


@njit(cache=True, nogil=True, inline="always")
def _reserve(cols, vals, size):
    """The output arrays (column, value) with room for ``size`` entries: the same arrays, or
    copies at least twice as long."""
    if size <= len(cols):
        return cols, vals
    grown = max(2 * len(cols), size)
    more_cols = np.empty(grown, dtype=cols.dtype)
    more_cols[: len(cols)] = cols
    more_vals = np.empty(grown, dtype=vals.dtype)
    more_vals[: len(vals)] = vals
    return more_cols, more_vals


# A self-join (user-kNN: users × users; item-kNN: items × items) whose sets are numbered by
# *rank*, the position in the order (|X_s| ascending, s ascending). Within one overlap count c
# the cosine c / sqrt(a·|X_s|) falls as |X_s| grows and ties go to the lower s, so among the
# candidates with the same count the better one is the one with the lower rank: the selection
# needs the n lowest ranks of each count and never looks at the others.


@njit(cache=True, nogil=True)
def _smallest(values, lo, hi, n):
    """Reorder ``values[lo:hi]`` (distinct) so that its n smallest come first, in any order.

    Hoare's selection with a median-of-three pivot and a branch-free Lomuto partition.
    """
    kth = lo + n - 1
    hi -= 1
    while hi > lo:
        mid = (lo + hi) >> 1
        if values[mid] < values[lo]:
            values[mid], values[lo] = values[lo], values[mid]
        if values[hi] < values[lo]:
            values[hi], values[lo] = values[lo], values[hi]
        if values[mid] < values[hi]:
            values[mid], values[hi] = values[hi], values[mid]
        pivot = values[hi]  # the median of the three
        i = lo
        for j in range(lo, hi):
            v = values[j]
            values[j] = values[i]
            values[i] = v
            i += v < pivot
        values[i], values[hi] = values[hi], values[i]
        if i == kth:
            return
        if i < kth:
            lo = i + 1
        else:
            hi = i - 1


@njit(cache=True, nogil=True)
def ranked_cosine_neighbours(
    rows, a_indptr, a_indices, p_indptr, p_ranks, order, rank_of, rank_sizes, counter, n,
    sort_columns,
):
    """Top-n cosine neighbours of the given rows in a self-join whose sets are ranked by size.

    The sets X_s are the rows of (``a_indptr``, ``a_indices``); ``order``/``rank_of`` rank
    them by (|X_s|, s) (:func:`size_order`), ``rank_sizes[k]`` = |X_{order[k]}|, and
    (``p_indptr``, ``p_ranks``) lists, per element, the ranks of the sets that hold it,
    ascending (:func:`ranked_postings`). For each r in ``rows``, with a = |X_r|::

        c(r, s)   = |X_r ∩ X_s|        (the number of r's lists that hold s)
        cos(r, s) = sqrt(c² / (a · |X_s|))      for c > 0 and s ≠ r

    keeping the ``n`` best s (value descending, s ascending; n = 0 keeps all): the same rows,
    bit for bit, as :func:`cosine_neighbours` when the sizes obey the bound below.

    Per row, with L the longest of r's lists (the most popular element):

    1. The other lists are counted into a dense array indexed by rank (``counter``'s dtype:
       wide enough for the largest count), recording the touched ranks.
    2. L adds 1 only to the ranks already counted, and stops after the largest of them (L is
       ascending). A set with c ≥ 2 is in two of r's lists, so in one besides L (pigeonhole):
       it is counted in 1 and completed in 2, c = p + [s ∈ L]. A set never touched holds only
       L: c = 1.
    3. Count 1: such a set is in exactly one list, "alone" there (count 1, or 0 in L). Within
       one count the better set is the lower rank (below), and each list is ascending: the
       n lowest ranks of the whole count-1 class are among the first n alone entries of each
       list, so each list is walked only until it has given n.
    4. The touched ranks with c ≥ 2 are bucketed by count (a counting sort) and each bucket
       keeps its n lowest ranks (:func:`_smallest`); so does count 1. The candidates left (at
       most n per distinct count) go through :func:`_select_best` on the squared cosines, and
       only the winners get a square root. Nothing indexed by set is read per touched set,
       only the count, and the set and its size for the few candidates.

    So L, whose entries are most of the walk for most rows, is only read (no touched list, no
    selection), and only up to the largest rank the other lists touched.

    Why the lowest ranks of a count suffice: with c fixed, c²/(a·β) is strictly decreasing in
    β = |X_s|, and equal β tie on s ascending; rank order is (β, s) order. So the n lowest
    ranks of a count beat every other set of that count, and a set outside them has n better
    ones: it cannot be among the n best.

    Why the floats keep the exact order (the bound, checked by the caller): with every set
    size ≤ K, two different squares x₁ < x₂ (x = c²/(aβ) ≤ 1, same a) differ by at least
    1/(a·β₁·β₂) ≥ K⁻³; c², a·β are exact integers in float64, so each quotient is within
    u = 2⁻⁵³ of x, each root within u of √x, and √x₂ − √x₁ ≥ (x₂ − x₁)/2. Hence
    fl(cos₂) − fl(cos₁) ≥ 1/(2K³) − 3u > 0 whenever 6K³ < 2⁵³ (K ≤ 114,000): float order
    = exact order, equal floats only for equal cosines (the same rational gives the same
    correctly rounded quotient). Ties between counts (c²/β equal for different c) are then
    broken on s ascending by :func:`_select_best`, as SPEC §3 asks.

    Returns:
        (indptr, indices, data) of a len(rows) × len(order) CSR; columns ascending within rows
        with ``sort_columns``, else in no particular order.
    """
    n_rows = len(rows)
    n_cols = len(order)
    counts = np.zeros(n_cols, dtype=counter.dtype)
    touched = np.empty(n_cols + 1, dtype=np.int32)  # +1: the branch-free writes below
    touched_counts = np.empty(n_cols, dtype=counter.dtype)
    buckets = np.empty(n_cols, dtype=np.int32)
    longest = 0
    for q in range(n_rows):
        longest = max(longest, a_indptr[rows[q] + 1] - a_indptr[rows[q]])
    bucket_end = np.zeros(longest + 2, dtype=np.int64)
    capacity = max(1, n_cols if n <= 0 else min(n_cols, (longest + 1) * n))
    alone = np.empty(capacity, dtype=np.int32)  # the count-1 candidates
    cand_cols = np.empty(capacity, dtype=np.int64)
    cand_vals = np.empty(capacity, dtype=np.float64)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    out_cols = np.empty(max(16, n_rows * (n if n > 0 else 64)), dtype=np.int64)
    out_vals = np.empty(len(out_cols), dtype=np.float64)
    for q in range(n_rows):
        r = rows[q]
        b = a_indptr[r + 1] - a_indptr[r]
        row_size = float(b)
        me = rank_of[r]
        big = a_indptr[r]  # position of L, the longest list (the first of equal lengths)
        for p in range(a_indptr[r], a_indptr[r + 1]):
            t, u = a_indices[p], a_indices[big]
            if p_indptr[t + 1] - p_indptr[t] > p_indptr[u + 1] - p_indptr[u]:
                big = p
        # 1. every list but L
        count = 0  # the ranks with a count go to touched[:count]
        top = -1  # the largest rank counted
        for p in range(a_indptr[r], a_indptr[r + 1]):
            t = a_indices[p]
            if p == big or p_indptr[t + 1] == p_indptr[t]:
                continue
            for z in range(p_indptr[t], p_indptr[t + 1]):
                k = p_ranks[z]
                touched[count] = k  # branch-free: kept only when k is new
                count += counts[k] == 0
                counts[k] += 1
            top = max(top, p_ranks[p_indptr[t + 1] - 1])
        # 2. L completes the counted ranks only
        t = a_indices[big]
        for z in range(p_indptr[t], p_indptr[t + 1]):
            k = p_ranks[z]
            if k > top:
                break
            counts[k] += counts[k] != 0
        # 3. count 1: per list, its first n alone ranks
        n_alone = 0
        for p in range(a_indptr[r], a_indptr[r + 1]):
            t = a_indices[p]
            single = 0 if p == big else 1  # the count of a set that only this list holds
            found = 0
            for z in range(p_indptr[t], p_indptr[t + 1]):
                k = p_ranks[z]
                if counts[k] == single and k != me:
                    alone[n_alone] = k
                    n_alone += 1
                    found += 1
                    if found == n:
                        break
        # 4. counts ≥ 2 by bucket, n lowest ranks per count
        for c in range(b + 2):
            bucket_end[c] = 0
        counts[me] = 0  # never its own neighbour: dropped by the compaction below
        size = 0
        for p in range(count):
            k = touched[p]
            c = counts[k]
            counts[k] = 0
            touched[size] = k  # branch-free: kept when c ≥ 2
            touched_counts[size] = c
            size += c > 1
            bucket_end[c] += 1
        start = 0  # buckets by count descending: bucket c is buckets[start_c:bucket_end[c]]
        for c in range(b, 1, -1):
            start += bucket_end[c]
            bucket_end[c] = start - bucket_end[c]  # for now the bucket's start
        for p in range(size):
            c = touched_counts[p]
            buckets[bucket_end[c]] = touched[p]
            bucket_end[c] += 1
        bucket_end[1] = n_alone
        m = 0
        start = 0
        for c in range(b, 0, -1):
            source = buckets if c > 1 else alone
            if c == 1:
                start = 0
            end = bucket_end[c]
            take = end - start
            if n > 0 and take > n:
                _smallest(source, start, end, n)
                take = n
            square = float(c) * float(c)
            for p in range(start, start + take):
                k = source[p]
                cand_cols[m] = order[k]
                cand_vals[m] = square / (row_size * float(rank_sizes[k]))  # squared cosine
                m += 1
            start = end
        kept = m if n <= 0 or m <= n else n
        if kept < m:
            _select_best(cand_cols, cand_vals, m, kept)
        start = indptr[q]
        out_cols, out_vals = _reserve(out_cols, out_vals, start + kept)
        if sort_columns:
            by_column = np.argsort(cand_cols[:kept])
            for p in range(kept):
                out_cols[start + p] = cand_cols[by_column[p]]
                out_vals[start + p] = np.sqrt(cand_vals[by_column[p]])
        else:
            for p in range(kept):
                out_cols[start + p] = cand_cols[p]
                out_vals[start + p] = np.sqrt(cand_vals[p])
        indptr[q + 1] = start + kept
    return indptr, out_cols[: indptr[n_rows]].copy(), out_vals[: indptr[n_rows]].copy()
