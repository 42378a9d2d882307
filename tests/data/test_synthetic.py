"""Tests of the synthetic Retail-like log generator."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.data.errors import SwevalError
from sweval.data.synthetic import check_memory, generate_log
from sweval.data.synthetic_config import POLICIES, GeneratorConfig

SCALE = 0.02
START = int(pd.Timestamp("2015-06-01", tz="UTC").timestamp())


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    return generate_log(SCALE, seed=7)


def test_deterministic_for_a_seed(log: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(log, generate_log(SCALE, seed=7))


def test_seeds_differ(log: pd.DataFrame) -> None:
    other = generate_log(SCALE, seed=8)
    assert len(other) != len(log) or not other.equals(log)


def test_columns_and_dtypes(log: pd.DataFrame) -> None:
    assert list(log.columns) == ["user", "item", "timestamp", "policy"]
    for column in ("user", "item", "timestamp"):
        assert log[column].dtype == np.int64
    assert pd.api.types.is_string_dtype(log["policy"])
    assert not log.isna().any().any()
    assert set(log["policy"].unique()) == set(POLICIES)


def test_shape_proportional_to_scale(log: pd.DataFrame) -> None:
    assert log["user"].nunique() == pytest.approx(189_343 * SCALE, rel=0.25)
    assert len(log) == pytest.approx(734_813 * SCALE, rel=0.25)
    # The catalogue shrinks with sqrt(scale): far more items than 10,700 * scale.
    assert 10_700 * SCALE < log["item"].nunique() <= 10_700 * SCALE**0.5 * 1.1


def test_no_duplicate_pairs_and_sorted(log: pd.DataFrame) -> None:
    assert not log.duplicated(["user", "item"]).any()
    assert log["timestamp"].is_monotonic_increasing
    assert log.index.equals(pd.RangeIndex(len(log)))


def test_span_covers_the_days(log: pd.DataFrame) -> None:
    assert log["timestamp"].min() >= START
    assert log["timestamp"].max() < START + 120 * DAY
    assert log["timestamp"].max() - log["timestamp"].min() > 119 * DAY
    assert ((log["timestamp"] - START) // DAY).nunique() == 120


def test_days_and_start() -> None:
    short = generate_log(SCALE, days=30, start="2020-01-01")
    origin = int(pd.Timestamp("2020-01-01", tz="UTC").timestamp())
    day = (short["timestamp"] - origin) // DAY
    assert day.min() == 0 and day.max() == 29
    assert len(short) == pytest.approx(734_813 * SCALE / 4, rel=0.25)


def test_buckets_are_per_user_with_paper_shares(log: pd.DataFrame) -> None:
    per_user = log.groupby("user")["policy"].nunique()
    assert (per_user == 1).all()
    shares = log.groupby("user")["policy"].first().value_counts(normalize=True)
    assert shares["pop"] == pytest.approx(0.25, abs=0.03)
    assert shares["other"] == pytest.approx(0.25, abs=0.03)
    assert shares["item-knn"] == pytest.approx(0.50, abs=0.03)


def test_short_heavy_tailed_users_and_items(log: pd.DataFrame) -> None:
    per_user = log.groupby("user").size()
    assert per_user.median() <= 3 and per_user.max() >= 10 * per_user.median()
    span = log.groupby("user")["timestamp"].agg(lambda t: t.max() - t.min())
    assert (span <= 3 * DAY).mean() > 0.8
    per_item = log["item"].value_counts()
    top = per_item.iloc[: max(1, len(per_item) // 100)].sum()
    assert top / len(log) > 0.05  # top 1% of the items hold well over 1% of the clicks
    first_day = log.groupby("item")["timestamp"].min() // DAY - START // DAY
    assert (first_day > 30).mean() > 0.1  # items keep being released


def _top_hit_share(frame: pd.DataFrame, n_top: int = 20, window: int = 7) -> pd.Series:
    """Per bucket, the share of clicks on the previous days' most consumed items."""
    day = ((frame["timestamp"] - START) // DAY).to_numpy()
    item = frame["item"].to_numpy()
    hit = np.zeros(len(frame), dtype=bool)
    bounds = np.searchsorted(day, np.arange(121))
    for d in range(window, 120):
        counts = np.bincount(item[bounds[d - window] : bounds[d]])
        top = np.argsort(-counts, kind="stable")[:n_top]
        hit[bounds[d] : bounds[d + 1]] = np.isin(item[bounds[d] : bounds[d + 1]], top)
    keep = day >= window
    return pd.Series(hit[keep]).groupby(frame["policy"].to_numpy()[keep]).mean()


def test_presentation_bias_is_visible_and_tunable(log: pd.DataFrame) -> None:
    biased = _top_hit_share(log)
    assert biased["pop"] > biased["other"] + 0.1
    assert biased["pop"] > biased["item-knn"] + 0.1
    unbiased = _top_hit_share(generate_log(SCALE, seed=7, bias=0.0))
    assert abs(unbiased["pop"] - unbiased["item-knn"]) < 0.04
    assert abs(unbiased["pop"] - unbiased["other"]) < 0.04


@pytest.mark.parametrize(
    "kwargs", [{"scale": 0.0}, {"scale": 0.01, "days": 0}, {"scale": 0.01, "bias": 1.5}]
)
def test_rejects_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        generate_log(**kwargs)


def test_a_scale_beyond_memory_is_refused_naming_the_largest_accepted() -> None:
    """At 1 GiB, half of it holds floor(2**29 / (734,813 × 250 B) × 100) / 100 = 2.92 scales."""
    cfg = GeneratorConfig()
    check_memory(2.92, 120, cfg, total=2**30)
    refused = (r"--scale 2\.93: the generated log would hold about 2,153,002 interactions and "
               r"take about 1 GiB .*more than 50% of this machine's 1\.0 GiB; the largest scale "
               r"accepted here is 2\.92 \(over 120 days\)")
    with pytest.raises(SwevalError, match=refused):
        check_memory(2.93, 120, cfg, total=2**30)
    check_memory(11.68, 30, cfg, total=2**30)  # a quarter of the days: four times the scale


@pytest.mark.parametrize("scale", [1e6, float("inf")])
def test_a_huge_scale_is_an_error_before_any_allocation(scale: float) -> None:
    with pytest.raises(SwevalError, match=r"the largest scale accepted here is"):
        generate_log(scale)
