"""Neighbourhood models on the binary user×item matrix R (SPEC §5): item-kNN and user-kNN.

Both run on sparse products and vectorised numpy; no Python loop runs over users or items.
Their scores are sparse (most items score 0), so they implement ``score_sparse`` and the base
class ranks them with the shared :func:`algorithms.base.top_k_sparse` without ever building a
dense users × items block.

Cosine values are computed as ``sqrt(c² / (a·b))`` from the integer co-occurrence count ``c`` and
the two vectors' sizes ``a`` and ``b`` (R is binary, so ``|R[:, j]|² = a``). Every operand is an
exactly representable integer and each step is correctly rounded, so two mathematically equal
cosines are equal floats and the SPEC tie rules (neighbours by index ascending) apply to them.

Scores are sums of cosines, whose value depends on the summation order in the last bits. They
are rounded to :data:`SCORE_DECIMALS` decimals (:func:`snap_scores`) so that mathematically tied
scores tie exactly and the shared top-k routine orders them by item id, as SPEC §3 requires.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import Field

from algorithms.base import (
    SCORE_BLOCK_ELEMENTS,
    Algorithm,
    AlgorithmConfig,
    TrainData,
    top_k,
    top_n_mask,
)

#: Scores are rounded to this many decimals: far above float64 noise for sums of cosines of
#: realistic magnitude (|score| < 10⁵), far below any real difference between two such sums.
SCORE_DECIMALS = 10

#: A block of similarities is pruned densely (``np.partition``) when at least this share of its
#: cells is non-zero, and sparsely (a per-row sort of its entries) otherwise: both give the same
#: result, the dense way is faster on dense blocks (MovieLens), the sparse one on sparse blocks.
DENSE_PRUNE_DENSITY = 1 / 8

#: Dense blocks hold at most this many cells (8 MB): temporaries of that size are recycled by
#: the allocator instead of being fresh, page-faulting memory every time.
DENSE_BLOCK_CELLS = 1 << 20


def snap_scores(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Round scores to :data:`SCORE_DECIMALS` decimals, in place, and return them."""
    return np.round(scores, SCORE_DECIMALS, out=scores)


def cosine_from_counts(
    overlap: sp.csr_matrix,
    row_sizes: NDArray[np.float64],
    col_sizes: NDArray[np.float64],
) -> sp.csr_matrix:
    """Turn co-occurrence counts into cosines: ``sqrt(c² / (row_size · col_size))``.

    Args:
        overlap: CSR of counts c(r, s) = |X_r ∩ Y_s| (only positive counts stored).
        row_sizes: |X_r| per row of ``overlap``.
        col_sizes: |Y_s| per column of ``overlap``.

    Returns:
        A float64 CSR with the same pattern holding cos(r, s) ∈ (0, 1].
    """
    lengths = np.diff(overlap.indptr)
    counts = overlap.data.astype(np.float64)
    denominator = np.repeat(row_sizes, lengths) * col_sizes[overlap.indices]
    values = np.sqrt(counts * counts / denominator)
    return sp.csr_matrix((values, overlap.indices, overlap.indptr), shape=overlap.shape)


def top_cosines(
    overlap: sp.csr_matrix,
    row_sizes: NDArray[np.float64],
    col_sizes: NDArray[np.float64],
    self_columns: NDArray[np.int64],
    n: int,
) -> sp.csr_matrix:
    """Cosines from co-occurrence counts, without self-similarity, top ``n`` per row.

    Equivalent to :func:`keep_top_per_row` on :func:`cosine_from_counts` without the entries
    (r, self_columns[r]). When most pairs co-occur (density ≥ :data:`DENSE_PRUNE_DENSITY`),
    the cosines are computed as dense blocks of rows instead (same floats, same ties), which
    is several times faster.

    Args:
        overlap: CSR of counts c(r, s) (positive entries only).
        row_sizes, col_sizes: the vector sizes |X_r| and |Y_s| (never 0).
        self_columns: per row, the column holding the row's own entry, dropped.
        n: neighbours to keep per row (0 = all).
    """
    n_rows, n_cols = overlap.shape
    if n <= 0 or overlap.nnz < DENSE_PRUNE_DENSITY * n_rows * n_cols:
        cosine = cosine_from_counts(overlap, row_sizes, col_sizes)
        lengths = np.diff(cosine.indptr)
        row = np.repeat(np.arange(n_rows), lengths)
        cosine.data[cosine.indices == self_columns[row]] = 0.0  # ranks last, then dropped
        keep = cosine.data > 0
        if n > 0 and cosine.nnz and lengths.max() > n:
            keep &= top_n_mask(cosine.indptr, cosine.indices, cosine.data, n)
        return _subset(cosine, keep, row)
    block = max(1, DENSE_BLOCK_CELLS // max(n_cols, 1))
    pieces = []
    for lo in range(0, n_rows, block):
        part = overlap[lo : lo + block] if n_rows > block else overlap
        cells = part.toarray().astype(np.float64)
        np.multiply(cells, cells, out=cells)
        cells /= np.multiply.outer(row_sizes[lo : lo + block], col_sizes)
        np.sqrt(cells, out=cells)
        own = self_columns[lo : lo + block]
        cells[np.arange(len(own)), own] = 0.0
        cells[cells == 0] = -np.inf
        pieces.append(_top_of_dense(cells, n))
    return pieces[0] if len(pieces) == 1 else sp.vstack(pieces, format="csr")


def keep_top_per_row(matrix: sp.csr_matrix, n: int) -> sp.csr_matrix:
    """Keep the ``n`` largest stored entries of every row; ties by column ascending.

    ``n = 0`` keeps everything. Stored entries must be positive (absent cells are not
    candidates). Dense matrices go through the shared :func:`algorithms.base.top_k` (one
    ``np.partition`` pass per row), sparse ones through :func:`algorithms.base.top_n_mask`
    (one integer sort of the entries). Both give exactly the same result.

    Args:
        matrix: CSR with positive float64 values.
        n: neighbours to keep per row.

    Returns:
        The pruned CSR (columns sorted within rows).
    """
    n_rows, n_cols = matrix.shape
    if n > 0 and matrix.nnz >= DENSE_PRUNE_DENSITY * n_rows * n_cols and matrix.nnz:
        cells = matrix.toarray().astype(np.float64)
        cells[cells == 0] = -np.inf
        return _top_of_dense(cells, n)
    return _keep_top_sparse(matrix, n)


def _keep_top_sparse(matrix: sp.csr_matrix, n: int) -> sp.csr_matrix:
    lengths = np.diff(matrix.indptr)
    if n <= 0 or matrix.nnz == 0 or lengths.max() <= n:
        return matrix
    keep = top_n_mask(matrix.indptr, matrix.indices, matrix.data, n)
    return _subset(matrix, keep, np.repeat(np.arange(matrix.shape[0]), lengths))


def _top_of_dense(cells: NDArray[np.float64], n: int) -> sp.csr_matrix:
    """The n best finite cells of every row (ties by column) as a CSR; -inf cells never."""
    cols = top_k(cells, n)
    rows = np.broadcast_to(np.arange(len(cols))[:, None], cols.shape)
    valid = cols >= 0
    r, c = rows[valid], cols[valid]
    pruned = sp.csr_matrix((cells[r, c], (r, c)), shape=cells.shape, dtype=np.float64)
    pruned.sort_indices()
    return pruned


def _subset(
    matrix: sp.csr_matrix, keep: NDArray[np.bool_], row: NDArray[np.int64]
) -> sp.csr_matrix:
    indptr = np.zeros(matrix.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(row[keep], minlength=matrix.shape[0]), out=indptr[1:])
    return sp.csr_matrix((matrix.data[keep], matrix.indices[keep], indptr), shape=matrix.shape)


# ---------------------------------------------------------------------------------- item-kNN
class ItemKNNConfig(AlgorithmConfig):
    n_neighbors: int = Field(
        default=100,
        ge=0,
        description="neighbours kept per item: row j of S keeps its n largest cosines "
        "(ties by item id); 0 keeps all",
    )


class ItemKNN(Algorithm):
    """Item-based kNN with cosine similarity (SPEC §5).

    With R the binary user×item matrix and a_j = |R[:, j]| the number of users of item j::

        S(j, i) = cos(R[:, j], R[:, i]) = (RᵀR)_{ji} / sqrt(a_j · a_i)      for i ≠ j,
        S(j, i) = 0                                                           for i = j,

    row j of S pruned to its ``n_neighbors`` largest entries (ties by item id ascending; 0 keeps
    all), and ``score(u, i) = Σ_{j ∈ I_u} S(j, i) = (R S)[u, i]``.

    Rows of S are materialised lazily, only for the items of the users being scored (and cached
    until the next ``fit``): a fold's evaluated users usually touch a fraction of the catalogue
    (a third to a half on the benchmarks), and the result is identical to computing S whole.
    So ``fit`` is cheap and the work shows up in ``recommend``.
    """

    name: ClassVar[str] = "item-knn"
    Config: ClassVar[type[AlgorithmConfig]] = ItemKNNConfig
    sparse_scores: ClassVar[bool] = True

    def _fit(self, train: TrainData) -> None:
        self.matrix_ = train.matrix
        self.item_users_ = train.matrix.T.tocsr()
        self.item_sizes_ = np.diff(self.item_users_.indptr).astype(np.float64)
        n_items = train.n_items
        self.similarity_ = sp.csr_matrix((n_items, n_items), dtype=np.float64)
        self.has_row_ = np.zeros(n_items, dtype=bool)

    def similarity(self, items: NDArray[np.int64] | None = None) -> sp.csr_matrix:
        """The pruned similarity matrix S (all rows, or only ``items``' rows filled in)."""
        self._ensure_rows(np.arange(self.matrix_.shape[1]) if items is None else items)
        return self.similarity_

    def score_sparse(self, rows: NDArray[np.int64]) -> sp.csr_matrix:
        history = self.matrix_[rows]
        self._ensure_rows(np.unique(history.indices))
        scores = (history.astype(np.float64) @ self.similarity_).tocsr()
        snap_scores(scores.data)
        return scores

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.score_sparse(rows).toarray()

    def _ensure_rows(self, items: NDArray[np.int64]) -> None:
        """Compute and cache the pruned rows of S for ``items`` not cached yet."""
        missing = np.unique(items[~self.has_row_[items]])
        if len(missing) == 0:
            return
        n_items = self.matrix_.shape[1]
        block = max(1, SCORE_BLOCK_ELEMENTS // max(n_items, 1))
        pieces = []
        for lo in range(0, len(missing), block):
            part = missing[lo : lo + block]
            overlap = (self.item_users_[part] @ self.matrix_).tocsr()
            sizes = self.item_sizes_
            pieces.append(top_cosines(overlap, sizes[part], sizes, part, self.config.n_neighbors))
        rows = sp.vstack(pieces, format="csr")
        # Scatter the new rows into an n_items × n_items matrix; rows are disjoint from the cache.
        lengths = np.zeros(n_items, dtype=np.int64)
        lengths[missing] = np.diff(rows.indptr)
        indptr = np.concatenate(([0], np.cumsum(lengths)))
        scattered = sp.csr_matrix((rows.data, rows.indices, indptr), shape=(n_items, n_items))
        self.similarity_ = (self.similarity_ + scattered).tocsr()
        self.has_row_[missing] = True


# ---------------------------------------------------------------------------------- user-kNN
class UserKNNConfig(AlgorithmConfig):
    n_neighbors: int = Field(
        default=50,
        ge=0,
        description="neighbours per user: the n users with the largest cosine > 0 "
        "(ties by user id); 0 keeps every user with a positive cosine",
    )
    weighting: Literal["count", "cosine"] = Field(
        default="count",
        description="count: score = number of neighbours who consumed the item (the paper); "
        "cosine: score = sum of the cosines of those neighbours",
    )


class UserKNN(Algorithm):
    """User-based kNN with cosine similarity (SPEC §5).

    With b_v = |I_v| the number of items of user v::

        cos(u, v) = (R Rᵀ)_{uv} / sqrt(b_u · b_v),
        N(u) = the n_neighbors users v ≠ u with the largest cos(u, v) > 0 (ties by user id),
        score(u, i) = Σ_{v ∈ N(u)} R[v, i]               (weighting = count)
        score(u, i) = Σ_{v ∈ N(u)} cos(u, v) · R[v, i]   (weighting = cosine)

    Every training user is a neighbour candidate. Only the requested users' rows of R Rᵀ are
    computed (one sparse product per score block), so ``fit`` is cheap and the cost grows with
    the number of evaluated users, not with all training users squared.
    """

    name: ClassVar[str] = "user-knn"
    Config: ClassVar[type[AlgorithmConfig]] = UserKNNConfig
    sparse_scores: ClassVar[bool] = True

    def _fit(self, train: TrainData) -> None:
        self.matrix_ = train.matrix
        self.values_ = train.matrix.astype(np.float64)
        self.item_users_ = train.matrix.T.tocsr()
        self.user_sizes_ = np.diff(train.matrix.indptr).astype(np.float64)

    def neighbours(self, rows: NDArray[np.int64]) -> sp.csr_matrix:
        """W: row r holds cos(rows[r], v) for the kept neighbours v (columns = training rows)."""
        rows = np.asarray(rows, dtype=np.int64)
        overlap = (self.matrix_[rows] @ self.item_users_).tocsr()
        sizes = self.user_sizes_
        return top_cosines(overlap, sizes[rows], sizes, rows, self.config.n_neighbors)

    def score_sparse(self, rows: NDArray[np.int64]) -> sp.csr_matrix:
        weights = self.neighbours(rows)
        if self.config.weighting == "count":
            weights.data[:] = 1.0
        scores = (weights @ self.values_).tocsr()
        snap_scores(scores.data)
        return scores

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.score_sparse(rows).toarray()
