"""Incremental folds: each fold's training data advanced from the previous fold's by the window
in between, instead of rebuilt from the whole log.

With an expanding training window, D_{t_{f+1}} is D_{t_f} plus the transactions of
[t_f, t_{f+1}). :class:`TrainingState` carries what fold f's :class:`TrainData` was made of
(its CSR in the compact index space, which users and items are present, the transactions per
item) and :meth:`TrainingState.advance` moves it to a later cut-off::

    log positions  0 ................................ hi ............ hi'
                   [──── state: D_{t_f} (CSR, maps) ────)[── window ──)
                   advance(hi'):  sort the window's pairs (O(w log w)), update the counts,
                                  merge them into the CSR rows (one pass), build the maps

The result is *exactly* what :meth:`evaluators.protocols.folds.Fold.train_data` builds from scratch: the
same CSR arrays (data, indices, indptr, dtypes), the same row and column codes, sequences,
timestamps (a view of the log) and cut-off; tests/evaluators/test_training_state.py checks both
paths against each other on random logs. So a unit's key does not say which path built its data.

With ``cooccurrence`` (a run with item-kNN) the state also carries the item co-occurrence
counts C = RᵀR and the users per item (:class:`algorithms.cooccurrence.Cooccurrence`, global
item codes), exposed as :attr:`TrainData.cooccurrence`::

    fold 0 (first advance):   C counted from the fold's CSR (each item's users' items)
    fold f → f+1:             C' = C + Σ_u (N_u × O_u + O_u × N_u + N_u × N_u − diag),
                              O_u / N_u = u's old items / its window items not among them

so a fold's update costs its window's increments (and a merge of C's recent part), not the
history. Item-kNN reads C's rows instead of walking the users' items, with the same floats.
C is dropped for good (item-kNN walks again, same numbers) once it would take more than
:data:`COOCCURRENCE_BUDGET_BYTES`. Folds built from scratch never carry it.

What a fold still costs, measured in benchmarks/folds_series.py: the window's pairs, one pass
over the CSR's indices (a new array per fold: the new pairs go into the middle of the rows, and
a new item with a lower id than an old one renumbers the columns after it), O(users + items)
for the maps and ``indptr``, and the two sequences (appended when no new user or item
renumbers the old ones, else gathered again through the new maps: O(n_train), a plain gather).
From scratch a fold also masks the whole log's user-major order and counts users and items over
the whole training set.

:class:`IncrementalTraining` is what the splits use (:func:`evaluators.protocols.splits.fold_splits`): one
per log, thread-safe; a fold at or after the state's cut-off is advanced to, an earlier one (a
Dask worker or thread taking folds out of order) is built from scratch without touching the
state. Sliding training windows (``--train-window``) drop old transactions as well as add new
ones and are always built from scratch. ``--no-incremental`` builds every fold from scratch.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit
from numpy.typing import NDArray

from sweval.algorithms.cooccurrence import Cooccurrence
from sweval.algorithms.train_data import TrainData
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import Fold

_log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class TrainingState:
    """The expanding-window training data of the log positions [0, hi), kept for the next fold.

    Attributes:
        log: the log.
        hi: number of log positions (transactions) in the training data.
        user_present: per global user code, whether the user has a training transaction.
        item_transactions: per global item code, its number of training transactions (an
            item is present when it is > 0).
        data: the last :class:`TrainData` built (its CSR, codes and sequences are the state;
            its timestamps are a view of the log).
        carry_cooccurrence: whether C = RᵀR is carried (``data.cooccurrence``); it is
            dropped for good once it would exceed :data:`COOCCURRENCE_BUDGET_BYTES`.
    """

    log: InteractionLog
    hi: int
    user_present: NDArray[np.bool_]
    item_transactions: NDArray[np.int64]
    data: TrainData | None
    carry_cooccurrence: bool = False

    @classmethod
    def empty(cls, log: InteractionLog, *, cooccurrence: bool = False) -> TrainingState:
        """The state before any transaction (carrying C when ``cooccurrence``)."""
        return cls(log=log, hi=0, user_present=np.zeros(log.n_users, dtype=bool),
                   item_transactions=np.zeros(log.n_items, dtype=np.int64), data=None,
                   carry_cooccurrence=cooccurrence)

    def advance(self, hi: int, cutoff: int) -> TrainingState:
        """The state of the positions [0, hi) (hi ≥ self.hi), its data cut off at ``cutoff``.

        Raises:
            ValueError: ``hi`` is before the state's end, or a training timestamp is at or
                after ``cutoff``.
        """
        log = self.log
        if hi < self.hi:
            raise ValueError(f"cannot advance a training state at {self.hi} back to {hi}")
        timestamps = log.timestamp[:hi]
        if hi and int(timestamps[-1]) >= cutoff:
            raise ValueError(
                f"a training timestamp ({int(timestamps[-1])}) is at or after the cut-off "
                f"{cutoff}"
            )
        window_user, window_item = log.user[self.hi : hi], log.item[self.hi : hi]
        n_items = log.n_items
        # the window's distinct pairs, sorted by (user, item)
        keys = np.sort(window_user * np.int64(max(n_items, 1)) + window_item)
        if len(keys) > 1:  # np.unique hashes: slower than sorting on large windows
            distinct = np.empty(len(keys), dtype=bool)
            distinct[0] = True
            np.not_equal(keys[1:], keys[:-1], out=distinct[1:])
            keys = keys[distinct]
        pair_user, pair_item = np.divmod(keys, np.int64(max(n_items, 1)))
        # the new counts and maps (O(users + items))
        user_present = self.user_present.copy()
        user_present[pair_user] = True
        item_transactions = self.item_transactions + np.bincount(window_item, minlength=n_items)
        item_present = item_transactions > 0
        user_codes = np.flatnonzero(user_present).astype(np.int64)
        item_codes = np.flatnonzero(item_present).astype(np.int64)
        user_row = np.cumsum(user_present, dtype=np.int64) - 1
        item_col = np.cumsum(item_present, dtype=np.int64) - 1
        # the CSR: the old rows (columns renumbered) merged with the window's pairs
        old = self.data
        old_indptr = old.matrix.indptr if old is not None else np.zeros(1, dtype=np.int32)
        old_indices = old.matrix.indices if old is not None else np.zeros(0, dtype=np.int32)
        old_user_codes = old.user_codes if old is not None else np.zeros(0, dtype=np.int64)
        old_item_codes = old.item_codes if old is not None else np.zeros(0, dtype=np.int64)
        old_row_of = np.full(len(user_codes), -1, dtype=np.int64)
        old_row_of[user_row[old_user_codes]] = np.arange(len(old_user_codes), dtype=np.int64)
        bound = len(old_indices) + len(keys)
        index_type = np.int32 if max(bound, len(item_codes)) < 2**31 else np.int64
        indices = np.empty(bound, dtype=index_type)
        indptr = np.empty(len(user_codes) + 1, dtype=index_type)
        nnz = _merge_rows(
            old_indptr, old_indices, item_col[old_item_codes], old_row_of,
            user_row[pair_user], item_col[pair_item], indices, indptr,
        )  # fmt: skip
        if nnz < bound:  # repeats of old pairs (--dedup none) were merged
            index_type = np.int32 if max(nnz, len(item_codes)) < 2**31 else np.int64
            indices, indptr = indices[:nnz].astype(index_type), indptr.astype(index_type)
        matrix = sp.csr_matrix(
            (np.ones(nnz, dtype=np.float32), indices, indptr),
            shape=(len(user_codes), len(item_codes)),
        )
        matrix.has_sorted_indices = True
        # the sequences: appended while the old rows and columns keep their numbers
        item_sequence = _sequence(
            old.item_sequence if old is not None else None, old_item_codes, item_codes, item_col,
            log.item, self.hi, hi,
        )  # fmt: skip
        user_sequence = _sequence(
            old.user_sequence if old is not None else None, old_user_codes, user_codes, user_row,
            log.user, self.hi, hi,
        )  # fmt: skip
        cooccurrence = None
        if self.carry_cooccurrence:
            cooccurrence = _advance_cooccurrence(old, matrix, item_codes, n_items, pair_user,
                                                 pair_item)
        data = TrainData(
            matrix=matrix, user_codes=user_codes, item_codes=item_codes,
            item_sequence=item_sequence, user_sequence=user_sequence,
            timestamps=timestamps, cutoff=int(cutoff),
            raw_user_ids=log.user_ids, raw_item_ids=log.item_ids, cooccurrence=cooccurrence,
            item_counts=item_transactions[item_codes],
        )  # fmt: skip
        return TrainingState(log=log, hi=hi, user_present=user_present,
                             item_transactions=item_transactions, data=data,
                             carry_cooccurrence=cooccurrence is not None)


#: The most memory C = RᵀR may take (about 8 bytes per stored entry); beyond it the state
#: stops carrying C and item-kNN walks the users' items again (same numbers, slower).
COOCCURRENCE_BUDGET_BYTES = 1 << 30


def _advance_cooccurrence(
    old: TrainData | None,
    matrix: sp.csr_matrix,
    item_codes: NDArray[np.int64],
    n_items: int,
    pair_user: NDArray[np.int64],
    pair_item: NDArray[np.int64],
) -> Cooccurrence | None:
    """C of the new training data: counted from ``matrix`` on the first fold, else the old C
    plus the window's pairs; None when it would not fit :data:`COOCCURRENCE_BUDGET_BYTES`."""
    if old is None or old.cooccurrence is None:
        lengths = np.diff(matrix.indptr).astype(np.int64)
        bound = 8 * int((lengths * (lengths - 1)).sum())  # bytes, bound on C's entries
        if bound > COOCCURRENCE_BUDGET_BYTES:
            return _over_budget(bound)
        return Cooccurrence.from_matrix(matrix, item_codes, n_items)
    cooccurrence = old.cooccurrence.advanced(old.matrix, old.user_codes, old.item_codes,
                                             pair_user, pair_item)
    if cooccurrence.nbytes > COOCCURRENCE_BUDGET_BYTES:
        return _over_budget(cooccurrence.nbytes)
    return cooccurrence


def _over_budget(nbytes: int) -> None:
    """Say once per state that C is no longer carried (it would take ``nbytes``)."""
    _log.info(
        "item co-occurrences would take %.2f GB (budget %.2f GB): item-kNN counts them per "
        "fold from here on (same numbers, slower)", nbytes / 1e9, COOCCURRENCE_BUDGET_BYTES / 1e9,
    )


def _sequence(
    old: NDArray[np.int64] | None,
    old_codes: NDArray[np.int64],
    codes: NDArray[np.int64],
    index_of: NDArray[np.int64],
    log_codes: NDArray[np.int64],
    lo: int,
    hi: int,
) -> NDArray[np.int64]:
    """Row or column of every transaction of [0, hi): the old sequence with the window's
    appended when the old codes keep their numbers (every new code comes after them), else all
    of them gathered through the new map."""
    kept = old is not None and (
        len(old_codes) == 0 or len(codes) == len(old_codes) or codes[len(old_codes) - 1] ==
        old_codes[-1]
    )
    if kept:
        assert old is not None
        return np.concatenate([old, index_of[log_codes[lo:hi]]])
    return index_of[log_codes[:hi]]


@njit(cache=True, nogil=True)
def _merge_rows(old_indptr, old_indices, old_to_new, old_row_of, pair_row, pair_col, out, indptr):
    """Merge the old CSR rows with the new pairs into ``out``/``indptr``; returns the nnz.

    Row r of the result is old row ``old_row_of[r]`` (-1: a new user), its columns renumbered
    by ``old_to_new`` (increasing, so a row stays sorted), merged with the pairs of row r
    (``pair_row``/``pair_col``, sorted by row then column, distinct); a pair already in the old
    row is kept once. Rows without new pairs (most of them) are copied in one loop.
    """
    n_pairs = len(pair_row)
    same = True  # the old columns keep their numbers
    for c in range(len(old_to_new)):
        if old_to_new[c] != c:
            same = False
            break
    j = 0
    nnz = 0
    indptr[0] = 0
    for r in range(len(indptr) - 1):
        old_row = old_row_of[r]
        a = 0
        b = 0
        if old_row >= 0:
            a = old_indptr[old_row]
            b = old_indptr[old_row + 1]
        if j >= n_pairs or pair_row[j] != r:  # an untouched row
            if same:
                out[nnz : nnz + b - a] = old_indices[a:b]
                nnz += b - a
            else:
                for k in range(a, b):
                    out[nnz] = old_to_new[old_indices[k]]
                    nnz += 1
            indptr[r + 1] = nnz
            continue
        while a < b or (j < n_pairs and pair_row[j] == r):
            if j < n_pairs and pair_row[j] == r:
                new_col = pair_col[j]
                if a < b:
                    old_col = old_to_new[old_indices[a]]
                    if old_col <= new_col:
                        out[nnz] = old_col
                        a += 1
                        if old_col == new_col:
                            j += 1
                    else:
                        out[nnz] = new_col
                        j += 1
                else:
                    out[nnz] = new_col
                    j += 1
            else:
                out[nnz] = old_to_new[old_indices[a]]
                a += 1
            nnz += 1
        indptr[r + 1] = nnz
    return nnz


class IncrementalTraining:
    """The training data of one log's folds, advanced from fold to fold when they come in
    order (expanding windows), from scratch otherwise (see the module docstring).

    Thread-safe: one fold's data is built at a time; threads asking for earlier folds than the
    state's build theirs from scratch, outside the lock. Pickles without its state. With
    ``cooccurrence`` the advanced folds carry C = RᵀR too (see the module docstring); each
    fold's C is an immutable snapshot, valid while later folds advance.
    """

    def __init__(self, log: InteractionLog, *, cooccurrence: bool = False) -> None:
        self.log = log
        self.cooccurrence = cooccurrence
        self._lock = threading.Lock()
        self._state: TrainingState | None = None

    def train_data(self, fold: Fold) -> TrainData:
        """Fold ``fold``'s training data, as :meth:`Fold.train_data` builds it."""
        if fold.train_lo != 0:  # a sliding training window
            return fold.train_data(self.log)
        with self._lock:
            state = self._state
            if state is None:
                state = TrainingState.empty(self.log, cooccurrence=self.cooccurrence)
            if state.hi <= fold.train_hi:
                self._state = state.advance(fold.train_hi, fold.t_start)
                assert self._state.data is not None
                return self._state.data
        return fold.train_data(self.log)

    def release(self) -> None:
        """Forget the state (its memory is one fold's training data)."""
        with self._lock:
            self._state = None

    def __getstate__(self) -> dict[str, Any]:
        return {"log": self.log, "cooccurrence": self.cooccurrence}

    def __setstate__(self, state: dict[str, Any]) -> None:
        cooccurrence = state.get("cooccurrence", False)
        self.__init__(state["log"], cooccurrence=cooccurrence)  # type: ignore[misc]
