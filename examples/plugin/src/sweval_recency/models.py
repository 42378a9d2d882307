"""RecencyPop: item popularity where each interaction counts less the older it is at t_f.

For a fold with cut-off t_f (``train.cutoff``) and training transactions (u, i, t), t < t_f::

    score(i) = Σ_{training transactions of i}  0.5 ** ((t_f − t) / half_life)

An interaction at t_f counts 1, one half-life earlier 1/2, two half-lives earlier 1/4. Every user
gets the same scores (``user_independent``); the engine drops each user's seen items and breaks
ties by item id. With ``--dedup none`` every repeat counts.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms import Algorithm, AlgorithmConfig, TrainData

DAY = 86_400


class RecencyPopConfig(AlgorithmConfig):
    half_life_days: float = Field(
        default=7.0, gt=0, description="days after which an interaction counts half"
    )


class RecencyPop(Algorithm):
    """Recency-weighted popularity (see the module docstring)."""

    Config: ClassVar[type[AlgorithmConfig]] = RecencyPopConfig
    user_independent: ClassVar[bool] = True

    def _fit(self, train: TrainData) -> None:
        age_days = (train.cutoff - train.timestamps) / DAY  # > 0: everything is before t_f
        weights = np.exp2(-age_days / self.config.half_life_days)
        self.scores_ = np.bincount(train.item_sequence, weights=weights, minlength=train.n_items)

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.broadcast_to(self.scores_, (len(rows), len(self.scores_)))
