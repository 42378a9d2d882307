"""DecayPop (paper 004 §3.1): hand-computed periods and boundaries, and a slow pandas
reference from the raw log on random logs full of ties."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweval.algorithms.decay_popularity import DecayPop
from sweval.algorithms.registry import build_algorithm
from sweval.algorithms.train_data import TrainData
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.testing import DAY, T0, fold_lists, folds_of


def train_of(items: list[int], times: list[int], cutoff: int) -> TrainData:
    """One user per transaction (POP-like models ignore users), times ascending."""
    n = len(items)
    return TrainData.from_codes(
        np.arange(n), np.array(items), n_users=n, n_items=max(items) + 1,
        timestamps=np.array(times), cutoff=cutoff,
    )


def test_hand_computed_periods_and_their_boundaries():
    """t_f = 1000, P = 100, H = 3, d = 0.5: period 1 = [900, 1000), 2 = [800, 900),
    3 = [700, 800); 699 is beyond the horizon."""
    times = [699, 700, 799, 800, 899, 900, 999]
    items = [0, 1, 1, 2, 2, 3, 4]
    model = DecayPop(period=100, horizon=3, decay=0.5).fit(train_of(items, times, 1000))
    # item 0: nothing in the horizon; 1: two in period 3; 2: two in period 2; 3, 4: one in 1
    np.testing.assert_array_equal(model.scores_, [0.0, 2 * 0.125, 2 * 0.25, 0.5, 0.5])
    # items 2, 3, 4 tie at 0.5 (two in period 2 weigh one in period 1 at d = 0.5): by id; then
    # 1; item 0 (score 0) is row 0's own
    assert model.recommend(np.array([0]), 5)[0].tolist() == [2, 3, 4, 1, -1]
    assert model.recommend(np.array([1]), 5)[0].tolist() == [2, 3, 4, 0, -1]  # 0 last: score 0


def test_defaults_are_the_papers_six_months_of_e_to_the_minus_m():
    model = build_algorithm("decay-pop")
    assert model.config.horizon == 6 and model.config.period_s == 30 * DAY
    assert model.config.decay == math.exp(-1)
    cutoff = T0
    times = [cutoff - m * 30 * DAY for m in range(6, 0, -1)]  # the start of periods 6..1
    model.fit(train_of([5, 4, 3, 2, 1, 0], times, cutoff))
    np.testing.assert_allclose(model.scores_, [math.exp(-m) for m in range(1, 7)], rtol=0,
                               atol=1e-10)  # scores are rounded to 10 decimals


def test_period_spellings_agree_and_bad_ones_are_user_errors():
    assert build_algorithm("decay-pop", {"period": "2W"}).config.period_s == 14 * DAY
    assert build_algorithm("decay-pop", {"period": 3600}).config.period_s == 3600
    with pytest.raises(SwevalError, match=r"decay-pop\.period: .*'1M': 'M' is ambiguous"):
        build_algorithm("decay-pop", {"period": "1M"})
    with pytest.raises(SwevalError, match=r"decay-pop\.period: .*not a duration"):
        build_algorithm("decay-pop", {"period": "a month"})
    with pytest.raises(SwevalError, match=r"decay-pop\.decay: Input should be less than or"):
        build_algorithm("decay-pop", {"decay": 1.5})


# ------------------------------------------------------------------------- slow reference
def reference_lists(frame: pd.DataFrame, t_f: int, users: list, *, period_s: int,
                    horizon: int, decay: float, k: int) -> dict:
    """From the raw (de-duplicated) log: per-period counts by pandas, the weighted sum, each
    user's unseen training items by (score descending, id ascending)."""
    train = frame[frame["timestamp"] < t_f]
    scores = pd.Series(0.0, index=sorted(train["item"].unique()))
    for m in range(1, horizon + 1):
        lo, hi = t_f - m * period_s, t_f - (m - 1) * period_s
        counts = train[(train["timestamp"] >= lo) & (train["timestamp"] < hi)]["item"]
        scores = scores.add(decay**m * counts.value_counts(), fill_value=0.0)
    scores = scores.round(10)
    lists = {}
    for user in users:
        seen = set(train.loc[train["user"] == user, "item"])
        ranked = sorted((i for i in scores.index if i not in seen), key=lambda i: (-scores[i], i))
        lists[user] = (ranked + [None] * k)[:k]
    return lists


def random_coarse_log(seed: int, dedup: str) -> InteractionLog:
    """8 days, 15 users, 12 items, times on a 6-hour grid: many items tie period by period."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(60, 120))
    frame = pd.DataFrame({
        "user": rng.integers(0, 15, n),
        "item": rng.integers(0, 12, n),
        "timestamp": T0 + rng.integers(0, 8 * 4, n) * (DAY // 4),
    })
    return InteractionLog.from_frame(frame, dedup=dedup)


@pytest.mark.parametrize("dedup", ["first", "none"])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("period", "period_s", "horizon", "decay"), [
    ("1D", DAY, 3, math.exp(-1)),
    ("12h", DAY // 2, 5, 0.5),
    ("2D", 2 * DAY, 2, 1.0),
])
def test_equals_the_pandas_reference(seed, dedup, period, period_s, horizon, decay):
    log = random_coarse_log(seed, dedup)
    frame = log.to_frame()
    params = {"period": period, "horizon": horizon, "decay": decay}
    folds = folds_of(log, n_folds=4, start=T0 + 4 * DAY)
    assert folds
    ties = 0
    for fold in folds:
        got = fold_lists(build_algorithm("decay-pop", params), log, fold, k=12)
        expected = reference_lists(frame, fold.t_start, list(got), period_s=period_s,
                                   horizon=horizon, decay=decay, k=12)
        assert got == expected, fold.t_start
        model = build_algorithm("decay-pop", params).fit(fold.train_data(log))
        positive = model.scores_[model.scores_ > 0]
        ties += len(positive) - len(np.unique(positive))
    assert ties > 0, "the logs should make tied positive scores"
