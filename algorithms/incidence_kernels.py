"""Compiled layouts of a self-join's sets for the neighbour kernels (numba, ``nogil``).

A kNN self-join (user-kNN: users × users; item-kNN: items × items) walks, per set, the lists
of the sets that share an element with it. :func:`shared_incidence` builds those arrays for
:func:`algorithms.neighbour_kernels.cosine_neighbours`, leaving out the lists that could only
count a set's overlap with itself; :func:`size_order` and :func:`ranked_postings` number the
sets by size rank and list, per element, the ranks holding it, for
:func:`algorithms.ranked_neighbour_kernels.ranked_cosine_neighbours`. Each is a counting sort
in a few sequential passes, which numpy could only express with full sorts.

The kernels compile on first use and are cached on disk (``cache=True``) and release the GIL;
they call no compiled code of another file (numba's disk cache only watches the file that
defines a kernel).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def shared_incidence(indptr, indices, n_cols, b_indices, a_indices):
    """The incidence of a self-join over the columns of a CSR, without its rows of length 1.

    The CSR (``indptr``, ``indices``) lists per row t the columns s with t ∈ X_s (item-kNN:
    the users' items). A row of length 1 only ever adds to c(s, s), so
    :func:`cosine_neighbours` needs neither it nor the postings that lead to it; leaving them
    out makes the walk's arrays smaller (``b_indices`` may be a narrower integer type).

    Args:
        b_indices, a_indices: output arrays of Σ_{|row| ≥ 2} |row| entries each, of any
            integer types wide enough for the columns and for the kept rows.

    Returns:
        (col_sizes, a_indptr, b_indptr): |X_s| for every column (all rows counted); per
        column s, ``a_indices[a_indptr[s]:a_indptr[s + 1]]`` = the kept rows holding s,
        renumbered 0, 1, ... in row order (ascending); per kept row k,
        ``b_indices[b_indptr[k]:b_indptr[k + 1]]`` = its columns, in the CSR's order.
    """
    n_rows = len(indptr) - 1
    col_sizes = np.zeros(n_cols, dtype=np.int64)  # for now: the rows of length 1 only
    a_indptr = np.zeros(n_cols + 1, dtype=np.int64)
    n_kept = 0
    for t in range(n_rows):
        length = indptr[t + 1] - indptr[t]
        if length == 1:
            col_sizes[indices[indptr[t]]] += 1
        elif length > 1:
            n_kept += 1
            for p in range(indptr[t], indptr[t + 1]):
                a_indptr[indices[p] + 1] += 1
    for s in range(n_cols):
        col_sizes[s] += a_indptr[s + 1]
        a_indptr[s + 1] += a_indptr[s]
    fill = a_indptr[:-1].copy()
    b_indptr = np.zeros(n_kept + 1, dtype=np.int64)
    k = 0
    z = 0
    for t in range(n_rows):
        if indptr[t + 1] - indptr[t] > 1:
            for p in range(indptr[t], indptr[t + 1]):
                s = indices[p]
                b_indices[z] = s
                z += 1
                a_indices[fill[s]] = k
                fill[s] += 1
            k += 1
            b_indptr[k] = z
    return col_sizes, a_indptr, b_indptr


# ------------------------------------------------------------------ sets ranked by their size
# A self-join (user-kNN: users × users; item-kNN: items × items) whose sets are numbered by
# *rank*, the position in the order (|X_s| ascending, s ascending). Within one overlap count c
# the cosine c / sqrt(a·|X_s|) falls as |X_s| grows and ties go to the lower s, so among the
# candidates with the same count the better one is the one with the lower rank: the selection
# needs the n lowest ranks of each count and never looks at the others.


@njit(cache=True, nogil=True)
def size_order(indptr):
    """The sets ordered by (size ascending, index ascending), by a counting sort.

    Returns:
        (order, rank_of): ``order[k]`` the set of rank k (int64), ``rank_of[s]`` the rank of
        set s (int32).
    """
    n_sets = len(indptr) - 1
    largest = 0
    for s in range(n_sets):
        largest = max(largest, indptr[s + 1] - indptr[s])
    start = np.zeros(largest + 2, dtype=np.int64)
    for s in range(n_sets):
        start[indptr[s + 1] - indptr[s] + 1] += 1
    for size in range(largest + 1):
        start[size + 1] += start[size]
    order = np.empty(n_sets, dtype=np.int64)
    rank_of = np.empty(n_sets, dtype=np.int32)
    for s in range(n_sets):  # ascending s: ties in size keep the index order
        size = indptr[s + 1] - indptr[s]
        order[start[size]] = s
        rank_of[s] = start[size]
        start[size] += 1
    return order, rank_of


@njit(cache=True, nogil=True)
def ranked_postings(indptr, indices, n_elements):
    """Per element t, the ranks of the sets that hold t, ascending (a transposed CSR), with
    the ranks of :func:`size_order`.

    Two sequential passes, O(nnz + largest size): the sets' elements are first copied into
    rank order (a counting sort by size, reading the sets in index order and writing one run
    per size), then scattered by element, rank by rank. Reading the sets in rank order
    directly (``order[k]`` → its row) sweeps the whole CSR once per distinct size: 2.5×
    slower at scale 10 (1.9M sets); the result is the same.

    Returns:
        (p_indptr, p_ranks): int64 offsets per element and int32 ranks.
    """
    n_sets = len(indptr) - 1
    largest = 0
    for s in range(n_sets):
        largest = max(largest, indptr[s + 1] - indptr[s])
    with_size = np.zeros(largest + 1, dtype=np.int64)  # the number of sets of each size
    p_indptr = np.zeros(n_elements + 1, dtype=np.int64)
    for s in range(n_sets):
        with_size[indptr[s + 1] - indptr[s]] += 1
    run = np.zeros(largest + 1, dtype=np.int64)  # where the next set of each size goes
    for size in range(largest):
        run[size + 1] = run[size] + size * with_size[size]
    by_rank = np.empty(len(indices), dtype=indices.dtype)
    for s in range(n_sets):  # ascending s: ties in size keep the index order, as ranks do
        size = indptr[s + 1] - indptr[s]
        z = run[size]
        for p in range(indptr[s], indptr[s + 1]):
            t = indices[p]
            by_rank[z] = t
            z += 1
            p_indptr[t + 1] += 1
        run[size] = z
    for t in range(n_elements):
        p_indptr[t + 1] += p_indptr[t]
    fill = p_indptr[:-1].copy()
    p_ranks = np.empty(len(indices), dtype=np.int32)
    k = 0  # rank k's elements follow rank k − 1's in by_rank
    z = 0
    for size in range(largest + 1):
        for _ in range(with_size[size]):
            for _ in range(size):
                t = by_rank[z]
                z += 1
                p_ranks[fill[t]] = k  # ranks in ascending order: every list comes out sorted
                fill[t] += 1
            k += 1
    return p_indptr, p_ranks
