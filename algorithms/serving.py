"""What a model fitted at t_f is given when it serves a later window (``--horizon``, ``--cadence``).

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
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from sweval.algorithms.base import TrainData


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
