"""DecayPop (paper 004 §3.1): popularity over the last H periods before t_f, older periods
weighed down geometrically."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field, field_validator

from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.scores import snap_scores
from sweval.algorithms.serving import Delta, columns_of
from sweval.algorithms.train_data import TrainData
from sweval.data.durations import parse_duration


class DecayPopConfig(AlgorithmConfig):
    horizon: int = Field(default=6, ge=1, description="H: how many periods before t_f count")
    period: str | int = Field(
        default="30D",
        description="length of one period: a duration like --window's (30D, 12h, 2W) or "
        "seconds",
    )
    decay: float = Field(
        default=math.exp(-1),
        gt=0,
        le=1,
        description="d: weight of the m-th period is d^m (default e^-1; 1 = plain counts "
        "over the horizon)",
    )

    @field_validator("period")
    @classmethod
    def _a_duration(cls, value: str | int) -> str | int:
        parse_duration(value, option="decay-pop.period")
        return value

    @property
    def period_s(self) -> int:
        """The period in seconds."""
        return parse_duration(self.period, option="decay-pop.period")


class DecayPop(Algorithm):
    """DecayPop (Ji et al., paper 004 §3.1, after its reference [14]): the same list for every
    user, by recency-weighted popularity at the fold's cut-off t_f.

    With P = ``period``, H = ``horizon`` and d = ``decay``, period m (m = 1..H) is the half-open
    interval [t_f − m·P, t_f − (m−1)·P); the most recent, m = 1, ends just before t_f::

          t_f − H·P   …   t_f − 2·P       t_f − P          t_f
        ──────┼───────  …  ───┼───────────────┼───────────────┼──▶ time
              [ period H )…   [   period 2    )[   period 1    )

        score(i) = Σ_{m=1..H} d^m · c_m(i)

    where c_m(i) counts the training transactions of i in period m (repeats included with
    ``--dedup none``, as POP counts them). Transactions older than t_f − H·P count nothing;
    items of D_{t_f} without a transaction in the horizon stay candidates with score 0, ranked
    among themselves by id. The counts are exact integers, summed in the order m = 1..H and
    rounded (:func:`~algorithms.scores.snap_scores`), so items with equal counts in every
    period tie exactly and come by id. The paper's setting: 6 periods of a month, weights
    e^{−1} … e^{−6}, i.e. the defaults (a month as 30 days).
    """

    name: ClassVar[str] = "decay-pop"
    exact_update: ClassVar[bool] = True
    Config: ClassVar[type[AlgorithmConfig]] = DecayPopConfig
    user_independent: ClassVar[bool] = True

    def _fit(self, train: TrainData) -> None:
        cfg = self.config
        self.scores_ = decayed_counts(
            train.item_sequence, train.timestamps, train.cutoff, train.n_items,
            period_s=cfg.period_s, horizon=cfg.horizon, decay=cfg.decay,
        )  # fmt: skip
        # the transactions inside the horizon, in global codes, for updates
        inside = train.timestamps >= train.cutoff - cfg.horizon * cfg.period_s
        self.window_items_ = train.item_codes[train.item_sequence[inside]]
        self.window_times_ = np.asarray(train.timestamps[inside])

    def _update(self, delta: Delta, previous: TrainData) -> None:
        """The kept transactions and the delta's, those older than the new t_f − H·P dropped,
        decayed at the new t_f (every transaction of the horizon is kept: exact)."""
        cfg = self.config
        assert self.train_ is not None
        items = np.concatenate([self.window_items_, delta.items])
        times = np.concatenate([self.window_times_, delta.timestamps])
        inside = times >= delta.cutoff - cfg.horizon * cfg.period_s
        self.window_items_, self.window_times_ = items[inside], times[inside]
        self.scores_ = decayed_counts(
            columns_of(self.window_items_, self.train_.item_codes), self.window_times_,
            delta.cutoff, self.train_.n_items, period_s=cfg.period_s, horizon=cfg.horizon,
            decay=cfg.decay,
        )

    def _serve(self, history: TrainData) -> None:
        """The decayed counts stay the fit's (at its t_f); only the seen items come from
        ``history``."""

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.broadcast_to(self.scores_, (len(rows), len(self.scores_)))


def decayed_counts(
    items: NDArray[np.int64],
    timestamps: NDArray[np.int64],
    cutoff: int,
    n_items: int,
    *,
    period_s: int,
    horizon: int,
    decay: float,
) -> NDArray[np.float64]:
    """Σ_{m=1..H} d^m · c_m(i) for every column i (see :class:`DecayPop`), snapped.

    A transaction at t < t_f lies in period m = ceil((t_f − t) / P).
    """
    age = np.int64(cutoff) - timestamps.astype(np.int64, copy=False)  # ≥ 1
    period = (age + (period_s - 1)) // period_s  # m, 1-based
    inside = period <= horizon
    keys = (period[inside] - 1) * n_items + items[inside]
    counts = np.bincount(keys, minlength=horizon * n_items).reshape(horizon, n_items)
    scores = np.zeros(n_items, dtype=np.float64)
    for m in range(1, horizon + 1):
        if counts[m - 1].any():
            scores += decay**m * counts[m - 1]
    return snap_scores(scores)
