"""Strata derived from the users themselves at each fold's cut-off (docs/protocol.md §6b).

Unlike the policy strata (:mod:`evaluators.protocols.stratify`) nothing here is a column of the
log: a user's stratum is computed from the transactions *before* t_f alone (log positions
[train_lo, train_hi), the data the fold's models are fitted on), so it never reads the window
it is evaluated on::

    --stratify-by user-history   n_u = u's training transactions at t_f (repeats count with
                                 --dedup none); --user-bins e_1,e_2,...,e_m (ascending, ≥ 1;
                                 1 is always the first edge) make the bins
                                 [1, e_2), [e_2, e_3), ..., [e_m, ∞), labelled "1-4", "5-19", "20+"
    --stratify-by returning      returning: the eligible users (history before t_f);
                                 first-time: the window's users without any (cold users)

Every eligible user has n_u ≥ 1, so the history bins partition U_f; ``first-time`` is the
window's other users (U_f's complement among the window's users), evaluated only with
``--cold-users`` (:func:`~evaluators.protocols.splits.cold_split`). The strata regroup the ``all`` units' users, as the
policy strata of mode ``test`` do: no unit is computed for them, u_min applies per group.

For a hold-out split (``sweval compare``'s LOOCV, ...) n_u counts u's transactions in the
split's training data, which those protocols draw from the whole log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import Fold
from sweval.evaluators.protocols.splits import cold_users  # noqa: F401  (re-exported)

#: The ``--stratify-by`` values that name a derived stratification, not a column.
USER_HISTORY = "user-history"
RETURNING = "returning"
DERIVED = (USER_HISTORY, RETURNING)
#: The stratum of users without history before t_f (cold users).
FIRST_TIME = "first-time"
#: The stratum of users with history (``--stratify-by returning``).
RETURNING_LABEL = "returning"
#: ``--user-bins``' default: 1-4, 5-19 and 20+ training transactions.
DEFAULT_BINS = (1, 5, 20)


def history_edges(bins: list[int] | tuple[int, ...]) -> list[int]:
    """The bins' lower edges, 1 first: ``[5, 20]`` and ``[1, 5, 20]`` are both ``[1, 5, 20]``.

    Raises:
        SwevalError: an edge below 1, or edges not strictly ascending.
    """
    edges = [int(edge) for edge in bins]
    if any(edge < 1 for edge in edges):
        raise SwevalError(
            f"--user-bins {','.join(map(str, edges))}: every edge is a number of training "
            "transactions ≥ 1 (users without any are the first-time stratum, --cold-users)."
        )
    if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise SwevalError(
            f"--user-bins {','.join(map(str, edges))}: the edges must be strictly ascending "
            "(e.g. 1,5,20)."
        )
    return edges if edges and edges[0] == 1 else [1, *edges]


def bin_labels(edges: list[int]) -> list[str]:
    """``[1, 5, 20]`` → ``["1-4", "5-19", "20+"]`` (a bin of one count is that count)."""
    labels = []
    for lower, upper in zip(edges, [*edges[1:], None], strict=True):
        if upper is None:
            labels.append(f"{lower}+")
        elif upper - 1 == lower:
            labels.append(str(lower))
        else:
            labels.append(f"{lower}-{upper - 1}")
    return labels


def history_counts(log: InteractionLog, fold: Fold, users: NDArray[np.int64]) -> NDArray[np.int64]:
    """n_u of ``users`` at fold ``fold``'s cut-off: their transactions at log positions
    [train_lo, train_hi), i.e. strictly before t_f (in the sliding training window, with one)."""
    if len(users) == 0:
        return np.zeros(0, dtype=np.int64)
    training = log.user[fold.train_lo : fold.train_hi]
    return np.bincount(training, minlength=log.n_users).astype(np.int64)[users]


def split_history(split: object, users: NDArray[np.int64]) -> NDArray[np.int64]:
    """n_u of ``users`` in a split's training data: the fold's positions before t_f for a window
    split, the hold-out split's training transactions otherwise."""
    fold = getattr(split, "fold", None)
    if fold is not None:
        return history_counts(split.log, fold, users)  # type: ignore[attr-defined]
    train = split.train  # type: ignore[attr-defined]
    per_row = np.bincount(train.user_sequence, minlength=train.n_users).astype(np.int64)
    rows = np.searchsorted(train.user_codes, users)
    rows = np.minimum(rows, max(len(train.user_codes) - 1, 0))
    known = (train.user_codes[rows] == users) if len(train.user_codes) else rows < 0
    return np.where(known, per_row[rows] if len(per_row) else 0, 0).astype(np.int64)


@dataclass(frozen=True)
class UserStrata:
    """A derived stratification of one run.

    Attributes:
        kind: ``user-history`` or ``returning``.
        edges: the history bins' lower edges (``user-history``).
        labels: the strata of the evaluated (eligible) users, in order.
    """

    kind: str
    edges: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, kind: str, bins: list[int] | tuple[int, ...] = DEFAULT_BINS) -> UserStrata:
        """The strata of ``--stratify-by kind`` with ``--user-bins bins``.

        Raises:
            SwevalError: an unknown kind or bad bins.
        """
        if kind == USER_HISTORY:
            edges = history_edges(bins)
            return cls(kind=kind, edges=edges, labels=bin_labels(edges))
        if kind == RETURNING:
            return cls(kind=kind, labels=[RETURNING_LABEL])
        raise SwevalError(f"--stratify-by {kind!r} is not a derived stratification "
                          f"({', '.join(DERIVED)}).")

    def groups_of(self, history: NDArray[np.int64]) -> dict[str, NDArray[np.bool_]]:
        """``{label: mask}`` over users with training-transaction counts ``history`` (each ≥ 1:
        every user lands in exactly one group)."""
        if self.kind == RETURNING:
            return {RETURNING_LABEL: history >= 1}
        bin_of = np.searchsorted(np.asarray(self.edges), history, side="right") - 1
        return {label: bin_of == b for b, label in enumerate(self.labels)}

    def groups(self, split: object, users: NDArray[np.int64]) -> dict[str, NDArray[np.bool_]]:
        """``{label: mask over users}`` for the evaluated ``users`` of a split (or fold-like
        split of a run), from their history before its cut-off."""
        return self.groups_of(split_history(split, users))
