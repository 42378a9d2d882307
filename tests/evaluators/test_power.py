"""Fewer, better-aimed comparisons and what a design can show: --baseline, --correction, the
smallest p a design can reach after correction, the minimum detectable effect, and the note
that says "this design cannot tell" where that is the truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweval.evaluators.stats.power import benjamini_hochberg, standardised_mde
from sweval.evaluators.stats.resampling import Bootstrap
from sweval.evaluators.stats.significance import (
    SIGNIFICANCE_COLUMNS,
    Comparisons,
    compare_algorithms,
)

B = 199


def long_table(series: dict[str, np.ndarray]) -> pd.DataFrame:
    rows = [{"fold": fold, "algorithm": name, "stratum": "all", "metric": "recall", "k": 10,
             "value": value, "skipped": False}
            for name, values in series.items() for fold, value in enumerate(values)]
    frame = pd.DataFrame(rows)
    frame["k"] = frame["k"].astype("Int64")
    return frame


def four_algorithms(n_folds: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.1, 0.3, n_folds)
    return {name: np.round(base + lift + rng.normal(0, 0.01, n_folds), 6)
            for name, lift in (("a", 0.0), ("b", 0.01), ("c", 0.02), ("d", 0.05))}


def test_the_columns_keep_the_old_ones_and_add_unit_effect_power():
    old = ["stratum", "metric", "k", "algorithm_a", "algorithm_b", "n_folds", "mean_diff",
           "ci_low", "ci_high", "test", "statistic", "p_value", "p_holm", "note"]
    assert SIGNIFICANCE_COLUMNS[:14] == old
    assert {"unit", "effect", "effect_ci_low", "effect_ci_high", "min_p_reachable",
            "mde"} <= set(SIGNIFICANCE_COLUMNS)


def test_a_baseline_asks_m_minus_one_questions():
    table = compare_algorithms(long_table(four_algorithms(8)), Bootstrap(n_resamples=B),
                               comparisons=Comparisons(unit="folds", baseline="b"))
    pairs = list(dict.fromkeys(zip(table["algorithm_a"], table["algorithm_b"])))
    assert pairs == [("a", "b"), ("c", "b"), ("d", "b")]
    every = compare_algorithms(long_table(four_algorithms(8)), Bootstrap(n_resamples=B),
                               comparisons=Comparisons(unit="folds"))
    assert len(dict.fromkeys(zip(every["algorithm_a"], every["algorithm_b"]))) == 6


def test_corrections_holm_bh_none():
    table = compare_algorithms(long_table(four_algorithms(12, seed=3)),
                               Bootstrap(n_resamples=B),
                               comparisons=Comparisons(unit="folds", correction="bh"))
    t = table[table["test"] == "t-test"]
    p = t["p_value"].to_numpy()
    assert t["p_adjusted"].to_numpy() == pytest.approx(
        stats.false_discovery_control(p, method="bh"))
    assert (t["correction"] == "bh").all()
    m = len(p)
    order = np.argsort(p)
    holm = np.empty(m)
    holm[order] = np.minimum(1, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    assert t["p_holm"].to_numpy() == pytest.approx(holm)  # p_holm stays Holm's
    none = compare_algorithms(long_table(four_algorithms(12, seed=3)),
                              Bootstrap(n_resamples=B),
                              comparisons=Comparisons(unit="folds", correction="none"))
    assert none["p_adjusted"].to_numpy() == pytest.approx(none["p_value"].to_numpy(),
                                                          nan_ok=True)
    assert np.isnan(benjamini_hochberg([np.nan, 0.01])[0])


def test_min_p_reachable_is_the_floor_times_the_pairs_under_holm():
    """10 folds, distinct differences: Wilcoxon's floor is 2 / 2^10; 6 pairs under Holm:
    6 × 0.00195 = 0.0117; BH keeps the floor; the t-test has none."""
    results = long_table(four_algorithms(10, seed=5))
    holm = compare_algorithms(results, Bootstrap(n_resamples=B),
                              comparisons=Comparisons(unit="folds"))
    wilcoxon = holm[holm["test"] == "wilcoxon"]
    assert wilcoxon["p_floor"].to_numpy() == pytest.approx(2 / 2**10)
    assert wilcoxon["min_p_reachable"].to_numpy() == pytest.approx(6 * 2 / 2**10)
    assert (holm.loc[holm["test"] == "t-test", "min_p_reachable"] == 0).all()
    bh = compare_algorithms(results, Bootstrap(n_resamples=B),
                            comparisons=Comparisons(unit="folds", correction="bh"))
    assert bh.loc[bh["test"] == "wilcoxon", "min_p_reachable"].to_numpy() == pytest.approx(
        2 / 2**10)


def test_a_design_that_cannot_reach_alpha_says_so_instead_of_n_s():
    """6 folds and 6 pairs: Wilcoxon cannot go below 2/64 = 0.031, 0.19 after Holm: every
    Wilcoxon row says the design cannot tell and its minimum detectable effect is infinite,
    even for d, ahead on every fold; the t-test, without a floor, gives a finite one."""
    table = compare_algorithms(long_table(four_algorithms(6, seed=1)), Bootstrap(n_resamples=B),
                               comparisons=Comparisons(unit="folds"))
    wilcoxon = table[table["test"] == "wilcoxon"]
    assert wilcoxon["min_p_reachable"].to_numpy() == pytest.approx(6 * 2 / 64)
    assert wilcoxon["note"].str.startswith("this design cannot tell").all()
    assert "0.188 ≥ 0.05" in wilcoxon["note"].iloc[0]
    assert np.isinf(wilcoxon["mde"]).all()
    t = table[table["test"] == "t-test"]
    assert np.isfinite(t["mde"]).all() and (t["note"] == "").all()


def test_the_minimum_detectable_effect_has_eighty_percent_power():
    """Seeded: a lead of exactly the MDE (normal differences, the observed sd) is detected by
    the paired t-test at the corrected level in 80 % of simulated designs."""
    rng = np.random.default_rng(0)
    for n, level in ((10, 0.05), (10, 0.05 / 6), (40, 0.05 / 21)):
        delta = standardised_mde(n, level)
        d = rng.normal(delta, 1.0, (40_000, n))
        p = stats.ttest_1samp(d, 0, axis=1).pvalue
        assert np.mean(p < level) == pytest.approx(0.8, abs=0.01)
    assert np.isnan(standardised_mde(1, 0.05))


def test_effect_sizes_beside_every_p():
    results = long_table(four_algorithms(9, seed=2))
    table = compare_algorithms(results, Bootstrap(n_resamples=B),
                               comparisons=Comparisons(unit="folds"))
    row = table[(table["algorithm_a"] == "a") & (table["algorithm_b"] == "d")
                & (table["test"] == "wilcoxon")].iloc[0]
    series = four_algorithms(9, seed=2)
    x, y = series["a"], series["d"]
    d = np.round(x - y, 12)
    assert row["rel_diff"] == pytest.approx(x.mean() / y.mean() - 1)
    assert row["effect"] == pytest.approx(d.mean() / d.std(ddof=1))
    assert row["rank_biserial"] == pytest.approx(-1.0)  # d behind on every fold
    assert row["effect_ci_low"] <= row["effect"] <= row["effect_ci_high"]
    assert row["rel_ci_low"] <= row["rel_diff"] <= row["rel_ci_high"]
