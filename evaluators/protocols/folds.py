"""Folds: the training prefix, the test window and the eligible users of every window (SPEC §2).

A :class:`Fold` stores *positions* into the time-sorted log, never copies::

    log positions  0 ........ train_lo ......... train_hi=test_lo ........ test_hi ........ N
    timestamps              t_f - L (sliding)         t_f                     t_f + tΔ
                            [──────── training ────────)[──────── test ────────)

Eligible users U_f have at least one training and at least one test transaction. A fold with
|U_f| < u_min is kept, marked skipped with its reason, and never averaged; so is a fold with no
eligible user at all, even with u_min = 0 (its mean would be over nobody).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sweval.algorithms.train_data import TrainData
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.data.timestamps import iso_utc
from sweval.evaluators.protocols.windows import WindowSpec

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Fold:
    """One window of the evaluation.

    Attributes:
        index: f, 0-based.
        t_start, t_end: the test window [t_start, t_end), epoch seconds.
        train_lo, train_hi: log positions of the training transactions.
        test_lo, test_hi: log positions of the test transactions.
        eligible_users: global codes of U_f, ascending.
        n_test_users: distinct users with a test transaction (eligible or not).
        skip_reason: why the fold is skipped, or None.
        train_start: the start of a sliding training window, t_f − L, or None (all history).
    """

    index: int
    t_start: int
    t_end: int
    train_lo: int
    train_hi: int
    test_lo: int
    test_hi: int
    eligible_users: NDArray[np.int64]
    n_test_users: int
    skip_reason: str | None = None
    train_start: int | None = None

    @property
    def n_train(self) -> int:
        return self.train_hi - self.train_lo

    @property
    def n_test(self) -> int:
        return self.test_hi - self.test_lo

    @property
    def n_eligible(self) -> int:
        return len(self.eligible_users)

    @property
    def skipped(self) -> bool:
        return self.skip_reason is not None

    def train_data(self, log: InteractionLog) -> TrainData:
        """The fold's training data D_{t_f} in compact form, cut off at t_f = ``t_start``.

        Training is the log slice [train_lo, train_hi): timestamps in [train_start, t_f) for a
        sliding window, < t_f otherwise; its timestamps are a view of the log's array.
        """
        lo, hi = self.train_lo, self.train_hi
        position, user, item = log.user_major()
        inside = position < hi if lo == 0 else (position >= lo) & (position < hi)
        return TrainData.from_codes(
            log.user[lo:hi],
            log.item[lo:hi],
            n_users=log.n_users,
            n_items=log.n_items,
            timestamps=log.timestamp[lo:hi],
            cutoff=self.t_start,
            pairs=(user[inside], item[inside]),
            raw_user_ids=log.user_ids,
            raw_item_ids=log.item_ids,
        )

    def summary(self) -> dict[str, object]:
        """The fold's row of ``folds.csv``."""
        return {
            "fold": self.index,
            "t_start": self.t_start,
            "t_end": self.t_end,
            "n_train": self.n_train,
            "n_test": self.n_test,
            "n_test_users": self.n_test_users,
            "n_eligible": self.n_eligible,
            "skipped": self.skipped,
            "skip_reason": self.skip_reason or "",
        }


def build_folds(log: InteractionLog, spec: WindowSpec, *, u_min: int) -> list[Fold]:
    """Cut the log into the folds of ``spec``.

    Raises:
        SwevalError: no window overlaps the data, or u_min < 0.
    """
    if u_min < 0:
        raise SwevalError(f"--u-min must be ≥ 0, got {u_min}.")
    bounds = spec.bounds(log.t_max)
    if bounds[0][0] > log.t_max:
        raise SwevalError(
            f"{log.source}: the first window starts at {iso_utc(bounds[0][0])}, after the last event "
            f"({iso_utc(log.t_max)}); no fold lies inside the data. Choose an earlier --start."
        )
    if bounds[-1][1] <= log.t_min:
        raise SwevalError(
            f"{log.source}: the windows end at {iso_utc(bounds[-1][1])}, before the first event "
            f"({iso_utc(log.t_min)}); no fold lies inside the data."
        )
    # first_position[u]: position of u's first transaction; a user has training history in an
    # expanding window ending at position p iff first_position[u] < p.
    from sweval.data.first_seen import first_row_per_code  # numba: import on use

    first_position = first_row_per_code(log.user, log.n_users)
    folds = []
    for index, (t_start, t_end) in enumerate(bounds):
        test_lo, test_hi = log.position(t_start), log.position(t_end)
        train_hi = test_lo
        if spec.train_window_s is None:
            train_lo = 0
        else:
            train_lo = log.position(t_start - spec.train_window_s)
        test_users = np.unique(log.user[test_lo:test_hi])
        if train_lo == 0:
            has_history = first_position[test_users] < train_hi
        else:
            in_train = np.zeros(log.n_users, dtype=bool)
            in_train[log.user[train_lo:train_hi]] = True
            has_history = in_train[test_users]
        eligible = test_users[has_history]
        eligible.setflags(write=False)
        reason = None
        if len(eligible) < u_min:
            reason = f"n_eligible={len(eligible)} < u_min={u_min}"
        elif len(eligible) == 0:  # u_min=0: a mean over no user is undefined, never a value
            reason = "n_eligible=0: no user has both training and test transactions"
        folds.append(
            Fold(
                index=index,
                t_start=t_start,
                t_end=t_end,
                train_lo=train_lo,
                train_hi=train_hi,
                test_lo=test_lo,
                test_hi=test_hi,
                eligible_users=eligible,
                n_test_users=len(test_users),
                skip_reason=reason,
                train_start=None if spec.train_window_s is None else t_start - spec.train_window_s,
            )
        )
    span = log.t_max - log.t_min
    if span < spec.width_s and not any(len(fold.eligible_users) for fold in folds):
        _log.warning(
            "%s: the log spans only %s s (%s to %s), less than one window (%s s): no window has "
            "anything before it to train on. Is the time column right (--time-col, and "
            "--time-unit for milliseconds)?", log.source, f"{span:,}", iso_utc(log.t_min),
            iso_utc(log.t_max), f"{spec.width_s:,}",
        )
    return folds

