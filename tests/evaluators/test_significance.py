"""Intervals and tests equal scipy's own functions applied by hand to the per-fold values of
``results.csv``; Holm against a hand computation; too few folds give no p-value; identical
algorithms do not crash the Wilcoxon test. (Users as the unit: test_significance_users.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.report.data import read_results
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.stats.significance import (
    MIN_FOLDS,
    NO_POWER,
    SIGNIFICANCE_COLUMNS,
    Bootstrap,
    compare_algorithms,
    compare_strata,
    holm,
    interval,
    paired_tests,
)

B = 999  # resamples: enough to test equality with scipy, quick


def run(tmp_path: Path, name: str, **overrides) -> Path:
    values = dict(
        data="movielens-latest-small", window="7D", folds=8, u_min=3,
        algorithms=["pop", "pop-n", "pop-n(n_recent=200)"], output=str(tmp_path / name),
        progress=False, bootstrap=B, bootstrap_seed=7,
    )
    values.update(overrides)
    evaluate_config(EvalConfig.build(**values))
    return tmp_path / name


def per_fold(results: pd.DataFrame, algorithm: str, metric: str, k: int) -> pd.Series:
    rows = results[(results["algorithm"] == algorithm) & (results["metric"] == metric)
                   & (results["k"] == k) & ~results["skipped"]]
    return rows.set_index("fold")["value"]


@pytest.fixture(scope="module")
def outdir(tmp_path_factory) -> Path:
    return run(tmp_path_factory.mktemp("sig"), "out")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_summary_intervals_equal_scipys_bootstrap_of_results_csv(outdir, tmp_path, method):
    directory = outdir if method == "percentile" else run(tmp_path, "bca", ci_method="bca",
                                                          ci=0.9)
    results = read_results(directory / "results.csv")
    summary = pd.read_csv(directory / "summary.csv")
    assert list(summary.columns[-2:]) == ["ci_low", "ci_high"]
    checked = 0
    for row in summary[summary["k"].notna()].itertuples():
        values = per_fold(results, row.algorithm, row.metric, int(row.k)).to_numpy()
        if len(values) < 2 or np.all(values == values[0]):
            continue
        expected = stats.bootstrap(
            (values,), np.mean, n_resamples=B, rng=np.random.default_rng(7),
            confidence_level=0.95 if method == "percentile" else 0.9,
            method="percentile" if method == "percentile" else "BCa",
        ).confidence_interval
        assert row.ci_low == pytest.approx(expected.low, rel=1e-9)
        assert row.ci_high == pytest.approx(expected.high, rel=1e-9)
        assert row.ci_low <= row.mean <= row.ci_high
        checked += 1
    assert checked >= 20


@pytest.mark.slow
def test_significance_csv_equals_scipys_tests_of_results_csv(outdir):
    results = read_results(outdir / "results.csv")
    table = pd.read_csv(outdir / "significance.csv")
    assert list(table.columns) == SIGNIFICANCE_COLUMNS
    # 3 pairs x 3 tests (8 folds: the permutation test too) at each of 13 (metric, k), both units
    assert len(table) == 3 * 3 * 13 * 2
    table = table[table["unit"] == "folds"]
    checked = 0
    for row in table[table["k"].notna()].itertuples():
        a = per_fold(results, row.algorithm_a, row.metric, int(row.k))
        b = per_fold(results, row.algorithm_b, row.metric, int(row.k))
        folds = a.index.intersection(b.index)
        x, y = a[folds].to_numpy(), b[folds].to_numpy()
        d = x - y
        assert row.n_folds == len(folds) >= MIN_FOLDS
        assert row.mean_diff == pytest.approx(d.mean(), rel=1e-9, abs=1e-15)
        if np.all(d == 0):
            assert (row.statistic, row.p_value) == (0, 1)
            continue
        ci = stats.bootstrap((d,), np.mean, n_resamples=B, method="percentile",
                             rng=np.random.default_rng(7)).confidence_interval
        assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
        ties = np.any(d == 0) or len(np.unique(np.abs(d))) < len(d)
        method = "approx" if ties else "auto"
        expected = floor = None
        if row.test == "wilcoxon":
            expected = stats.wilcoxon(d, method=method)
            floor = stats.wilcoxon(np.abs(d), method=method).pvalue
        elif row.test == "t-test":
            expected, floor = stats.ttest_rel(x, y), 0.0
        else:
            def mean(v, axis=-1):
                return np.mean(v, axis=axis)

            def flips(v):
                return stats.permutation_test((v,), mean, permutation_type="samples",
                                              n_resamples=B, rng=np.random.default_rng(7))

            expected, floor = flips(d), flips(np.abs(d)).pvalue
        assert row.statistic == pytest.approx(expected.statistic, rel=1e-9)
        assert row.p_value == pytest.approx(expected.pvalue, rel=1e-9)
        assert row.p_floor == pytest.approx(floor, rel=1e-9)
        assert row.min_p_reachable == pytest.approx(min(1.0, 3 * floor), rel=1e-9)
        checked += 1
    assert checked >= 60
    # Holm within one (stratum, metric, k, test): the three pairs' p-values, by hand
    family = table[(table["metric"] == "recall") & (table["k"] == 10)
                   & (table["test"] == "t-test")]
    p = family["p_value"].to_numpy()
    order = np.argsort(p)
    hand = np.empty(3)
    hand[order[0]] = min(1, 3 * p[order[0]])
    hand[order[1]] = min(1, max(3 * p[order[0]], 2 * p[order[1]]))
    hand[order[2]] = min(1, max(3 * p[order[0]], 2 * p[order[1]], p[order[2]]))
    assert family["p_holm"].to_numpy() == pytest.approx(hand)


@pytest.mark.slow
def test_same_seed_same_numbers_other_seed_other_intervals(outdir, tmp_path):
    again = run(tmp_path, "again")
    for name in ("summary.csv", "significance.csv"):
        assert (again / name).read_bytes() == (outdir / name).read_bytes()
    other = run(tmp_path, "other", bootstrap_seed=8)
    assert (other / "results.csv").read_bytes() == (outdir / "results.csv").read_bytes()
    first, second = (pd.read_csv(d / "summary.csv") for d in (outdir, other))
    assert not np.allclose(first["ci_low"].fillna(-1), second["ci_low"].fillna(-1))


@pytest.mark.slow
def test_fewer_than_five_folds_give_no_p_value(tmp_path):
    directory = run(tmp_path, "few", folds=4, test_unit="folds")
    table = pd.read_csv(directory / "significance.csv", keep_default_na=False,
                        na_values={c: [""] for c in ("statistic", "p_value", "p_holm")})
    assert set(table["unit"]) == {"folds"}
    assert (table["n_folds"] == 4).all()
    assert table["p_value"].isna().all() and table["p_holm"].isna().all()
    assert table["statistic"].isna().all()
    assert (table["note"] == NO_POWER).all()
    assert table["mean_diff"].notna().all()  # the effect and its interval are still given


def test_holm_by_hand():
    # p sorted: 0.01, 0.02, 0.03, 0.04 (m = 4): 0.04, max(0.04, 0.06), max(.., 0.06), max(.., 0.04)
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    # the step-down is monotone and capped at 1; NaN is left out of m
    assert holm([0.5, np.nan, 0.2]) == pytest.approx([0.5, np.nan, 0.4], nan_ok=True)
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert holm([]).size == 0


def test_identical_algorithms_do_not_crash_and_give_p_one():
    values = np.array([0.1, 0.2, 0.3, 0.25, 0.15, 0.05])
    rows = paired_tests(values, values.copy(), Bootstrap(n_resamples=B))
    assert [(r["test"], r["statistic"], r["p_value"]) for r in rows] == [
        ("wilcoxon", 0.0, 1.0), ("t-test", 0.0, 1.0), ("permutation", 0.0, 1.0)]
    assert all(r["mean_diff"] == 0 and (r["ci_low"], r["ci_high"]) == (0, 0) for r in rows)


def test_float_noise_is_not_a_difference_and_a_constant_lead_has_no_t_test():
    """a − 0.01 leads by 0.01 on every fold up to float noise: the t-test read the noise as a
    variance (t = 4e15, p = 1e-77). Rounded, the differences are constant: no t-test (no
    variance, a note says so); Wilcoxon ranks them as ties. Noise alone is "identical"."""
    from sweval.evaluators.stats.significance import CONSTANT_DIFFERENCE

    values = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    assert len(set(values - (values - 0.01))) > 1  # the noise this is about
    wilcoxon, t_test, flips = paired_tests(values, values - 0.01, Bootstrap(n_resamples=B))
    assert flips["p_value"] == pytest.approx(2 / 64)  # every sign the same: the exact floor
    expected = stats.wilcoxon(np.full(6, 0.01), method="approx")
    assert wilcoxon["p_value"] == pytest.approx(expected.pvalue, rel=1e-12)  # 0.0196
    assert np.isnan(t_test["statistic"]) and np.isnan(t_test["p_value"])
    assert t_test["note"] == CONSTANT_DIFFERENCE
    assert t_test["mean_diff"] == pytest.approx(0.01, abs=1e-15)
    noisy = values + np.array([3e-16, 0, -4e-16, 0, 6e-16, 0])
    assert np.any(values != noisy)
    assert [r["note"] for r in paired_tests(values, noisy, Bootstrap(n_resamples=B))] == [
        "identical on every fold"] * 3


def test_interval_edge_cases():
    settings = Bootstrap(n_resamples=B)
    assert np.isnan(interval([0.3], settings)).all()
    assert interval([0.3, 0.3, 0.3], settings) == (0.3, 0.3)


def long_table(values: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = [
        {"fold": fold, "algorithm": algorithm, "stratum": stratum, "metric": "recall", "k": 10,
         "value": value, "skipped": False}
        for (stratum, algorithm), series in values.items() for fold, value in enumerate(series)
    ]
    frame = pd.DataFrame(rows)
    frame["k"] = frame["k"].astype("Int64")
    return frame


def test_between_strata_the_paired_unit_is_the_folds_difference_of_leads():
    rng = np.random.default_rng(3)
    values = {(s, a): list(rng.uniform(0, 1, 7)) for s in ("all", "p1", "p2")
              for a in ("x", "y")}
    values[("p1", "y")][2] = np.nan  # a fold missing in one stratum is not paired
    results = long_table(values)
    results.loc[results["value"].isna(), "skipped"] = True
    table = compare_strata(results, Bootstrap(n_resamples=B))
    assert set(zip(table["stratum_a"], table["stratum_b"])) == {("p1", "p2")}
    v = {key: np.array(series) for key, series in values.items()}
    keep = np.arange(7) != 2
    lead_1 = (v[("p1", "x")] - v[("p1", "y")])[keep]
    lead_2 = (v[("p2", "x")] - v[("p2", "y")])[keep]
    wilcoxon = table[table["test"] == "wilcoxon"].iloc[0]
    assert wilcoxon["n_folds"] == 6
    assert wilcoxon["mean_diff"] == pytest.approx((lead_1 - lead_2).mean())
    assert wilcoxon["p_value"] == pytest.approx(stats.wilcoxon(lead_1 - lead_2).pvalue)
    t = table[table["test"] == "t-test"].iloc[0]
    assert t["p_value"] == pytest.approx(stats.ttest_rel(lead_1, lead_2).pvalue)
    # one row per test: Holm over a family of one changes nothing
    assert (table["p_holm"] == table["p_value"]).all()


def test_algorithm_order_follows_the_configuration():
    results = long_table({("all", a): [0.1, 0.2, 0.3, 0.4, 0.5] for a in ("b", "a", "c")})
    table = compare_algorithms(results, Bootstrap(n_resamples=B), order=["c", "a", "b"])
    assert list(dict.fromkeys(zip(table["algorithm_a"], table["algorithm_b"]))) == [
        ("c", "a"), ("c", "b"), ("a", "b")]


def test_between_protocols_the_leads_are_compared_unpaired_as_scipy_does():
    from sweval.evaluators.stats.significance import NO_POWER_UNPAIRED, compare_protocols

    rng = np.random.default_rng(5)
    sizes = {"sw-eval": 7, "loocv": 6, "leave-last-one-out": 1}
    values = {(p, a): rng.uniform(0, 1, n) for p, n in sizes.items() for a in ("x", "y")}
    frames = []
    for protocol in sizes:
        part = long_table({("all", a): list(values[(protocol, a)]) for a in ("x", "y")})
        part.insert(0, "protocol", protocol)
        frames.append(part)
    table = compare_protocols(pd.concat(frames, ignore_index=True), Bootstrap(n_resamples=B))
    assert len(table) == 3 * 2  # 3 protocol pairs x 2 tests, one algorithm pair
    lead = {p: values[(p, "x")] - values[(p, "y")] for p in sizes}
    x, y = lead["sw-eval"], lead["loocv"]
    rows = table[(table["protocol_a"] == "sw-eval") & (table["protocol_b"] == "loocv")]
    mw, welch = rows.iloc[0], rows.iloc[1]
    assert (mw["test"], welch["test"]) == ("mann-whitney", "welch")
    assert (mw["n_folds_a"], mw["n_folds_b"]) == (7, 6)
    assert mw["mean_diff"] == pytest.approx(x.mean() - y.mean())
    assert mw["p_value"] == pytest.approx(stats.mannwhitneyu(x, y).pvalue)
    assert welch["p_value"] == pytest.approx(stats.ttest_ind(x, y, equal_var=False).pvalue)
    ci = stats.bootstrap((x, y), lambda a, b, axis: a.mean(axis) - b.mean(axis),
                         n_resamples=B, method="percentile",
                         rng=np.random.default_rng(0)).confidence_interval
    assert (mw["ci_low"], mw["ci_high"]) == pytest.approx((ci.low, ci.high))
    one_split = table[table["protocol_b"] == "leave-last-one-out"]
    assert (one_split["note"] == NO_POWER_UNPAIRED).all() and one_split["p_value"].isna().all()
    # Holm over the tested rows of one test: a family of one
    assert welch["p_holm"] == pytest.approx(welch["p_value"])
