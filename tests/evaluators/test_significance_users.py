"""Users as the sampling unit: every users-level p-value and interval equals scipy's own
functions applied by hand to ``per_user.parquet`` (each user's mean over the folds where it is
eligible, users in id order); a seeded calibration simulation (users in several folds: the
clustering matters) rejects at about α under the null and finds a planted effect; the
two-level bootstrap has the variance its definition says."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.stats.paired import PERMUTATION_MAX_N, paired_rows
from sweval.evaluators.stats.resampling import Bootstrap, two_level_draws
from sweval.evaluators.stats.significance import Comparisons
from sweval.evaluators.stats.users import UserValues, two_level_summary, user_pairs

B = 999


def mean(v, axis=-1):
    return np.mean(v, axis=axis)


def relative(a, b, axis=-1):
    return np.mean(a, axis=axis) / np.mean(b, axis=axis) - 1


def d_z(v, axis=-1):
    return np.mean(v, axis=axis) / np.std(v, axis=axis, ddof=1)


def by_hand(per_user: pd.DataFrame, a: str, b: str, metric: str, k: int | None,
            stratum: str = "all") -> tuple[np.ndarray, np.ndarray, int]:
    """x_u and y_u (users in id order) and |F_ab|, from the parquet's rows alone."""
    rows = per_user[(per_user["metric"] == metric) & (per_user["stratum"] == stratum)
                    & (per_user["k"].isna() if k is None else per_user["k"] == k)]
    first, second = rows[rows["algorithm"] == a], rows[rows["algorithm"] == b]
    folds = sorted(set(first["fold"]) & set(second["fold"]))
    x = first[first["fold"].isin(folds)].groupby("user")["value"].mean().sort_index()
    y = second[second["fold"].isin(folds)].groupby("user")["value"].mean().sort_index()
    assert list(x.index) == list(y.index)
    return x.to_numpy(), y.to_numpy(), len(folds)


def check_row(row: pd.Series, x: np.ndarray, y: np.ndarray, n_folds: int, seed: int) -> None:
    """One users-level row of significance.csv against scipy on x_u, y_u."""
    d = np.round(x - y, 12)
    n = len(d)
    assert (row["n_units"], row["n_folds"]) == (n, n_folds)
    assert row["mean_diff"] == pytest.approx(d.mean(), rel=1e-9, abs=1e-15)
    assert row["rel_diff"] == pytest.approx(x.mean() / y.mean() - 1, rel=1e-9)

    def boot(samples, statistic, **extra):
        return stats.bootstrap(samples, statistic, n_resamples=B, method="percentile",
                               rng=np.random.default_rng(seed), **extra).confidence_interval

    if not np.all(d == d[0]):
        ci = boot((d,), mean)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9,
                                                                abs=1e-11)
        ci = boot((d,), d_z)
        assert (row["effect_ci_low"], row["effect_ci_high"]) == pytest.approx(
            (ci.low, ci.high), rel=1e-6, abs=1e-9, nan_ok=True)
        assert row["effect"] == pytest.approx(d_z(d), rel=1e-9)
    if not (np.all(x == x[0]) and np.all(y == y[0])):
        ci = boot((x, y), relative, paired=True)
        assert (row["rel_ci_low"], row["rel_ci_high"]) == pytest.approx(
            (ci.low, ci.high), rel=1e-9, nan_ok=True)
    if np.all(d == 0):
        assert (row["statistic"], row["p_value"]) == (0, 1)
        return
    method = "approx" if np.any(d == 0) or len(np.unique(np.abs(d))) < n else "auto"
    if row["test"] == "wilcoxon":
        expected = stats.wilcoxon(d, method=method)
        floor = stats.wilcoxon(np.abs(d), method=method).pvalue
        nonzero = d[d != 0]
        ranks = stats.rankdata(np.abs(nonzero))
        assert row["rank_biserial"] == pytest.approx(
            (ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum())
    elif row["test"] == "t-test":
        expected, floor = stats.ttest_rel(x, y), 0.0
    else:
        assert n <= PERMUTATION_MAX_N

        def flips(v):
            return stats.permutation_test((v,), mean, permutation_type="samples",
                                          n_resamples=B, rng=np.random.default_rng(seed))

        expected, floor = flips(d), flips(np.abs(d)).pvalue
    assert row["statistic"] == pytest.approx(expected.statistic, rel=1e-9)
    assert row["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert row["p_floor"] == pytest.approx(floor, rel=1e-9, abs=1e-300)


CONFIG = dict(data="movielens-latest-small", window="7D", folds=10, u_min=1,
              start="2007-12-20", algorithms=["pop", "pop-n", "pop-n(n_recent=200)"],
              k=[10, 20], metrics=["recall", "ndcg"], progress=False, tracking=False,
              per_user=True, bootstrap=B, bootstrap_seed=7)


@pytest.fixture(scope="module")
def users_outputs(tmp_path_factory):
    """10 weekly folds of MovieLens where users come back week after week (clusters)."""
    directory = tmp_path_factory.mktemp("users") / "out"
    return evaluate_config(EvalConfig.build(**CONFIG, output=str(directory)))


@pytest.fixture(scope="module")
def users_run(users_outputs) -> Path:
    return users_outputs.directory


@pytest.mark.slow
def test_users_rows_equal_scipy_applied_by_hand_to_per_user_parquet(users_run):
    per_user = pd.read_parquet(users_run / "per_user.parquet")
    table = pd.read_csv(users_run / "significance.csv")
    users = table[table["unit"] == "users"]
    assert set(table["unit"]) == {"folds", "users"}
    # 3 pairs × 4 (metric, k) × 3 tests (fewer than 50 users: the permutation test too)
    assert len(users) == 3 * 4 * 3
    clustered = per_user.groupby("user")["fold"].nunique()
    assert (clustered > 1).sum() >= 5  # users in several folds: one cluster each
    for _, row in users.iterrows():
        x, y, n_folds = by_hand(per_user, row["algorithm_a"], row["algorithm_b"],
                                row["metric"], int(row["k"]))
        assert row["n_units"] == len(x) < per_user.drop_duplicates(["fold", "user"]).shape[0]
        check_row(row, x, y, n_folds, seed=7)
    family = users[(users["metric"] == "recall") & (users["k"] == 10)
                   & (users["test"] == "t-test")]
    p = family["p_value"].to_numpy()
    m = int(np.sum(~np.isnan(p)))
    order = np.argsort(p)
    hand = np.minimum(1, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    assert family["p_holm"].to_numpy()[order] == pytest.approx(hand)
    assert family["p_adjusted"].to_numpy() == pytest.approx(family["p_holm"].to_numpy())


@pytest.mark.slow
def test_the_terminal_and_the_report_say_what_each_design_can_show(users_outputs):
    from rich.console import Console

    from sweval.evaluators.report.page import write_report
    from sweval.flows.cli.summary import print_summary

    config = EvalConfig.build(**CONFIG, output=str(users_outputs.directory))
    console = Console(width=240, record=True)
    print_summary(users_outputs, config, console)
    text = console.export_text()
    assert "paired over users (each user's mean over the folds where it is eligible)" in text
    assert "  folds (10 paired folds, 3 pairs): " in text and "  users (" in text
    assert text.count("Minimum detectable lead at 80% power") == 2
    write_report(users_outputs.directory)
    html = (users_outputs.directory / "report.html").read_text(encoding="utf-8")
    assert "stratum all, paired over users, Holm" in html
    assert html.count('<p class="power') == 2  # Recall@10: the folds' design, the users'


# ---------------------------------------------------------------------- synthetic clusters
def simulate(rng: np.random.Generator, *, n_users: int = 60, folds: int = 6,
             effect: float = 0.0, same: bool = False, presence: float = 0.5
             ) -> tuple[UserValues, dict[int, np.ndarray], dict[str, dict[int, np.ndarray]]]:
    """Two algorithms a and b on users who come back in several folds: value = user level +
    the user's own liking of the algorithm (kept over folds: the cluster) + noise, plus
    ``effect`` for a. ``same``: b is a under another name."""
    level = rng.uniform(0.2, 0.6, n_users)
    liking = {name: rng.normal(0, 0.12, n_users) for name in ("a", "b")}
    values = UserValues()
    members: dict[int, np.ndarray] = {}
    series: dict[str, dict[int, np.ndarray]] = {"a": {}, "b": {}}
    for fold in range(folds):
        users = np.flatnonzero(rng.random(n_users) < presence)
        if len(users) < 2:
            users = np.arange(2)
        members[fold] = users
        for name in ("a", "b"):
            noise = rng.normal(0, 0.08, len(users))
            column = level[users] + liking[name][users] + noise + (effect if name == "a" else 0)
            if same and name == "b":
                column = series["a"][fold]
            series[name][fold] = column
            values.add(SimpleNamespace(fold=fold, algorithm=name, users=users,
                                       values={("recall", 10): column}), stratum="all")
    return values, members, series


def users_p(values: UserValues, settings: Bootstrap) -> dict[str, float]:
    rows = paired_rows(user_pairs(values, Comparisons().pairs, None), settings, unit="users")
    return {row["test"]: row["p_value"] for row in rows}


def test_synthetic_users_rows_equal_scipy_on_the_cluster_means():
    rng = np.random.default_rng(11)
    values, members, series = simulate(rng, n_users=40, effect=0.03)
    long = pd.DataFrame([{"fold": f, "algorithm": name, "stratum": "all", "user": u,
                          "metric": "recall", "k": 10, "value": v}
                         for name in ("a", "b") for f, users in members.items()
                         for u, v in zip(users, series[name][f], strict=True)])
    settings = Bootstrap(n_resamples=B, seed=3)
    pairs = user_pairs(values, Comparisons().pairs, None)
    rows = pd.DataFrame(paired_rows(pairs, settings, unit="users"))
    x, y, n_folds = by_hand(long, "a", "b", "recall", 10)
    assert len(x) < len(long) / 2  # users in several folds are one cluster each
    for _, row in rows.iterrows():
        check_row(row, x, y, n_folds, seed=3)
    # a baseline asks for the m − 1 pairs against it: a before b, b the baseline
    baseline = user_pairs(values, Comparisons(baseline="a").pairs, None)
    assert [(p.labels["algorithm_a"], p.labels["algorithm_b"]) for p in baseline] == [("b", "a")]


RUNS = 400


def test_calibration_the_users_test_rejects_about_alpha_under_the_null_and_clusters_matter():
    """Seeded: 400 simulated runs where a and b are exchangeable (each user's liking of a and
    of b drawn alike): the users-level t-test and Wilcoxon reject at most about 5 %. Testing
    the (user, fold) observations as if independent rejects far more often: a user's liking
    repeats in each of its folds, which only the clusters account for."""
    rng = np.random.default_rng(2024)
    settings = Bootstrap(n_resamples=100)
    rejected = {"t-test": 0, "wilcoxon": 0, "naive": 0}
    for _ in range(RUNS):
        values, members, series = simulate(rng)
        p = users_p(values, settings)
        rejected["t-test"] += p["t-test"] < 0.05
        rejected["wilcoxon"] += p["wilcoxon"] < 0.05
        d = np.concatenate([series["a"][f] - series["b"][f] for f in members])
        rejected["naive"] += stats.ttest_1samp(d, 0).pvalue < 0.05
    rate = {name: count / RUNS for name, count in rejected.items()}
    assert rate["t-test"] <= 0.075 and rate["wilcoxon"] <= 0.075, rate
    assert rate["naive"] >= 0.15, rate  # the simulation has teeth: ignoring clusters fails


def test_calibration_same_model_under_two_names_and_labels_swapped_per_user():
    """a and b the same model under two names: never rejected. One run with a real lead of
    a, its labels swapped at random per user (all of a user's folds at once, 400 times): the
    lead is gone, the users-level test rejects at most about 5 %."""
    rng = np.random.default_rng(7)
    settings = Bootstrap(n_resamples=100)
    same = [users_p(simulate(rng, same=True)[0], settings) for _ in range(50)]
    assert all(p["t-test"] == 1 and p["wilcoxon"] == 1 for p in same)
    values, members, series = simulate(rng, effect=0.1)
    assert users_p(values, settings)["t-test"] < 0.001  # the lead, before any swap
    rejected = 0
    for _ in range(RUNS):
        swap = rng.random(60) < 0.5
        shuffled = UserValues()
        for fold, users in members.items():
            a, b = series["a"][fold], series["b"][fold]
            flip = swap[users]
            for name, column in (("a", np.where(flip, b, a)), ("b", np.where(flip, a, b))):
                shuffled.add(SimpleNamespace(fold=fold, algorithm=name, users=users,
                                             values={("recall", 10): column}), stratum="all")
        rejected += users_p(shuffled, settings)["t-test"] < 0.05
    assert rejected / RUNS <= 0.075


def test_calibration_a_planted_effect_is_found_in_most_runs():
    """A lead of 0.08 for a (the users' differences d_u have a standard deviation of about
    0.18: an effect of 0.45 sd; about 59 users in 6 folds, so the t-test's power is about
    0.9): found by the users-level t-test and Wilcoxon in at least 80 % of 200 runs."""
    rng = np.random.default_rng(99)
    settings = Bootstrap(n_resamples=100)
    found = {"t-test": 0, "wilcoxon": 0}
    spread = []
    for _ in range(200):
        values = simulate(rng, effect=0.08)[0]
        pair = user_pairs(values, Comparisons().pairs, None)[0]
        spread.append(np.std(pair.x - pair.y, ddof=1))
        p = users_p(values, settings)
        found["t-test"] += p["t-test"] < 0.05
        found["wilcoxon"] += p["wilcoxon"] < 0.05
    assert np.mean(spread) == pytest.approx(0.18, abs=0.02)
    assert found["t-test"] / 200 >= 0.8 and found["wilcoxon"] / 200 >= 0.8, found


# ---------------------------------------------------------------------- two levels
def test_two_level_draws_have_the_variance_of_their_definition():
    """Mean and variance of θ* over 40,000 draws against the formula of the docstring:
    Var = ((1/F) Σ (μ_f − μ̄)² + (1/F) Σ v_f / n_f) / F."""
    rng = np.random.default_rng(5)
    folds = [rng.normal(loc, 0.3, (n, 2)) for loc, n in ((0.1, 30), (0.4, 5), (0.2, 60),
                                                         (0.3, 12))]
    draws = two_level_draws(folds, Bootstrap(n_resamples=40_000, seed=1))
    means = np.array([fold.mean(axis=0) for fold in folds])
    within = np.array([fold.var(axis=0) / len(fold) for fold in folds])
    F = len(folds)
    expected = (((means - means.mean(axis=0)) ** 2).mean(axis=0) + within.mean(axis=0)) / F
    assert draws.mean(axis=0) == pytest.approx(means.mean(axis=0), abs=0.003)
    assert draws.var(axis=0) == pytest.approx(expected, rel=0.03)
    # a fold bootstrap alone (one user per fold) would miss the within-fold term
    assert np.all(expected > ((means - means.mean(axis=0)) ** 2).mean(axis=0) / F)


def test_two_level_draws_follow_the_exact_distribution_of_a_tiny_case():
    """Two folds (users 0, 1 and 10, 20, 40), enumerated by hand: draw two folds with
    replacement, then each drawn fold's users with replacement; θ* = the mean of the two
    drawn folds' user means. 40,000 draws: every θ* is one of the enumerated values, each
    as often as its exact probability (within 0.01), and the interval is their percentiles."""
    from itertools import product

    folds = [np.array([0.0, 1.0]), np.array([10.0, 20.0, 40.0])]

    def user_means(fold):  # the mean of n_f users drawn with replacement, and its probability
        n = len(fold)
        found: dict[int, float] = {}
        for draw in product(range(n), repeat=n):
            total = int(fold[list(draw)].sum())  # integers: exact, the mean is total / n
            found[total] = found.get(total, 0.0) + n ** -n
        return {total / n: p for total, p in found.items()}

    exact: dict[float, float] = {}
    for first, second in product(range(2), repeat=2):  # the folds drawn, 1/4 each
        for (a, pa), (b, pb) in product(user_means(folds[first]).items(),
                                        user_means(folds[second]).items()):
            theta = round((a + b) / 2, 6)
            exact[theta] = exact.get(theta, 0.0) + pa * pb / 4
    assert sum(exact.values()) == pytest.approx(1)
    settings = Bootstrap(n_resamples=40_000, seed=2)
    draws = two_level_draws([fold[:, None] for fold in folds], settings)[:, 0]
    seen = pd.Series(np.round(draws, 6)).value_counts(normalize=True)
    assert set(seen.index) <= set(exact)
    assert max(abs(seen.get(theta, 0.0) - p) for theta, p in exact.items()) < 0.01
    from sweval.evaluators.stats.resampling import two_level_intervals

    low, high = two_level_intervals([fold[:, None] for fold in folds], settings)
    assert (low[0], high[0]) == pytest.approx(tuple(np.percentile(draws, [2.5, 97.5])))


@pytest.mark.slow
def test_summary_two_level_intervals_come_from_per_user_parquet(users_run, tmp_path):
    directory = tmp_path / "two"
    evaluate_config(EvalConfig.build(**CONFIG, output=str(directory),
                                     summary_bootstrap="two-level"))
    assert (directory / "results.csv").read_bytes() == (users_run / "results.csv").read_bytes()
    summary = pd.read_csv(directory / "summary.csv")
    folds_only = pd.read_csv(users_run / "summary.csv")
    assert list(summary.columns) == list(folds_only.columns)
    per_user = pd.read_parquet(directory / "per_user.parquet")
    settings = Bootstrap(n_resamples=B, seed=7)
    values = UserValues()
    for (fold, algorithm), rows in per_user.groupby(["fold", "algorithm"]):
        rows = rows.sort_values("user")
        columns = {(m, int(k)): part["value"].to_numpy()
                   for (m, k), part in rows.groupby(["metric", "k"])}
        values.add(SimpleNamespace(fold=fold, algorithm=algorithm,
                                   users=np.sort(rows["user"].unique()), values=columns),
                   stratum="all")
    expected = two_level_summary(values, settings)
    merged = summary.merge(expected, on=["algorithm", "stratum", "metric", "k"],
                           suffixes=("", "_hand"))
    assert len(merged) == 3 * 4
    assert merged["ci_low"].to_numpy() == pytest.approx(merged["ci_low_hand"].to_numpy())
    assert merged["ci_high"].to_numpy() == pytest.approx(merged["ci_high_hand"].to_numpy())
    assert not np.allclose(summary["ci_low"], folds_only["ci_low"])  # not the folds' intervals
    # the report, reading the directory back, takes them from summary.csv (it has no users)
    from sweval.evaluators.report.data import load

    report = load(directory).summary
    both = report.merge(summary, on=["algorithm", "stratum", "metric", "k"],
                        suffixes=("", "_file"))
    assert both["ci_low"].to_numpy() == pytest.approx(both["ci_low_file"].to_numpy(),
                                                      nan_ok=True)
