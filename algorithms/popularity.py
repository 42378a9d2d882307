"""Popularity baselines (SPEC §5): POP and POP-N (sliding-window popularity)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.serving import Delta, columns_of
from sweval.algorithms.train_data import TrainData


class Pop(Algorithm):
    """POP: score(i) = number of training transactions of i; the same list for every user."""

    name: ClassVar[str] = "pop"
    exact_update: ClassVar[bool] = True
    user_independent: ClassVar[bool] = True

    def _fit(self, train: TrainData) -> None:
        self.counts_ = train.transactions_per_item().astype(np.float64)

    def _update(self, delta: Delta, previous: TrainData) -> None:
        """The previous counts moved to the new columns, plus one per delta transaction."""
        assert self.train_ is not None
        counts = np.zeros(self.train_.n_items, dtype=np.float64)
        counts[columns_of(previous.item_codes, self.train_.item_codes)] = self.counts_
        np.add.at(counts, columns_of(delta.items, self.train_.item_codes), 1.0)
        self.counts_ = counts

    def _serve(self, history: TrainData) -> None:
        """The counts stay the fit's; only the seen items come from ``history``."""

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.broadcast_to(self.counts_, (len(rows), len(self.counts_)))


class PopNConfig(AlgorithmConfig):
    n_recent: int = Field(
        default=1000, ge=1, description="N: how many of the latest training transactions count"
    )


class PopN(Algorithm):
    """POP-N: score(i) = occurrences of i among the last N training transactions before t_f.

    Items of D_{t_f} outside the last N transactions stay candidates with score 0 (and are
    ranked among themselves by item id).
    """

    name: ClassVar[str] = "pop-n"
    exact_update: ClassVar[bool] = True
    user_independent: ClassVar[bool] = True
    Config: ClassVar[type[AlgorithmConfig]] = PopNConfig

    def _fit(self, train: TrainData) -> None:
        recent = train.item_sequence[-self.config.n_recent :]
        self.recent_ = train.item_codes[recent]  # global codes, for updates
        self.counts_ = np.bincount(recent, minlength=train.n_items).astype(np.float64)

    def _update(self, delta: Delta, previous: TrainData) -> None:
        """The last N of the kept transactions and the delta's, counted in the new columns."""
        assert self.train_ is not None
        self.recent_ = np.concatenate([self.recent_, delta.items])[-self.config.n_recent :]
        columns = columns_of(self.recent_, self.train_.item_codes)
        self.counts_ = np.bincount(columns, minlength=self.train_.n_items).astype(np.float64)

    def _serve(self, history: TrainData) -> None:
        """The counts stay the fit's; only the seen items come from ``history``."""

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.broadcast_to(self.counts_, (len(rows), len(self.counts_)))
