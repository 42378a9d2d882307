"""Compiled neighbour selection of the kNN models from co-occurrence counts (numba, ``nogil``).

:func:`cosine_neighbours` fuses, per row, a co-occurrence count over CSR arrays with the cosine
and the selection of the top-n neighbours, which numpy/scipy could only express with large
temporaries and full sorts; :func:`cooccurrence_neighbours` gives the same rows from stored
counts. Two mathematically equal cosines are equal floats, and ties are broken by index as
SPEC §3 says. The arrays they walk are built by :mod:`algorithms.incidence_kernels`; the
rank-wise variant for sets numbered by size is :mod:`algorithms.ranked_neighbour_kernels`.

The kernels compile on first use and are cached on disk (``cache=True``), release the GIL
(rows are split over threads by :mod:`algorithms.row_chunks`), and use no fast-math, so every
float is the IEEE result of the formula in the docstring.

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


#: A row whose co-occurrence walk visits at least this share of the columns counts into the
#: dense array and then scans every column (cheaper than tracking the touched ones).
DENSE_ROW_SHARE = 0.5

#: Selection samples this many candidates per kept neighbour to bound the threshold first.
SAMPLE_PER_KEPT = 4


@njit(cache=True, nogil=True)
def cosine_neighbours(
    rows, a_indptr, a_indices, b_indptr, b_indices, row_sizes, col_sizes, n, n_cols,
    sort_columns,
):
    """Top-n cosine neighbours of the given rows, from co-occurrence counts.

    For each r in ``rows``, with A the rows' sets and B the transposed incidence::

        c(r, s)   = Σ_{t ∈ A_r} [s ∈ B_t]              (the overlap of r and s)
        cos(r, s) = sqrt(c² / (row_sizes[r] · col_sizes[s]))   for c > 0 and s ≠ r

    keeping the ``n`` best s per row (value descending, s ascending; n = 0 keeps all).
    Item-kNN passes A = items' users and B = users' items; user-kNN the reverse. B is the
    transposed incidence of A (a self-join), so a list B_t of length 1 reached from r holds r
    alone: it adds only to c(r, r), which is dropped, and is skipped. A's lists may even leave
    such t out (:func:`algorithms.incidence_kernels.shared_incidence`); ``row_sizes[r]`` =
    |A_r| still counts them.

    Per row: the lists B_t of length ≥ 2 are looked up first (their bounds into small arrays,
    so that the reads of several lists are in flight at once: the walk is bound by fetching
    them), then counted into a dense array. A walk that visits most columns
    (:data:`DENSE_ROW_SHARE` of Σ_{t ∈ A_r} |B_t|, skipped and left-out lists included)
    then scans every column; a shorter one is copied first (fewer than n_cols entries), so
    that the count carries no dependency on which columns are new, and a second pass over
    the copy lists each column once, at its first visit. The
    selection runs on the squared cosines c² / (a·b), and square roots are taken only for the
    winners and near-ties (:func:`_keep_near`), so every returned value is the same float as
    ``sqrt(c² / (a·b))``. With many more candidates than n, a strided sample's n-th best (a
    lower bound of the true n-th best in the same order) first discards most of them
    (:func:`_keep_at_least`).

    Returns:
        (indptr, indices, data) of a len(rows) × n_cols CSR; columns ascending within rows
        with ``sort_columns``, else in no particular order (the same set: sorting was a sixth
        of the cost on the scale-1 benchmark, and a consumer that sums each column once does
        not need it).
    """
    n_rows = len(rows)
    counts = np.zeros(n_cols, dtype=np.int32)
    touched = np.empty(n_cols + 1, dtype=np.int64)  # +1: the branch-free writes below
    overlaps = np.empty(n_cols + 1, dtype=np.int32)  # the count of each touched column
    # a sparse row's entries in visit order: fewer than DENSE_ROW_SHARE · n_cols of them
    walk = np.empty(int(DENSE_ROW_SHARE * n_cols) + 1, dtype=b_indices.dtype)
    vals = np.empty(n_cols + 1, dtype=np.float64)
    value_of = np.empty(n_cols, dtype=np.float64)
    sample_cols = np.empty(max(1, SAMPLE_PER_KEPT * n), dtype=np.int64)
    sample_vals = np.empty(max(1, SAMPLE_PER_KEPT * n), dtype=np.float64)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    capacity = max(16, n_rows * (n if n > 0 else 64))
    out_cols = np.empty(capacity, dtype=np.int64)
    out_vals = np.empty(capacity, dtype=np.float64)
    starts = np.empty(16, dtype=np.int64)  # the bounds of one row's lists B_t, |B_t| ≥ 2
    ends = np.empty(16, dtype=np.int64)
    for q in range(n_rows):
        r = rows[q]
        row_size = row_sizes[r]
        listed = a_indptr[r + 1] - a_indptr[r]
        if listed > len(starts):
            starts = np.empty(2 * listed, dtype=np.int64)
            ends = np.empty(2 * listed, dtype=np.int64)
        visits = int(row_size) - listed  # left-out lists hold r alone: one visit each
        m = 0
        for p in range(a_indptr[r], a_indptr[r + 1]):
            t = a_indices[p]
            starts[m] = b_indptr[t]  # branch-free: kept when |B_t| ≥ 2
            ends[m] = b_indptr[t + 1]
            visits += ends[m] - starts[m]
            m += ends[m] - starts[m] > 1
        count = 0  # the columns with a count go to touched[:count], their counts to overlaps
        if visits >= DENSE_ROW_SHARE * n_cols:
            for x in range(m):
                for z in range(starts[x], ends[x]):
                    counts[b_indices[z]] += 1
            for s in range(n_cols):  # found by a scan, without a branch
                c = counts[s]
                touched[count] = s
                overlaps[count] = c
                count += c > 0
                counts[s] = 0
        else:  # copy the entries (reads in flight), count them, then compact in visit order
            n_walk = 0
            for x in range(m):
                for z in range(starts[x], ends[x]):
                    walk[n_walk] = b_indices[z]
                    n_walk += 1
            for z in range(n_walk):
                counts[walk[z]] += 1
            for z in range(n_walk):  # each column at its first visit, where its count is whole
                s = walk[z]
                c = counts[s]
                touched[count] = s  # branch-free: kept only at the first visit
                overlaps[count] = c
                count += c > 0
                counts[s] = 0
        size = 0
        for p in range(count):
            s = touched[p]
            c = float(overlaps[p])
            touched[size] = s  # branch-free: s == r (never its own neighbour) is overwritten
            vals[size] = c * c / (row_size * col_sizes[s])  # the squared cosine
            size += s != r
        out_cols, out_vals = _emit_row(
            touched, vals, size, n, q, indptr, out_cols, out_vals, value_of, sample_cols,
            sample_vals, sort_columns,
        )
    return indptr, out_cols[: indptr[n_rows]].copy(), out_vals[: indptr[n_rows]].copy()


@njit(cache=True, nogil=True)
def cooccurrence_neighbours(
    rows, base_indptr, base_indices, base_counts, recent_indptr, recent_indices, recent_counts,
    sizes, n, n_cols, sort_columns,
):
    """Top-n cosine neighbours of the given rows from stored co-occurrence counts.

    The same rows, bit for bit, as :func:`cosine_neighbours` on the sets whose overlaps are
    stored (item-kNN: :class:`algorithms.cooccurrence.Cooccurrence`, C = RᵀR off the
    diagonal, held in two CSRs whose rows add up): for each r in ``rows``::

        c(r, s)   = base[r, s] + recent[r, s]                 (s ≠ r: the diagonal is not stored)
        cos(r, s) = sqrt(c² / (sizes[r] · sizes[s]))          for c > 0

    keeping the ``n`` best s per row (value descending, s ascending; n = 0 keeps all), with
    the same float formula and the same selection as :func:`cosine_neighbours`. The counts
    go through a dense array without a branch (the base row's columns are distinct and
    stored, the recent row's added; a merge of the two sorted rows would branch per entry):
    a row costs its stored entries instead of the walk over its users' items.

    Returns:
        (indptr, indices, data) of a len(rows) × n_cols CSR; columns ascending within rows
        with ``sort_columns``, else in no particular order.
    """
    n_rows = len(rows)
    counts = np.zeros(n_cols, dtype=np.int32)
    touched = np.empty(n_cols + 1, dtype=np.int64)
    vals = np.empty(n_cols + 1, dtype=np.float64)
    value_of = np.empty(n_cols, dtype=np.float64)
    sample_cols = np.empty(max(1, SAMPLE_PER_KEPT * n), dtype=np.int64)
    sample_vals = np.empty(max(1, SAMPLE_PER_KEPT * n), dtype=np.float64)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    capacity = max(16, n_rows * (n if n > 0 else 64))
    out_cols = np.empty(capacity, dtype=np.int64)
    out_vals = np.empty(capacity, dtype=np.float64)
    for q in range(n_rows):
        r = rows[q]
        row_size = sizes[r]
        # the base row's columns are distinct: stored; the recent row's added (branch-free)
        size = 0
        for z in range(base_indptr[r], base_indptr[r + 1]):
            s = base_indices[z]
            touched[size] = s
            counts[s] = base_counts[z]
            size += 1
        for z in range(recent_indptr[r], recent_indptr[r + 1]):
            s = recent_indices[z]
            touched[size] = s  # kept only when s is new to the row
            size += counts[s] == 0
            counts[s] += recent_counts[z]
        for p in range(size):
            s = touched[p]
            c = float(counts[s])
            counts[s] = 0
            vals[p] = c * c / (row_size * sizes[s])  # the squared cosine
        out_cols, out_vals = _emit_row(
            touched, vals, size, n, q, indptr, out_cols, out_vals, value_of, sample_cols,
            sample_vals, sort_columns,
        )
    return indptr, out_cols[: indptr[n_rows]].copy(), out_vals[: indptr[n_rows]].copy()


@njit(cache=True, nogil=True)
def _emit_row(
    touched, vals, size, n, q, indptr, out_cols, out_vals, value_of, sample_cols, sample_vals,
    sort_columns,
):
    """Append row q of a neighbour CSR: of the ``size`` candidates (``touched``, their squared
    cosines in ``vals``) the ``n`` best (value descending, column ascending; n = 0 keeps all),
    their cosines as values, columns ascending with ``sort_columns``. The selection runs on the
    squared cosines and only the few near the cut get square roots before the final one.

    Returns:
        (out_cols, out_vals), grown when the row did not fit.
    """
    kept = size if n <= 0 or size <= n else n
    if kept < size:  # select on the squared cosines, then take square roots of few
        if size > 2 * SAMPLE_PER_KEPT * kept:
            size = _keep_at_least(touched, vals, size, kept, sample_cols, sample_vals)
        _select_best(touched, vals, size, kept)
        size = _keep_near(touched, vals, size, kept)
    for p in range(size):
        vals[p] = np.sqrt(vals[p])
    if kept < size:
        _select_best(touched, vals, size, kept)
    start = indptr[q]
    out_cols, out_vals = _reserve(out_cols, out_vals, start + kept)
    if sort_columns:
        for p in range(kept):
            value_of[touched[p]] = vals[p]
        touched[:kept].sort()
        for p in range(kept):
            vals[p] = value_of[touched[p]]
    for p in range(kept):
        out_cols[start + p] = touched[p]
        out_vals[start + p] = vals[p]
    indptr[q + 1] = start + kept
    return out_cols, out_vals


#: Relative margin below the n-th best squared cosine within which an entry's cosine could
#: still round to the n-th best cosine (sqrt halves relative gaps: 2⁻⁵⁰ would do; 10⁻¹⁴ is
#: safe).
SQUARE_MARGIN = 1e-14


@njit(cache=True, nogil=True)
def _keep_near(cols, vals, count, n):
    """After :func:`_select_best` on squared cosines: keep the n best and the entries whose
    square lies within :data:`SQUARE_MARGIN` below the n-th best; returns how many are left.

    sqrt is monotone, so nothing below that margin can reach the n-th best cosine (its root is
    at least two ulps smaller), while entries just below it may round to an equal cosine and
    then win on column: they go through the final selection on the cosines themselves.
    """
    floor = vals[n - 1] * (1.0 - SQUARE_MARGIN)
    left = n
    for p in range(n, count):
        c, v = cols[p], vals[p]
        cols[left], vals[left] = c, v  # branch-free: kept when v >= floor
        left += v >= floor
    return left


@njit(cache=True, nogil=True)
def _keep_at_least(cols, vals, count, n, sample_cols, sample_vals):
    """Drop entries that cannot be among the n best; returns how many are left (≥ n).

    The n-th best x of any n or more of the entries comes at or after the n-th best of all
    of them (the n entries at or before x in the sample are entries too), so every entry
    strictly after x can go. The sample takes every (count // m)-th entry, m = len(sample).
    """
    m = len(sample_cols)
    stride = count // m
    for p in range(m):
        sample_cols[p] = cols[p * stride]
        sample_vals[p] = vals[p * stride]
    _select_best(sample_cols, sample_vals, m, n)
    bound_c, bound_v = sample_cols[n - 1], sample_vals[n - 1]
    left = 0
    for p in range(count):
        c, v = cols[p], vals[p]
        cols[left], vals[left] = c, v  # branch-free: kept unless after the bound
        left += _comes_before(v, c, bound_v, bound_c) | (c == bound_c)
    return left


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
