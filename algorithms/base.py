"""The algorithm interface, the training data every model sees, and the one shared top-k routine.

A model for fold f is fitted on :class:`TrainData` built from D_{t_f} only. TrainData lives in a
*compact* index space: rows are the users present in D_{t_f}, columns the items present in D_{t_f},
both in ascending global-code order (= SPEC tie-break order). So a model cannot even address an
item that first appears at or after t_f, and "ties by item id ascending" is "ties by column
ascending".

Recommending (SPEC §3): candidates are the training columns minus the user's own training row;
ranking is by score descending, ties by column ascending (:func:`top_k`).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

_log = logging.getLogger(__name__)

#: Dense score blocks are at most this many floats (64 MB): the user batch adapts to the catalogue.
SCORE_BLOCK_ELEMENTS = 8_000_000


@dataclass(frozen=True, slots=True)
class TrainData:
    """The training data of one fold, in the compact index space.

    Attributes:
        matrix: binary CSR R, users × items (float32 ones; repeats collapse to 1).
        user_codes: global user code of each row, ascending.
        item_codes: global item code of each column, ascending.
        item_sequence: column of every training transaction, in time order (repeats kept when
            the log keeps them); POP counts it, POP-N takes its tail.
    """

    matrix: sp.csr_matrix
    user_codes: NDArray[np.int64]
    item_codes: NDArray[np.int64]
    item_sequence: NDArray[np.int64]

    @classmethod
    def from_codes(
        cls,
        user: NDArray[np.int64],
        item: NDArray[np.int64],
        *,
        n_users: int,
        n_items: int,
    ) -> TrainData:
        """Build from the time-ordered global codes of the training transactions.

        Args:
            user, item: global codes, one per transaction, time-ordered.
            n_users, n_items: sizes of the global code spaces.
        """
        user_present = np.bincount(user, minlength=n_users) > 0
        item_present = np.bincount(item, minlength=n_items) > 0
        user_codes = np.flatnonzero(user_present).astype(np.int64)
        item_codes = np.flatnonzero(item_present).astype(np.int64)
        user_row = np.cumsum(user_present, dtype=np.int64) - 1
        item_col = np.cumsum(item_present, dtype=np.int64) - 1
        rows, cols = user_row[user], item_col[item]
        matrix = sp.csr_matrix(
            (np.ones(len(rows), dtype=np.float32), (rows, cols)),
            shape=(len(user_codes), len(item_codes)),
        )
        matrix.sum_duplicates()
        matrix.data[:] = 1.0
        return cls(matrix=matrix, user_codes=user_codes, item_codes=item_codes, item_sequence=cols)

    @property
    def n_users(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_items(self) -> int:
        return self.matrix.shape[1]

    def rows_of(self, user_codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """Rows of the given global user codes (every code must be a training user)."""
        rows = np.searchsorted(self.user_codes, user_codes)
        if len(rows) and (
            rows.max() >= len(self.user_codes) or (self.user_codes[rows] != user_codes).any()
        ):
            raise ValueError("some users have no training data in this fold")
        return rows.astype(np.int64)


class AlgorithmConfig(BaseModel):
    """Base of every algorithm's hyper-parameters: immutable, no unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Algorithm(ABC):
    """A recommender that can be fitted on one fold and asked for top-k lists.

    Subclasses set ``name`` (the registry key) and ``Config`` (a pydantic model of their
    hyper-parameters), implement :meth:`fit` and :meth:`score`, and keep learned state in
    attributes with a trailing underscore.
    """

    name: ClassVar[str]
    Config: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    #: True when every user gets the same scores (POP, POP-N): ranking is then done once per fold.
    user_independent: ClassVar[bool] = False
    #: True when the model implements :meth:`score_sparse` (scores ≥ 0, most of them 0, as in
    #: kNN): ranking then sorts only the stored scores and fills up with 0-score items by id.
    sparse_scores: ClassVar[bool] = False

    def __init__(self, config: AlgorithmConfig | None = None, **params: Any) -> None:
        if config is not None and params:
            raise TypeError("pass either a config object or keyword parameters, not both")
        self.config = config if config is not None else self.Config(**params)
        self.train_: TrainData | None = None

    @property
    def device(self) -> str:
        """The device the last fit ran on (``cpu`` unless a model says otherwise)."""
        return "cpu"

    @property
    def identifier(self) -> str:
        """``name(param=value, ...)`` from the config."""
        params = ", ".join(f"{k}={v}" for k, v in self.config.model_dump().items())
        return f"{self.name}({params})"

    def fit(self, train: TrainData) -> Self:
        """Fit on one fold's training data."""
        self.train_ = train
        self._fit(train)
        return self

    @abstractmethod
    def _fit(self, train: TrainData) -> None: ...

    @abstractmethod
    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """Dense scores (len(rows) × n_items) for the given training rows; higher is better."""

    def score_sparse(self, rows: NDArray[np.int64]) -> sp.csr_matrix:
        """Scores as a CSR (len(rows) × n_items): stored entries ≥ 0, unstored entries 0.

        Only used when ``sparse_scores`` is True; must agree with :meth:`score`.
        """
        raise NotImplementedError(f"{self.name} has no sparse scores")

    def recommend(self, rows: NDArray[np.int64], k: int) -> NDArray[np.int64]:
        """Top-k columns per row, seen items excluded, SPEC tie-break; -1 pads short lists.

        Scores are computed in blocks of users so that memory stays bounded whatever the
        number of users.
        """
        if self.train_ is None:
            raise RuntimeError(f"{self.name}: call fit() before recommend()")
        train = self.train_
        out = np.full((len(rows), k), -1, dtype=np.int64)
        if len(rows) == 0 or k == 0 or train.n_items == 0:
            return out
        if self.user_independent:
            return top_k_global(self.score(rows[:1])[0], train.matrix, rows, k)
        batch = max(1, SCORE_BLOCK_ELEMENTS // max(train.n_items, 1))
        if self.sparse_scores:
            for lo in range(0, len(rows), batch):
                block_rows = rows[lo : lo + batch]
                scores = self.score_sparse(block_rows)
                out[lo : lo + batch] = top_k_sparse(scores, train.matrix, block_rows, k)
            return out
        for lo in range(0, len(rows), batch):
            block_rows = rows[lo : lo + batch]
            scores = np.array(self.score(block_rows), dtype=np.float64, copy=True)
            exclude_seen(scores, train.matrix, block_rows)
            out[lo : lo + batch] = top_k(scores, k)
        return out


def exclude_seen(
    scores: NDArray[np.float64], matrix: sp.csr_matrix, rows: NDArray[np.int64]
) -> None:
    """Set the scores of each row's training items to -inf, in place."""
    sub = matrix[rows]
    block_row = np.repeat(np.arange(len(rows)), np.diff(sub.indptr))
    scores[block_row, sub.indices] = -np.inf


def top_k(scores: NDArray[np.float64], k: int) -> NDArray[np.int64]:
    """The k best columns of every row: score descending, ties by column ascending.

    Entries equal to -inf (or NaN) are never returned; rows with fewer than k such entries are
    padded with -1. Cost: one ``np.partition`` pass plus a sort of the (usually ~k) entries at
    or above each row's k-th best score, so ties at the cut-off are resolved exactly.

    Args:
        scores: (n, m) scores.
        k: list length.

    Returns:
        (n, k) column indices.
    """
    n, m = scores.shape
    out = np.full((n, k), -1, dtype=np.int64)
    if n == 0 or m == 0 or k == 0:
        return out
    scores = np.where(np.isnan(scores), -np.inf, scores)
    kk = min(k, m)
    threshold = -np.partition(-scores, kk - 1, axis=1)[:, kk - 1]
    keep = (scores >= threshold[:, None]) & np.isfinite(scores)
    row, col = np.nonzero(keep)  # row-major: columns ascending within a row
    order = np.lexsort((col, -scores[row, col], row))
    row, col = row[order], col[order]
    starts = np.searchsorted(row, np.arange(n))
    rank = np.arange(len(row)) - starts[row]
    take = rank < k
    out[row[take], rank[take]] = col[take]
    return out


def top_k_global(
    scores: NDArray[np.float64], matrix: sp.csr_matrix, rows: NDArray[np.int64], k: int
) -> NDArray[np.int64]:
    """Top-k per row when every row shares the same ``scores``, minus each row's seen columns.

    Equivalent to :func:`top_k` on the broadcast scores with seen items set to -inf, but ranks
    the catalogue once: each user's list is the global ranking with their seen items skipped, so
    only the first k + (number of items the user has seen) ranks need looking at.
    """
    n = len(rows)
    out = np.full((n, k), -1, dtype=np.int64)
    ranking = np.lexsort((np.arange(len(scores)), -scores))  # score desc, column asc
    ranking = ranking[np.isfinite(scores[ranking])]
    if n == 0 or len(ranking) == 0:
        return out
    n_seen = np.diff(matrix.indptr)[rows]
    depth = int(min(len(ranking), k + n_seen.max()))
    candidates = np.broadcast_to(ranking[:depth], (n, depth))
    sub = matrix[rows]
    sub.sort_indices()
    # seen[j, r]: candidate r of row j is in row j's training items
    keys = np.repeat(np.arange(n, dtype=np.int64), np.diff(sub.indptr)) * matrix.shape[1]
    keys = keys + sub.indices
    wanted = np.arange(n, dtype=np.int64)[:, None] * matrix.shape[1] + candidates
    pos = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    seen = (keys[pos] == wanted) if len(keys) else np.zeros(wanted.shape, dtype=bool)
    rank = np.cumsum(~seen, axis=1) - 1
    take = (~seen) & (rank < k)
    row_index = np.broadcast_to(np.arange(n)[:, None], (n, depth))
    out[row_index[take], rank[take]] = candidates[take]
    return out


def top_n_mask(
    indptr: NDArray[np.int64], indices: NDArray[np.int32], data: NDArray[np.float64], n: int
) -> NDArray[np.bool_]:
    """Which stored entries of a CSR are among their row's ``n`` largest (ties by column).

    Exact, and without a full multi-key sort: entries of rows longer than ``n`` are sorted by
    (row, float32(value) descending) with one integer argsort; float32 rounding is monotone, so
    entries above the n-th entry's float32 value are in, those below are out, and only the
    entries equal to it are ordered exactly, by (value descending, column ascending).

    Args:
        indptr, indices, data: the CSR arrays (columns need not be sorted within rows).
        n: entries to keep per row (n ≥ 1).

    Returns:
        A boolean mask over the stored entries.
    """
    lengths = np.diff(indptr)
    keep = np.ones(len(data), dtype=bool)
    long_rows = np.flatnonzero(lengths > n)
    if len(long_rows) == 0:
        return keep
    slot = np.full(len(lengths), -1, dtype=np.int64)
    slot[long_rows] = np.arange(len(long_rows))
    entries = np.flatnonzero(np.repeat(slot >= 0, lengths))
    group = np.repeat(slot[long_rows], lengths[long_rows])  # long-row index of each entry
    values = data[entries]
    with np.errstate(over="ignore"):  # beyond float32's range: ±inf, still in order
        rounded = values.astype(np.float32)
    # Float32 bit patterns without the sign bit sort like the floats; flip for descending order.
    signed = np.signbit(rounded).any()
    ranks = _f32_rank(rounded) if signed else rounded.view(np.uint32).astype(np.uint64)
    flipped = np.uint64(0xFFFFFFFF) - ranks
    order = np.argsort((group.astype(np.uint64) << np.uint64(32)) | flipped)
    starts = np.concatenate(([0], np.cumsum(lengths[long_rows])[:-1]))
    threshold = rounded[order[starts + n - 1]][group]
    above = rounded > threshold
    slots = n - np.bincount(group[above], minlength=len(long_rows))
    tied = np.flatnonzero(rounded == threshold)
    tied = tied[np.lexsort((indices[entries[tied]], -values[tied], group[tied]))]
    tied_group = group[tied]
    rank = np.arange(len(tied)) - np.searchsorted(tied_group, tied_group, side="left")
    chosen = above
    chosen[tied[rank < slots[tied_group]]] = True
    keep[entries[~chosen]] = False
    return keep


def _f32_rank(values: NDArray[np.float32]) -> NDArray[np.uint64]:
    """An order-preserving uint64 (< 2³²) of float32 values of any sign."""
    _, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.uint64)


def top_k_sparse(
    scores: sp.csr_matrix, matrix: sp.csr_matrix, rows: NDArray[np.int64], k: int
) -> NDArray[np.int64]:
    """:func:`top_k` for sparse non-negative scores (unstored = 0), seen columns excluded.

    Same result as ``top_k`` on the dense scores with each row's training columns at -inf:
    the positive unseen entries by (score desc, column asc), then the unseen columns scoring 0
    in column order, padded with -1.

    Args:
        scores: (len(rows), n_items) CSR, entries ≥ 0.
        matrix: the training matrix R.
        rows: the training rows the score rows belong to.
        k: list length.
    """
    n, m = scores.shape
    out = np.full((n, k), -1, dtype=np.int64)
    if n == 0 or m == 0 or k == 0:
        return out
    seen = matrix[rows]
    seen_row = np.repeat(np.arange(n, dtype=np.int64), np.diff(seen.indptr))
    seen_keys = np.sort(seen_row * m + seen.indices)
    scores = sp.csr_matrix(scores)
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(scores.indptr))
    col = scores.indices.astype(np.int64)
    value = np.asarray(scores.data, dtype=np.float64)
    keys = row * m + col
    at = np.minimum(np.searchsorted(seen_keys, keys), max(len(seen_keys) - 1, 0))
    is_seen = seen_keys[at] == keys if len(seen_keys) else np.zeros(len(keys), dtype=bool)
    good = ~is_seen & (value > 0)  # NaN or negative noise: score 0 like the unstored rest
    row, col, value = row[good], col[good], value[good]
    indptr = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=n))))
    chosen = top_n_mask(indptr, col, value, k)
    top_row, top_col = row[chosen], col[chosen]
    order = np.lexsort((top_col, -value[chosen], top_row))
    top_row, top_col = top_row[order], top_col[order]
    rank = np.arange(len(top_row)) - np.searchsorted(top_row, top_row, side="left")
    out[top_row, rank] = top_col
    # Fill up with 0-score candidates: the smallest columns neither seen nor positive. With the
    # excluded columns e_0 < e_1 < ... of a row and g_i = e_i - i (non-decreasing), the j-th
    # free column is j + #{i : g_i <= j}.
    n_ranked = np.bincount(top_row, minlength=n)
    need = np.minimum(k - n_ranked, m)  # (j < m keeps each query inside its row's keys)
    if not need.any():
        return out
    short = need > 0
    positive_keys = (row * m + col)[short[row]]
    excluded = np.sort(np.concatenate((seen_keys[short[seen_keys // m]], positive_keys)))
    e_row = excluded // m
    first = np.searchsorted(e_row, np.arange(n), side="left")
    gaps = excluded % m - (np.arange(len(excluded)) - first[e_row])
    gap_keys = e_row * (m + 1) + gaps
    q_row = np.repeat(np.arange(n, dtype=np.int64), need)
    j = np.arange(len(q_row)) - np.repeat(np.cumsum(need) - need, need)
    free = j + np.searchsorted(gap_keys, q_row * (m + 1) + j, side="right") - first[q_row]
    ok = free < m
    out[q_row[ok], (n_ranked[q_row] + j)[ok]] = free[ok]
    return out
