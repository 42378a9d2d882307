"""The contract kit (``sweval.testing``) catches each kind of broken model: a model that passes
every check, and for every check a model (or a leaky engine) that fails it."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from pydantic import Field

from sweval.algorithms import Algorithm, AlgorithmConfig, TrainData
from sweval.evaluators.protocols.folds import Fold
from sweval.testing import (
    check_algorithm,
    check_deterministic,
    check_known_answer,
    check_no_future_data,
    check_pickling,
    check_scores_and_lists,
)


class CoConfig(AlgorithmConfig):
    seed: int = Field(default=0, description="seed of the tie-breaking noise")


class CoCounts(Algorithm):
    """score(u, i) = Σ_{j ∈ I_u} |users of i and j| plus seeded noise below 10⁻³."""

    Config = CoConfig

    def _fit(self, train: TrainData) -> None:
        r = train.matrix.astype(np.float64)
        self.co_ = (r.T @ r).toarray()
        self.noise_ = np.random.default_rng(self.config.seed).random(train.n_items) * 1e-3

    def score(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self.train_.matrix[rows] @ self.co_) + self.noise_


class Unseeded(CoCounts):
    def _fit(self, train: TrainData) -> None:
        super()._fit(train)
        self.noise_ = np.random.default_rng().random(train.n_items) * 1e-3


class WrongShape(CoCounts):
    def score(self, rows: np.ndarray) -> np.ndarray:
        return super().score(rows)[:, :-1]


class NotANumber(CoCounts):
    def score(self, rows: np.ndarray) -> np.ndarray:
        scores = super().score(rows)
        scores[:, 0] = np.nan
        return scores


class ReverseIds(Algorithm):
    """User-independent, but ranks by id descending: not what equal popularity means."""

    user_independent = True

    def _fit(self, train: TrainData) -> None:
        self.scores_ = np.arange(train.n_items, dtype=np.float64)  # the last id scores most

    def score(self, rows: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.scores_, (len(rows), len(self.scores_)))


class Blind(CoCounts):
    """Personalised in name, but ignores the user: the checkerboard's answer escapes it."""

    def score(self, rows: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.co_.sum(axis=0), (len(rows), self.co_.shape[0])).copy()


class FalselyIndependent(CoCounts):
    """Personal scores, declared user-independent: the engine ranks one row for everyone."""

    user_independent = True


class Locked(CoCounts):
    def _fit(self, train: TrainData) -> None:
        super()._fit(train)
        self.lock_ = threading.Lock()


def test_a_sound_model_passes_every_check():
    check_algorithm(CoCounts, {"seed": 3})


def test_wrong_shapes_and_nan_scores_fail():
    with pytest.raises(AssertionError, match=r"score\(rows\) has shape"):
        check_scores_and_lists(WrongShape)
    with pytest.raises(AssertionError, match="NaN or infinite"):
        check_scores_and_lists(NotANumber)
    with pytest.raises(AssertionError, match="declares user_independent = True, but score"):
        check_scores_and_lists(FalselyIndependent)


def test_an_unseeded_model_fails_determinism_and_check_algorithm_names_the_check():
    with pytest.raises(AssertionError, match="two fits with the same parameters gave different"):
        check_deterministic(Unseeded)
    with pytest.raises(AssertionError, match=r"^check_scores_and_lists: |^check_deterministic: "):
        check_algorithm(Unseeded)


def test_a_leak_of_the_test_window_into_training_is_caught(monkeypatch):
    """An engine that trained fold f on everything before t_f + tΔ (its test window included)."""
    from sweval.algorithms.train_data import TrainData as Data

    def leaky(self: Fold, log):  # noqa: ANN001
        hi = self.test_hi
        return Data.from_codes(log.user[:hi], log.item[:hi], n_users=log.n_users,
                               n_items=log.n_items, timestamps=log.timestamp[:hi],
                               cutoff=self.t_end)

    monkeypatch.setattr(Fold, "train_data", leaky)
    with pytest.raises(AssertionError, match="must see nothing at or after the cut-off"):
        check_no_future_data("pop")


def test_wrong_known_answers_fail():
    with pytest.raises(AssertionError, match="must list user .* unseen items by id"):
        check_known_answer(ReverseIds)
    with pytest.raises(AssertionError, match="which should come first"):
        check_known_answer(Blind)


def test_a_model_that_cannot_be_pickled_fails():
    with pytest.raises(TypeError, match="pickle"):
        check_pickling(Locked)


def test_the_example_plugin_keeps_the_contract(monkeypatch):
    """The kit takes a model by its import path, as ``--algorithms`` does."""
    from sweval_testing import EXAMPLE_PLUGIN

    monkeypatch.syspath_prepend(str(EXAMPLE_PLUGIN / "src"))
    check_algorithm("sweval_recency.models:RecencyPop", {"half_life_days": 2.0})
