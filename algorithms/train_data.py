"""The data a model sees: one fold's training data in the compact index space.

Timeline of one fold f with cut-off t_f::

    ──────── training D_{t_f}: everything the model sees ────────)[──── test [t_f, t_f+tΔ) ────)
                                                                 t_f = TrainData.cutoff ("now")

A model for fold f is fitted on :class:`TrainData` built from D_{t_f} only: everything in it is
strictly before t_f. TrainData lives in a *compact* index space: rows are the users present in
D_{t_f}, columns the items present in D_{t_f}, both in ascending global-code order (= SPEC
tie-break order). So a model cannot even address an item that first appears at or after t_f,
and "ties by item id ascending" is "ties by column ascending".
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

if TYPE_CHECKING:
    from sweval.algorithms.cooccurrence import Cooccurrence


@dataclass(frozen=True, eq=False)
class TrainData:
    """The training data of one fold, in the compact index space: everything here is strictly
    before the fold's cut-off t_f (``cutoff``).

    Rows are the users with a training transaction, columns the items with one, both in
    ascending global-code order (= the SPEC §3 tie-break order of the raw ids). The
    transaction arrays (``user_sequence``, ``item_sequence``, ``timestamps``) are aligned, one
    entry per training transaction, in time order (ties in time: the log's input row order).
    With ``--dedup none`` repeats of a (user, item) pair stay separate transactions in them
    (their count is the number of entries); ``matrix`` collapses them to 1.

    Window folds train on [t_f − L, t_f) (sliding) or everything before t_f, so
    ``timestamps.max() < cutoff`` by construction. Hold-out protocols (``loocv``,
    ``leave-last-one-out``) train on the whole log minus the held-out transactions: their
    ``cutoff`` is one second after the log's last transaction (``sweval leakage``'s: the end
    of its training period, t_P + (j + 1)·tΔ) and training may hold
    transactions *later* than a user's test instance (the leakage those protocols measure,
    not a guarantee of the time order).

    Attributes:
        matrix: binary CSR R, users × items (float32 ones; repeats collapse to 1).
        user_codes: global user code of each row, ascending.
        item_codes: global item code of each column, ascending.
        item_sequence: column of every training transaction, in time order.
        user_sequence: row of every training transaction, in time order.
        timestamps: int64 epoch seconds (UTC) of every training transaction, non-decreasing
            (a read-only view of the log where the training data is a slice of it).
        cutoff: t_f, "now" for this fold, epoch seconds: every timestamp is < cutoff.
        raw_user_ids, raw_item_ids: the raw id of every *global* code (the log's own arrays,
            shared, not copied), or None when the data was built from codes alone; use
            :attr:`user_ids` / :attr:`item_ids` for the ids of rows and columns.
        cooccurrence: RᵀR off the diagonal and the users per item, in *global* item codes,
            when the data was advanced from the previous fold's with co-occurrences carried
            (:mod:`evaluators.protocols.training_state`); None otherwise. A cache, never a different
            number: it equals what ``matrix`` gives (item-kNN reads its rows instead of
            walking the users' items).
        item_counts: training transactions per column, when whoever built the data had
            them counted (:meth:`from_codes`, and the folds advanced from the previous fold's
            counts); None otherwise. A cache: read it through :meth:`transactions_per_item`.
    """

    matrix: sp.csr_matrix
    user_codes: NDArray[np.int64]
    item_codes: NDArray[np.int64]
    item_sequence: NDArray[np.int64]
    user_sequence: NDArray[np.int64]
    timestamps: NDArray[np.int64]
    cutoff: int
    raw_user_ids: NDArray[np.generic] | None = None
    raw_item_ids: NDArray[np.generic] | None = None
    cooccurrence: Cooccurrence | None = None
    item_counts: NDArray[np.int64] | None = None

    @classmethod
    def from_codes(
        cls,
        user: NDArray[np.int64],
        item: NDArray[np.int64],
        *,
        n_users: int,
        n_items: int,
        timestamps: NDArray[np.int64],
        cutoff: int,
        pairs: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None,
        raw_user_ids: NDArray[np.generic] | None = None,
        raw_item_ids: NDArray[np.generic] | None = None,
    ) -> TrainData:
        """Build from the time-ordered global codes of the training transactions.

        The CSR is assembled directly from the transactions in (user, item) order: rows are
        then contiguous, columns ascending within a row, and repeats of a pair adjacent, so
        one comparison with the neighbour drops them (no COO conversion, no sort per fold).
        The sequences are gathers through the code → row / column maps, O(n).

        Args:
            user, item: global codes, one per transaction, time-ordered.
            n_users, n_items: sizes of the global code spaces.
            timestamps: epoch seconds of the same transactions, non-decreasing; kept as given
                (pass a view of the log's array: no copy is made).
            cutoff: t_f; every timestamp must be below it.
            pairs: the same transactions' (user, item) codes sorted by (user, item), if the
                caller has them (a fold filters them from the log's
                :meth:`data.log.InteractionLog.user_major`); sorted here otherwise.
            raw_user_ids, raw_item_ids: raw id per global code (the log's ``user_ids`` /
                ``item_ids``), or None.

        Raises:
            ValueError: the arrays differ in length, or a timestamp is at or after ``cutoff``.
        """
        if not len(user) == len(item) == len(timestamps):
            raise ValueError("user, item and timestamps must have one entry per transaction")
        if len(timestamps) and int(timestamps[-1]) >= cutoff:
            raise ValueError(
                f"a training timestamp ({int(timestamps[-1])}) is at or after the cut-off "
                f"{cutoff}"
            )
        if pairs is None:
            order = np.argsort(user * np.int64(n_items) + item, kind="stable")
            pairs = (user[order], item[order])
        pair_user, pair_item = pairs
        if len(pair_user) > 1:  # repeats of a pair are adjacent: keep the first
            first = np.empty(len(pair_user), dtype=bool)
            first[0] = True
            np.not_equal(pair_item[1:], pair_item[:-1], out=first[1:])
            first[1:] |= pair_user[1:] != pair_user[:-1]
            if not first.all():
                pair_user, pair_item = pair_user[first], pair_item[first]
        pairs_per_user = np.bincount(pair_user, minlength=n_users)
        user_present = pairs_per_user > 0
        per_item = np.bincount(item, minlength=n_items)
        item_present = per_item > 0
        user_codes = np.flatnonzero(user_present).astype(np.int64)
        item_codes = np.flatnonzero(item_present).astype(np.int64)
        user_row = np.cumsum(user_present, dtype=np.int64) - 1
        item_col = np.cumsum(item_present, dtype=np.int64) - 1
        index_type = np.int32 if max(len(pair_item), len(item_codes)) < 2**31 else np.int64
        indptr = np.zeros(len(user_codes) + 1, dtype=index_type)
        np.cumsum(pairs_per_user[user_present], out=indptr[1:])
        matrix = sp.csr_matrix(
            (np.ones(len(pair_item), dtype=np.float32), item_col.astype(index_type)[pair_item],
             indptr),
            shape=(len(user_codes), len(item_codes)),
        )  # fmt: skip
        matrix.has_sorted_indices = True
        return cls(
            matrix=matrix, user_codes=user_codes, item_codes=item_codes,
            item_sequence=item_col[item], user_sequence=user_row[user],
            timestamps=timestamps, cutoff=int(cutoff),
            raw_user_ids=raw_user_ids, raw_item_ids=raw_item_ids,
            item_counts=per_item[item_codes],
        )  # fmt: skip

    @cached_property
    def user_ids(self) -> NDArray[np.generic]:
        """Raw user id of every row (the global codes when no raw ids were given)."""
        return self.user_codes if self.raw_user_ids is None else self.raw_user_ids[self.user_codes]

    @cached_property
    def item_ids(self) -> NDArray[np.generic]:
        """Raw item id of every column (the global codes when no raw ids were given)."""
        return self.item_codes if self.raw_item_ids is None else self.raw_item_ids[self.item_codes]

    @property
    def n_users(self) -> int:
        return self.matrix.shape[0]

    @property
    def n_items(self) -> int:
        return self.matrix.shape[1]

    def transactions_per_item(self) -> NDArray[np.int64]:
        """Training transactions of each column, ``bincount(item_sequence)`` (repeats of a pair
        count with ``--dedup none``): :attr:`item_counts` when carried, else counted now."""
        if self.item_counts is not None:
            return self.item_counts
        return np.bincount(self.item_sequence, minlength=self.n_items)

    def read_only(self) -> TrainData:
        """This data as read-only views, with a matrix object of its own: what an algorithm that
        is not SW-EVAL's own (a plugin) is given. A fold's data is shared by every algorithm of
        the fold (and advanced into the next fold's), so a write into it would change the others'
        numbers and the units stored from them; here it raises ``ValueError: assignment
        destination is read-only`` and fails the writer's unit alone. Nothing is copied."""
        arrays = {f.name: _read_only(getattr(self, f.name)) for f in fields(self)
                  if isinstance(getattr(self, f.name), np.ndarray)}
        matrix = sp.csr_matrix(
            (_read_only(self.matrix.data), _read_only(self.matrix.indices),
             _read_only(self.matrix.indptr)), shape=self.matrix.shape, copy=False,
        )
        cooccurrence = self.cooccurrence
        if cooccurrence is not None:
            cooccurrence = replace(cooccurrence, **{
                f.name: _read_only(getattr(cooccurrence, f.name)) for f in fields(cooccurrence)})
        return replace(self, matrix=matrix, cooccurrence=cooccurrence, **arrays)

    def rows_of(self, user_codes: NDArray[np.int64]) -> NDArray[np.int64]:
        """Rows of the given global user codes (every code must be a training user)."""
        rows = np.searchsorted(self.user_codes, user_codes)
        if len(rows) and (
            rows.max() >= len(self.user_codes) or (self.user_codes[rows] != user_codes).any()
        ):
            raise ValueError("some users have no training data in this fold")
        return rows.astype(np.int64)


def _read_only(array: NDArray[Any]) -> NDArray[Any]:
    """A view of ``array`` that cannot be written (the array itself stays writable)."""
    view = array.view()
    view.flags.writeable = False
    return view
