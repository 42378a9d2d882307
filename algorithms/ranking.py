"""Top-k ranking with SPEC's tie rule: score descending, ties by column (= item id) ascending.

Candidates are the training columns minus each user's own training row (SPEC §3). Every model's
lists come from here (:meth:`algorithms.base.Algorithm.recommend`): dense score blocks
(:func:`top_k_unseen`), one score vector shared by all users (:func:`top_k_global`) and sparse
scores given as a product of factors (:func:`top_k_of_product`). The inner loops are the
compiled kernels of :mod:`algorithms.ranking_kernels`, imported on first use (numba), run over
row chunks in threads (:mod:`algorithms.row_chunks`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray


def top_k(scores: NDArray[np.float64], k: int) -> NDArray[np.int64]:
    """The k best columns of every row: score descending, ties by column ascending.

    Entries equal to -inf (or NaN) are never returned; rows with fewer than k such entries are
    padded with -1. Cost per row: one pass through a bounded heap of the best k
    (:func:`algorithms.ranking_kernels.top_k_dense`), ties at the cut-off resolved exactly.

    Args:
        scores: (n, m) scores (not modified).
        k: list length.

    Returns:
        (n, k) column indices.
    """
    n = scores.shape[0]
    no_seen = np.zeros(n + 1, dtype=np.int64)
    return _top_k_dense(np.array(scores, dtype=np.float64, copy=True), no_seen, no_seen, k)


def top_k_unseen(
    scores: NDArray[np.float64], matrix: sp.csr_matrix, rows: NDArray[np.int64], k: int
) -> NDArray[np.int64]:
    """:func:`top_k` of ``scores`` with each row's training columns excluded.

    ``scores`` (len(rows) × n_items, float64, C-contiguous) is used as work space: its seen
    cells are overwritten with -inf.
    """
    seen = matrix[rows]
    return _top_k_dense(scores, seen.indptr, seen.indices, k)


def _top_k_dense(scores, seen_indptr, seen_indices, k: int) -> NDArray[np.int64]:
    from sweval.algorithms.ranking_kernels import top_k_dense
    from sweval.algorithms.row_chunks import over_row_chunks

    n = scores.shape[0]
    out = np.full((n, k), -1, dtype=np.int64)
    if scores.size and k:
        scores = np.ascontiguousarray(scores)

        def rank(lo: int, hi: int) -> None:
            block = scores[lo:hi]
            top_k_dense(block, seen_indptr[lo : hi + 1], seen_indices, k, out[lo:hi])

        over_row_chunks(n, rank)
    return out


def top_k_global(
    scores: NDArray[np.float64], matrix: sp.csr_matrix, rows: NDArray[np.int64], k: int
) -> NDArray[np.int64]:
    """Top-k per row when every row shares the same ``scores``, minus each row's seen columns.

    Equivalent to :func:`top_k` on the broadcast scores with seen items set to -inf, but ranks
    the catalogue once and never walks it per row. With ``ranking`` the finite columns by
    (score desc, column asc) and s_0 < s_1 < … the ranking positions of a row's seen columns,
    g_i = s_i − i counts the unseen positions before s_i, and the row's j-th unseen column sits
    at position::

        p_j = j + #{i : g_i ≤ j}

    (g is non-decreasing, so the count is a ``searchsorted``). All rows are answered by one
    sort and one ``searchsorted`` over row-offset keys: numpy only, no per-row loop.
    """
    out = np.full((len(rows), k), -1, dtype=np.int64)
    ranking = np.lexsort((np.arange(len(scores)), -scores))  # score desc, column asc
    ranking = ranking[np.isfinite(scores[ranking])]
    n_ranked = len(ranking)
    if len(rows) == 0 or n_ranked == 0 or k == 0:
        return out
    position_of = np.full(len(scores), n_ranked, dtype=np.int64)  # unranked: past the end
    position_of[ranking] = np.arange(n_ranked)
    seen = matrix[rows]
    seen_row = np.repeat(np.arange(len(rows), dtype=np.int64), np.diff(seen.indptr))
    stride = np.int64(n_ranked + 1)  # keys row·stride + value keep rows apart
    seen_keys = np.sort(seen_row * stride + position_of[seen.indices])
    seen_keys = seen_keys[seen_keys % stride < n_ranked]  # unranked seen columns never show
    row_start = np.searchsorted(seen_keys, np.arange(len(rows), dtype=np.int64) * stride)
    index_in_row = np.arange(len(seen_keys)) - row_start[seen_keys // stride]
    gap_keys = seen_keys - index_in_row  # row·stride + g_i, non-decreasing
    j = np.arange(k, dtype=np.int64)
    query = np.arange(len(rows), dtype=np.int64)[:, None] * stride + j
    position = j + np.searchsorted(gap_keys, query, side="right") - row_start[:, None]
    found = position < n_ranked
    out[found] = ranking[position[found]]
    return out


def top_k_of_product(
    h: sp.csr_matrix,
    w: sp.csr_matrix,
    matrix: sp.csr_matrix,
    rows: NDArray[np.int64],
    k: int,
    *,
    snap: bool,
) -> NDArray[np.int64]:
    """:func:`top_k` of the sparse scores ``H @ W`` (entries ≥ 0), seen columns excluded.

    Same result as ``top_k`` on the dense product (through :func:`snap_scores` when ``snap``)
    with each row's training columns at -inf: the positive unseen scores by (score desc, column
    asc), then the unseen columns scoring 0 in column order, padded with -1. The product is
    never materialised: each row's sums live in one dense accumulator
    (:func:`algorithms.ranking_kernels.top_k_weighted_sum`).

    Args:
        h: (len(rows) × t) CSR of weights.
        w: (t × n_items) CSR.
        matrix: the training matrix R.
        rows: the training rows the score rows belong to.
        k: list length.
        snap: round the sums before ranking (to make mathematically equal sums tie).
    """
    from sweval.algorithms.ranking_kernels import top_k_weighted_sum
    from sweval.algorithms.row_chunks import over_row_chunks

    n, m = h.shape[0], w.shape[1]
    out = np.full((n, k), -1, dtype=np.int64)
    if n == 0 or m == 0 or k == 0:
        return out
    h, w = sp.csr_matrix(h, dtype=np.float64), sp.csr_matrix(w, dtype=np.float64)
    seen = matrix[rows]

    def rank(lo: int, hi: int) -> None:  # row slices of the CSRs keep absolute positions
        top_k_weighted_sum(
            h.indptr[lo : hi + 1], h.indices, h.data, w.indptr, w.indices, w.data,
            seen.indptr[lo : hi + 1], seen.indices, k, m, snap, out[lo:hi],
        )  # fmt: skip

    over_row_chunks(n, rank)
    return out


def csr_problem(matrix: sp.csr_matrix, shape: tuple[int, int]) -> str | None:
    """What is wrong with ``matrix`` as a CSR of ``shape`` whose entries are finite and ≥ 0,
    or None: the ranking kernels read its column indices as positions, so an index out of range
    would read or write outside their arrays (a crash, or a silently wrong list), and a negative
    entry would break the rule that unscored columns rank after the scored ones. One pass over
    the indices and the values; scipy itself does not check the indices of a CSR built from
    ``(data, indices, indptr)``."""
    if matrix.shape != shape:
        return f"has shape {matrix.shape}, expected {shape}"
    indptr, indices, data = matrix.indptr, matrix.indices, matrix.data
    if (len(indptr) != shape[0] + 1 or indptr[0] != 0 or indptr[-1] != len(indices)
            or len(data) != len(indices) or (np.diff(indptr) < 0).any()):
        return "is not a well-formed CSR (its indptr does not match its indices and data)"
    if len(indices) == 0:
        return None
    low, high = int(indices.min()), int(indices.max())
    if low < 0 or high >= shape[1]:
        bad = int(np.flatnonzero((indices < 0) | (indices >= shape[1]))[0])
        row = int(np.searchsorted(indptr, bad, side="right")) - 1
        return (f"holds column index {int(indices[bad])} (row {row}), outside 0..{shape[1] - 1}"
                f" ({shape[1]:,} columns)")
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(data.sum()) or bool(np.isfinite(data).all())  # a sum can overflow
    if not finite or data.min() < 0:
        return "holds entries that are negative, NaN or infinite (they must be finite and ≥ 0)"
    return None
