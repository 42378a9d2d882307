"""Neighbourhood models on the binary user×item matrix R (SPEC §5): item-kNN and user-kNN.

Both are sparse: a user's scores are a weighted sum of a few sparse rows (item-kNN: the
similarity rows of the user's items; user-kNN: the neighbours' rows of R). They implement
``score_factors`` and the base class ranks ``H @ W`` with the compiled
:func:`algorithms.ranking.top_k_of_product`, never building a dense users × items block.

Cosines come from integer co-occurrence counts, in one compiled pass per row that counts,
divides and selects the neighbours (:func:`algorithms.neighbour_kernels.cosine_neighbours`)::

    cos(r, s) = sqrt(c² / (a · b))      c = |X_r ∩ X_s|, a = |X_r|, b = |X_s|

(R is binary, so |X|² = |X|). Every operand is an exactly representable integer and each step
is correctly rounded, so two mathematically equal cosines are equal floats and the SPEC tie
rules (neighbours by index ascending) apply to them.

Scores are sums of cosines, whose value depends on the summation order in the last bits. They
are rounded to :data:`algorithms.scores.SCORE_DECIMALS` decimals before ranking so that
mathematically tied scores tie exactly and are ordered by item id, as SPEC §3 requires.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.serving import Delta
from sweval.algorithms.train_data import TrainData

if TYPE_CHECKING:
    from sweval.algorithms.cooccurrence import Cooccurrence


def top_cosines(
    rows: NDArray[np.int64],
    row_sets: sp.csr_matrix,
    col_sets_t: sp.csr_matrix,
    row_sizes: NDArray[np.float64],
    col_sizes: NDArray[np.float64],
    n: int,
    *,
    sort_columns: bool = True,
) -> sp.csr_matrix:
    """Row r of the result holds the ``n`` largest cos(rows[r], s), s ≠ rows[r] (0 keeps all).

    Args:
        rows: the rows to compute, indices into ``row_sets``.
        row_sets: CSR whose row r lists the elements of X_r.
        col_sets_t: CSR whose row t lists the columns s with t ∈ X_s (the transposed incidence).
        row_sizes, col_sizes: |X_r| per row and |X_s| per column (never 0 where used).
        n: neighbours per row.
        sort_columns: columns ascending within rows (else the same entries in any order).

    Returns:
        A len(rows) × n_cols float64 CSR.
    """
    from sweval.algorithms.neighbour_kernels import cosine_neighbours  # numba: import on use
    from sweval.algorithms.row_chunks import over_row_chunks

    n_cols = col_sizes.shape[0]
    rows = np.asarray(rows, dtype=np.int64)
    pieces = over_row_chunks(
        len(rows),
        lambda lo, hi: cosine_neighbours(
            rows[lo:hi], row_sets.indptr, row_sets.indices, col_sets_t.indptr,
            col_sets_t.indices, row_sizes, col_sizes, n, n_cols, sort_columns,
        ),
    )  # fmt: skip
    return _stack_rows(pieces, len(rows), n_cols, sort_columns)


#: Largest set size for which :class:`RankedSets` may be used: with every size ≤ K and
#: 6·K³ < 2⁵³ the float cosines keep the exact order of c²/(a·b), which the ranked kernel relies
#: on (:func:`algorithms.ranked_neighbour_kernels.ranked_cosine_neighbours` gives the
#: proof).
RANKED_MAX_SIZE = 114_000


class RankedSets:
    """The sets X_s of a self-join (the rows of ``sets``) numbered by size rank, for
    :meth:`top_cosines`: rank k is the k-th set in the order (|X_s| ascending, s ascending).

    Attributes:
        sets: CSR whose row s lists the elements of X_s.
        order: the set of each rank (int64); ``rank_of``: the rank of each set (int32).
        rank_sizes: |X_s| by rank (int32).
        p_indptr, p_ranks: per element, the ranks of the sets holding it, ascending (the
            transposed incidence with sets renumbered by rank).
    """

    def __init__(self, sets: sp.csr_matrix) -> None:
        from sweval.algorithms.incidence_kernels import ranked_postings, size_order

        self.sets = sets
        indptr = sets.indptr.astype(np.int64, copy=False)
        self.order, self.rank_of = size_order(indptr)
        sizes = np.diff(indptr)
        self.rank_sizes = sizes[self.order].astype(np.int32)
        self.p_indptr, self.p_ranks = ranked_postings(indptr, sets.indices, sets.shape[1])
        largest = int(sizes.max()) if len(sizes) else 0
        self.counter = np.empty(0, dtype=np.uint16 if largest < 2**16 else np.uint32)

    @staticmethod
    def usable(sets: sp.csr_matrix) -> bool:
        """Every set is small enough for the float order to be exact (:data:`RANKED_MAX_SIZE`)."""
        sizes = np.diff(sets.indptr)
        return len(sizes) == 0 or int(sizes.max()) <= RANKED_MAX_SIZE

    def top_cosines(
        self, rows: NDArray[np.int64], n: int, *, sort_columns: bool = True
    ) -> sp.csr_matrix:
        """Row r holds the ``n`` largest cos(rows[r], s), s ≠ rows[r] (0 keeps all): the same
        matrix as :func:`top_cosines` on these sets, computed rank-wise."""
        from sweval.algorithms.ranked_neighbour_kernels import ranked_cosine_neighbours
        from sweval.algorithms.row_chunks import over_row_chunks

        sets = self.sets
        rows = np.asarray(rows, dtype=np.int64)
        pieces = over_row_chunks(
            len(rows),
            lambda lo, hi: ranked_cosine_neighbours(
                rows[lo:hi], sets.indptr, sets.indices, self.p_indptr, self.p_ranks,
                self.order, self.rank_of, self.rank_sizes, self.counter, n, sort_columns,
            ),
        )  # fmt: skip
        return _stack_rows(pieces, len(rows), len(self.order), sort_columns)


def _stack_rows(pieces, n_rows: int, n_cols: int, sort_columns: bool) -> sp.csr_matrix:
    """One CSR from the (indptr, indices, data) of consecutive row chunks."""
    lengths = np.concatenate([np.diff(indptr) for indptr, _, _ in pieces])
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    indices = np.concatenate([piece[1] for piece in pieces])
    data = np.concatenate([piece[2] for piece in pieces])
    result = sp.csr_matrix((data, indices, indptr), shape=(n_rows, n_cols))
    result.has_sorted_indices = sort_columns
    return result


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

    A row's counts (RᵀR)_{j·} come from one of two places, with the same floats and the same
    rows (:mod:`algorithms.neighbour_kernels`): a walk over j's users and their items
    (``cosine_neighbours``, after ``fit`` builds the item → users incidence), or, when the
    training data carries them (``train.cooccurrence``: folds advanced in order with item-kNN
    in the run, :mod:`evaluators.protocols.training_state`), C's stored row
    (``cooccurrence_neighbours``): no incidence to build, and a row costs its distinct
    co-occurring items instead of its users' items.
    """

    name: ClassVar[str] = "item-knn"
    exact_update: ClassVar[bool] = True
    Config: ClassVar[type[AlgorithmConfig]] = ItemKNNConfig
    sparse_scores: ClassVar[bool] = True

    def _fit(self, train: TrainData) -> None:
        from sweval.algorithms.incidence_kernels import shared_incidence

        matrix = train.matrix
        n_items = train.n_items
        if train.cooccurrence is not None:  # rows of RᵀR carried across folds: no walk
            self._from_cooccurrence(train, train.cooccurrence)
            return
        self._reset(train, None)
        # The walk's arrays without the users of one item (they add only to S(j, j)): per
        # item its users of ≥ 2 items, per such user its items, in the narrowest index type.
        # Reading these users' rows is what bounds the count; smaller arrays stay in cache.
        lengths = np.diff(matrix.indptr)
        shared = lengths > 1
        n_pairs = int(lengths[shared].sum())
        narrow = np.uint16 if n_items <= 2**16 else np.int32
        self.user_items_ = np.empty(n_pairs, dtype=narrow)
        self.item_users_ = np.empty(n_pairs, dtype=np.int32 if len(lengths) < 2**31 else np.int64)
        sizes, self.item_indptr_, self.user_indptr_ = shared_incidence(
            matrix.indptr, matrix.indices, n_items, self.user_items_, self.item_users_
        )
        self.item_sizes_ = sizes.astype(np.float64)

    def _reset(self, train: TrainData, cooccurrence: Cooccurrence | None) -> None:
        """A model of ``train`` with no row of S computed yet."""
        self.matrix_ = train.matrix
        self.similarity_ = sp.csr_matrix((train.n_items, train.n_items), dtype=np.float64)
        self.has_row_ = np.zeros(train.n_items, dtype=bool)
        self.cooccurrence_ = cooccurrence
        self.item_codes_ = train.item_codes

    def _from_cooccurrence(self, train: TrainData, cooccurrence: Cooccurrence) -> None:
        """S's rows to come from C = RᵀR of ``train`` (global item codes)."""
        self._reset(train, cooccurrence)
        self.item_sizes_ = cooccurrence.item_users.astype(np.float64)  # global codes
        # global code → column (a gather per neighbour; a binary search cost 2× the rows)
        self.column_of_ = np.full(cooccurrence.n_items, -1, dtype=np.int64)
        self.column_of_[train.item_codes] = np.arange(train.n_items, dtype=np.int64)

    def _update(self, delta: Delta, previous: TrainData) -> None:
        """C advanced by the delta's new (user, item) pairs (:meth:`Cooccurrence.advanced`:
        exact integer counts; counted once from the fit's data when the fit walked the users
        instead); the cached rows of S are dropped and come from the new C as users are
        scored, the same floats as a fit on the new data."""
        assert self.train_ is not None
        from sweval.algorithms.cooccurrence import Cooccurrence

        counts = self.cooccurrence_
        if counts is None or counts.n_items < delta.n_items:
            counts = Cooccurrence.from_matrix(previous.matrix, previous.item_codes,
                                              delta.n_items)
        counts = counts.advanced(previous.matrix, previous.user_codes, previous.item_codes,
                                 *delta.pairs())
        self._from_cooccurrence(self.train_, counts)

    def similarity(self, items: NDArray[np.int64] | None = None) -> sp.csr_matrix:
        """The pruned similarity matrix S (all rows, or only ``items``' rows filled in)."""
        self._ensure_rows(np.arange(self.matrix_.shape[1]) if items is None else items)
        self.similarity_.sort_indices()
        return self.similarity_

    def _serve(self, history: TrainData) -> None:
        """S stays the fit's (its rows come from the fit's counts); a user's items I_u are
        their row of ``history``."""
        self.matrix_ = history.matrix

    def score_factors(self, rows: NDArray[np.int64]) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        history = self.matrix_[rows]
        self._ensure_rows(np.unique(history.indices))
        return history, self.similarity_

    def _ensure_rows(self, items: NDArray[np.int64]) -> None:
        """Compute and cache the pruned rows of S for ``items`` not cached yet."""
        missing = np.unique(items[~self.has_row_[items]]).astype(np.int64)
        if len(missing) == 0:
            return
        from sweval.algorithms.neighbour_kernels import cosine_neighbours
        from sweval.algorithms.row_chunks import over_row_chunks

        sizes = self.item_sizes_
        n_items = self.matrix_.shape[1]
        if self.cooccurrence_ is not None:
            rows = self._rows_from_cooccurrence(missing)
        else:
            pieces = over_row_chunks(  # unsorted rows: the ranking sums each column once
                len(missing),
                lambda lo, hi: cosine_neighbours(
                    missing[lo:hi], self.item_indptr_, self.item_users_, self.user_indptr_,
                    self.user_items_, sizes, sizes, self.config.n_neighbors, n_items, False,
                ),
            )  # fmt: skip
            rows = _stack_rows(pieces, len(missing), n_items, False)
        # Scatter the new rows into an n_items × n_items matrix; rows are disjoint from the cache.
        lengths = np.zeros(n_items, dtype=np.int64)
        lengths[missing] = np.diff(rows.indptr)
        indptr = np.concatenate(([0], np.cumsum(lengths)))
        scattered = sp.csr_matrix((rows.data, rows.indices, indptr), shape=(n_items, n_items))
        scattered.has_sorted_indices = False
        if self.has_row_.any():
            self.similarity_ = (self.similarity_ + scattered).tocsr()
        else:  # the usual case: one batch of users per fold
            self.similarity_ = scattered
        self.has_row_[missing] = True


    def _rows_from_cooccurrence(self, missing: NDArray[np.int64]) -> sp.csr_matrix:
        """Rows ``missing`` of S from the carried counts: computed in global item codes (the
        same order as the compact columns, so the same ties), columns mapped back."""
        from sweval.algorithms.neighbour_kernels import cooccurrence_neighbours
        from sweval.algorithms.row_chunks import over_row_chunks

        c = self.cooccurrence_
        assert c is not None
        codes = self.item_codes_[missing]
        pieces = over_row_chunks(
            len(missing),
            lambda lo, hi: cooccurrence_neighbours(
                codes[lo:hi], c.base_indptr, c.base_indices, c.base_counts, c.recent_indptr,
                c.recent_indices, c.recent_counts, self.item_sizes_, self.config.n_neighbors,
                c.n_items, False,
            ),
        )  # fmt: skip
        pieces = [(indptr, self.column_of_[columns], data) for indptr, columns, data in pieces]
        return _stack_rows(pieces, len(missing), self.matrix_.shape[1], False)


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
    counted (one compiled pass per user, no users × users product), so ``fit`` is cheap and the
    cost grows with the number of evaluated users, not with all training users squared. The
    users are numbered by size rank (:class:`RankedSets`): each user's most popular item is then
    only read, and the neighbours sharing one item come from the heads of the lists
    (:func:`algorithms.ranked_neighbour_kernels.ranked_cosine_neighbours`); same neighbours,
    bit for bit, as the plain count.
    """

    name: ClassVar[str] = "user-knn"
    exact_update: ClassVar[bool] = True
    Config: ClassVar[type[AlgorithmConfig]] = UserKNNConfig
    sparse_scores: ClassVar[bool] = True

    def _fit(self, train: TrainData) -> None:
        self.matrix_ = train.matrix
        matrix = train.matrix  # R as float64 weights, sharing R's index arrays (no copy)
        self.values_ = sp.csr_matrix(
            (np.ones(matrix.nnz), matrix.indices, matrix.indptr), shape=matrix.shape
        )
        self.ranked_ = RankedSets(train.matrix) if RankedSets.usable(train.matrix) else None

    def _serve(self, history: TrainData) -> None:
        """user-kNN has no parameters but R: neighbours and their items are read from
        ``history`` (only the items known at the fit stay candidates)."""
        self._fit(history)

    def _update(self, delta: Delta, previous: TrainData) -> None:
        """user-kNN has no parameters but R: the updated model reads the new R."""
        assert self.train_ is not None
        self._fit(self.train_)

    def neighbours(self, rows: NDArray[np.int64]) -> sp.csr_matrix:
        """W: row r holds cos(rows[r], v) for the kept neighbours v (columns = training rows)."""
        if self.ranked_ is not None:
            return self.ranked_.top_cosines(rows, self.config.n_neighbors)
        # a user of more than RANKED_MAX_SIZE items: the plain count
        sizes = np.diff(self.matrix_.indptr).astype(np.float64)
        return top_cosines(
            rows, self.matrix_, self.matrix_.T.tocsr(), sizes, sizes, self.config.n_neighbors
        )

    def score_factors(self, rows: NDArray[np.int64]) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        weights = self.neighbours(rows)
        if self.config.weighting == "count":
            weights.data[:] = 1.0
        return weights, self.values_
