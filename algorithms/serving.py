"""What a fitted model is given after its fit: a later history to serve (``--horizon``,
``--cadence``), or the interactions since its fit to update on (``--update``).

A model fitted on D_{t_f} keeps its fitted parameters; what it scores a user from, and what it
excludes as already seen, is the user's history *as of the served window*, as a live system that
retrains now and then still reads each user's latest history when it recommends::

    ──── D_{t_f}: the fit ────)[ window f ) … [ window f+h−1 )[── served window f+h ──)
    t_f                                                       t_{f+h}
    history = the served fold's training data (every transaction before t_{f+h}, or
              [t_{f+h} − L, t_{f+h}) with --train-window L), restricted to the items the model
              was fitted on: items first seen at or after t_f are neither candidates nor in a
              user's row (the model cannot address them)

The history's rows are every user of the served fold's training data (ascending codes, as in any
:class:`~algorithms.base.TrainData`), so every eligible user of the served window U_{f+h} has a
row; one whose history lies only in items unknown to the model has an empty row. Its columns are
the fit's columns, the same order: the model's item-side parameters index them unchanged.

An update (:meth:`~algorithms.base.Algorithm.update`) hands a model only the transactions since
its last fit or update, a :class:`Delta`; the model's training data then becomes
:func:`extended` (the previous data plus the delta: exactly the later fold's training data, for
expanding training windows), which the engine ranks from, as after a fit::

    ──── D_{t_f}: the fit ────)[──── delta: t_f ≤ t < t_{f+1} ────)[── served window f+1 ──)
                      since = t_f                          cutoff = t_{f+1}
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sweval.algorithms.train_data import TrainData


def serving_history(fit_items: NDArray[np.int64], later: TrainData) -> TrainData:
    """``later`` (a later fold's training data) in the columns ``fit_items`` (the global item
    codes a model was fitted on, ascending): its transactions on other items dropped, its rows
    kept (see the module docstring).

    Args:
        fit_items: the fitted model's column codes (``train.item_codes`` of its fit).
        later: the served fold's training data (nothing at or after its cut-off).
    """
    fit_items = np.asarray(fit_items, dtype=np.int64)
    position = np.searchsorted(fit_items, later.item_codes)
    inside = position < len(fit_items)
    known = np.zeros(len(later.item_codes), dtype=bool)
    known[inside] = fit_items[position[inside]] == later.item_codes[inside]
    column = np.where(known, position, -1).astype(np.int64)  # later column → fit column
    matrix = later.matrix
    mapped = column[matrix.indices]
    kept = mapped >= 0
    running = np.concatenate(([0], np.cumsum(kept, dtype=np.int64)))
    indptr = running[matrix.indptr].astype(matrix.indptr.dtype)  # kept entries before each row
    history = sp.csr_matrix(
        (matrix.data[kept], mapped[kept].astype(matrix.indices.dtype), indptr),
        shape=(matrix.shape[0], len(fit_items)),
    )
    history.has_sorted_indices = True  # the map keeps the columns' order
    transactions = column[later.item_sequence] >= 0
    item_sequence = column[later.item_sequence][transactions]
    return TrainData(
        matrix=history,
        user_codes=later.user_codes,
        item_codes=fit_items,
        item_sequence=item_sequence,
        user_sequence=later.user_sequence[transactions],
        timestamps=later.timestamps[transactions],
        cutoff=later.cutoff,
        raw_user_ids=later.raw_user_ids,
        raw_item_ids=later.raw_item_ids,
        item_counts=np.bincount(item_sequence, minlength=len(fit_items)).astype(np.int64),
    )


@dataclass(frozen=True)
class Delta:
    """The transactions since a model's last fit or update (global codes, time order).

    Attributes:
        users, items: global user and item codes of each transaction.
        timestamps: their epoch seconds, non-decreasing, each in [since, cutoff).
        since: the model's previous cut-off (its data's ``cutoff``).
        cutoff: the new "now": the start of the window the updated model serves.
        n_users, n_items: the sizes of the log's global code spaces.
    """

    users: NDArray[np.int64]
    items: NDArray[np.int64]
    timestamps: NDArray[np.int64]
    since: int
    cutoff: int
    n_users: int
    n_items: int

    def __post_init__(self) -> None:
        if not len(self.users) == len(self.items) == len(self.timestamps):
            raise ValueError("a delta has one user, item and timestamp per transaction")
        if len(self.timestamps) and (int(self.timestamps.min()) < self.since
                                     or int(self.timestamps.max()) >= self.cutoff):
            raise ValueError(f"a delta's transactions lie in [{self.since}, {self.cutoff})")

    def __len__(self) -> int:
        return len(self.users)

    @classmethod
    def between(cls, later: TrainData, since: int, *, n_users: int, n_items: int) -> Delta:
        """The transactions of ``later`` (a later fold's training data) at or after ``since``."""
        start = int(np.searchsorted(later.timestamps, since, side="left"))
        return cls(users=later.user_codes[later.user_sequence[start:]],
                   items=later.item_codes[later.item_sequence[start:]],
                   timestamps=np.asarray(later.timestamps[start:]), since=int(since),
                   cutoff=later.cutoff, n_users=n_users, n_items=n_items)

    def pairs(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The distinct (user, item) pairs, sorted by (user, item)."""
        keys = np.unique(self.users * np.int64(max(self.n_items, 1)) + self.items)
        return keys // max(self.n_items, 1), keys % max(self.n_items, 1)


def extended(previous: TrainData, delta: Delta) -> TrainData:
    """``previous`` plus ``delta``'s transactions, cut off at ``delta.cutoff``: the training
    data of the later cut-off (expanding window), built as a fold's is
    (:meth:`TrainData.from_codes`).

    Raises:
        ValueError: the delta does not start at ``previous``'s cut-off.
    """
    if delta.since != previous.cutoff:
        raise ValueError(f"the delta starts at {delta.since}, the data ends at {previous.cutoff}")
    return TrainData.from_codes(
        np.concatenate([previous.user_codes[previous.user_sequence], delta.users]),
        np.concatenate([previous.item_codes[previous.item_sequence], delta.items]),
        n_users=delta.n_users, n_items=delta.n_items,
        timestamps=np.concatenate([previous.timestamps, delta.timestamps]),
        cutoff=delta.cutoff, raw_user_ids=previous.raw_user_ids,
        raw_item_ids=previous.raw_item_ids,
    )


def columns_of(codes: NDArray[np.int64], item_codes: NDArray[np.int64]) -> NDArray[np.int64]:
    """The columns of global item ``codes`` among ``item_codes`` (every code must be there)."""
    return np.searchsorted(item_codes, codes).astype(np.int64)
