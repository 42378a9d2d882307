"""Is the difference real? Bootstrap intervals over folds, paired tests, Holm's correction.

The fold is SW-EVAL's unit of replication: each fold is one more window of the timeline, scored
by every algorithm. Every interval and test here resamples or pairs folds (the non-skipped values
of ``results.csv``); users within a fold are already averaged into the fold's value.

Confidence interval of a mean over folds (``summary.csv``'s ``ci_low``, ``ci_high``)::

    scipy.stats.bootstrap((values,), np.mean, n_resamples=B, confidence_level=c,
                          method="percentile" | "BCa", rng=np.random.default_rng(seed))

with ``B = --bootstrap``, ``c = --ci``, ``seed = --bootstrap-seed`` and a fresh generator of that
seed for every interval (so an interval does not depend on which other intervals the run
computes). One value: no interval (empty); all values equal: the interval is that value.

Paired comparison of algorithms a and b at one (stratum, metric, k), over the folds F_ab where
both have a value::

    d_f       = value(a, f) − value(b, f)                 f ∈ F_ab, n_folds = |F_ab|
    mean_diff = mean(d)        with the interval above applied to d
    wilcoxon  = scipy.stats.wilcoxon(d, method=m)         signed-rank, zero differences dropped
                                                          (scipy's "wilcox"); every d_f = 0: p = 1
                m = "approx" when d has zeros or tied |d_f| (the normal approximation with
                the tie correction and no continuity correction: R's wilcox.test(d,
                exact = FALSE, correct = FALSE)), else scipy's "auto" (exact up
                to 50 folds); scipy's own choice for ties, a permutation test over all 2^n
                signs in Python, takes seconds per test
    t-test    = scipy.stats.ttest_1samp(d, 0)            = ttest_rel(value(a), value(b));
                                                          every d_f = 0: statistic 0, p = 1;
                                                          every d_f equal, not 0: no p-value
                                                          (no variance; a note says so)

d is rounded to 12 decimals first: the values carry 10 significant digits, and their float
difference noise (1e-17) is not a difference (with it a constant lead gave t = 4e15).

Between strata s and s' (the logging-policy effect), the paired unit is still the fold, and the
difference is a difference of leads::

    d_f = (value(a, s, f) − value(b, s, f)) − (value(a, s', f) − value(b, s', f))

Between protocols P and Q of ``sweval compare`` the splits differ (folds, LOOCV repetitions, one
leave-last-one-out split), so nothing pairs them: a's lead over b is compared unpaired, the
per-split leads x_i = value(a, P, i) − value(b, P, i) against y_j (Q)::

    mean_diff    = mean(x) − mean(y)      interval: scipy.stats.bootstrap((x, y), statistic) with
                                          x and y resampled independently (same settings)
    mann-whitney = scipy.stats.mannwhitneyu(x, y)
    welch        = scipy.stats.ttest_ind(x, y, equal_var=False)

and each side needs :data:`MIN_FOLDS` splits for a p-value.

Holm's correction, per family = the rows of one test at one (stratum, metric, k) (between strata:
at one (metric, k)), over the m rows that have a p-value, sorted p_(1) ≤ … ≤ p_(m)::

    p_holm_(i) = min(1, max_{j ≤ i} (m − j + 1) · p_(j))

With fewer than :data:`MIN_FOLDS` paired folds a test has no power (Wilcoxon's smallest
two-sided p-value over 4 folds is 0.125): ``statistic``, ``p_value`` and ``p_holm`` stay empty
and ``note`` says so; the mean difference and its interval are still given.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from sweval.evaluators.run.results import is_best, ranking_score

#: Fewer paired folds than this: the tests are not run.
MIN_FOLDS = 5
#: The level at which a lead is called significant in the summary and the report.
ALPHA = 0.05
TESTS = ("wilcoxon", "t-test")
NO_POWER = f"fewer than {MIN_FOLDS} paired folds: the test has no power, no p-value"
NO_POWER_UNPAIRED = f"fewer than {MIN_FOLDS} splits on a side: the test has no power, no p-value"
#: Columns of ``significance.csv``.
SIGNIFICANCE_COLUMNS = [
    "stratum", "metric", "k", "algorithm_a", "algorithm_b", "n_folds", "mean_diff", "ci_low",
    "ci_high", "test", "statistic", "p_value", "p_holm", "note",
]
#: Columns of ``significance_strata.csv`` (the same comparison between two strata).
STRATA_COLUMNS = [
    "metric", "k", "algorithm_a", "algorithm_b", "stratum_a", "stratum_b", "n_folds",
    "mean_diff", "ci_low", "ci_high", "test", "statistic", "p_value", "p_holm", "note",
]
#: Columns of ``significance_protocols.csv`` (a's lead over b, one protocol against another).
PROTOCOL_COLUMNS = [
    "metric", "k", "algorithm_a", "algorithm_b", "protocol_a", "protocol_b", "n_folds_a",
    "n_folds_b", "mean_diff", "ci_low", "ci_high", "test", "statistic", "p_value", "p_holm", "note",
]
UNPAIRED_TESTS = ("mann-whitney", "welch")
_KEYS = ["stratum", "metric", "k"]


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are computed: level, method, resamples, seed (``--ci``, ``--ci-method``,
    ``--bootstrap``, ``--bootstrap-seed``)."""

    level: float = 0.95
    method: Literal["percentile", "bca"] = "percentile"
    n_resamples: int = 9999
    seed: int = 0

    @classmethod
    def of(cls, config: Any) -> Bootstrap:
        """The settings of an :class:`~evaluators.config.model.EvalConfig` or of its dump (a run's
        ``config.json``); a missing field takes its default."""
        get = config.get if isinstance(config, Mapping) else (
            lambda name, default: getattr(config, name, default))
        default = cls()
        return cls(
            level=float(get("ci", default.level)),
            method=get("ci_method", default.method),
            n_resamples=int(get("bootstrap", default.n_resamples)),
            seed=int(get("bootstrap_seed", default.seed)),
        )


def _bootstrap(samples: tuple[NDArray[np.float64], ...], statistic: Any,
               settings: Bootstrap) -> tuple[float, float]:
    from scipy.stats import bootstrap

    result = bootstrap(
        samples, statistic, n_resamples=settings.n_resamples, confidence_level=settings.level,
        method="BCa" if settings.method == "bca" else "percentile",
        rng=np.random.default_rng(settings.seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def interval(values: ArrayLike, settings: Bootstrap) -> tuple[float, float]:
    """The bootstrap interval of the mean of ``values`` (see the module docstring)."""
    data = np.asarray(values, dtype=np.float64)
    if len(data) < 2:
        return np.nan, np.nan
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])
    return _bootstrap((data,), np.mean, settings)


def holm(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm's step-down adjusted p-values; NaN entries stay NaN and are not counted in m."""
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    m = len(order)
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order]) if m else np.array([])
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


#: Decimals the paired differences are rounded to before testing (as tuning and the rankings
#: compare values): a - b of values written with 10 significant digits carries float noise.
DIFFERENCE_DECIMALS = 12
#: The t-test's note when a leads b by the same amount on every fold.
CONSTANT_DIFFERENCE = "the same difference on every fold: no variance, the t-test is undefined"


def _test_rows(
    common: dict[str, Any], tests: Sequence[str], run: Any, *, no_power: str | None,
    identical: str | None,
) -> list[dict[str, Any]]:
    """One row per test: ``common`` plus test, statistic, p_value and note. ``no_power``: the
    note when too few values (no p-value); ``identical``: the note when every value is equal
    (statistic 0, p = 1); else ``run(test)`` gives scipy's result."""
    rows = []
    for test in tests:
        statistic = p_value = np.nan
        note = no_power or identical or ""
        if no_power is None and identical is not None:
            statistic, p_value = 0.0, 1.0
        elif no_power is None:
            with warnings.catch_warnings():  # near-constant values: scipy's precision warning
                warnings.simplefilter("ignore", RuntimeWarning)
                result = run(test)
            statistic, p_value = float(result.statistic), float(result.pvalue)
        rows.append(common | {"test": test, "statistic": statistic, "p_value": p_value,
                              "note": note})
    return rows


def paired_tests(x: ArrayLike, y: ArrayLike, settings: Bootstrap) -> list[dict[str, Any]]:
    """Wilcoxon and paired t-test of x against y (same folds, same order): one row per test
    with n_folds, mean_diff (of x − y) and its interval, statistic, p_value and note."""
    from scipy.stats import ttest_1samp, wilcoxon

    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    d = np.round(a - b, DIFFERENCE_DECIMALS)  # float noise is not a difference
    low, high = interval(d, settings)
    common = {"n_folds": len(d), "mean_diff": float(d.mean()) if len(d) else np.nan,
              "ci_low": low, "ci_high": high}
    rows = _test_rows(
        common, TESTS,
        lambda test: wilcoxon(d, method=wilcoxon_method(d)) if test == "wilcoxon"
        else ttest_1samp(d, 0.0),  # = ttest_rel(a, b), on the rounded differences
        no_power=NO_POWER if len(d) < MIN_FOLDS else None,
        identical="identical on every fold" if np.all(d == 0) else None,
    )
    if len(d) >= MIN_FOLDS and d[0] != 0 and np.all(d == d[0]):
        for row in rows:
            if row["test"] == "t-test":
                row.update(statistic=np.nan, p_value=np.nan, note=CONSTANT_DIFFERENCE)
    return rows


def _difference_of_means(x: NDArray[np.float64], y: NDArray[np.float64], axis: int = -1) -> Any:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def unpaired_interval(x: ArrayLike, y: ArrayLike, settings: Bootstrap) -> tuple[float, float]:
    """The bootstrap interval of mean(x) − mean(y), x and y resampled independently."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(a) < 2 or len(b) < 2:
        return np.nan, np.nan
    if np.all(a == a[0]) and np.all(b == b[0]):
        return float(a[0] - b[0]), float(a[0] - b[0])
    return _bootstrap((a, b), _difference_of_means, settings)


def unpaired_tests(x: ArrayLike, y: ArrayLike, settings: Bootstrap) -> list[dict[str, Any]]:
    """Mann-Whitney U and Welch's t-test of x against y: one row per test with n_folds_a,
    n_folds_b, mean_diff (mean x − mean y) and its interval, statistic, p_value and note."""
    from scipy.stats import mannwhitneyu, ttest_ind

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    low, high = unpaired_interval(a, b, settings)
    common = {"n_folds_a": len(a), "n_folds_b": len(b),
              "mean_diff": float(a.mean() - b.mean()) if len(a) and len(b) else np.nan,
              "ci_low": low, "ci_high": high}
    return _test_rows(
        common, UNPAIRED_TESTS,
        lambda test: mannwhitneyu(a, b) if test == "mann-whitney"
        else ttest_ind(a, b, equal_var=False),
        no_power=NO_POWER_UNPAIRED if min(len(a), len(b)) < MIN_FOLDS else None,
        identical="identical on every split"
        if len(a) and np.all(np.concatenate([a, b]) == a[0]) else None,
    )


def wilcoxon_method(d: NDArray[np.float64]) -> str:
    """``approx`` when the differences have zeros or ties, else ``auto`` (module docstring)."""
    magnitudes = np.abs(d)
    ties = len(np.unique(magnitudes)) < len(magnitudes)
    return "approx" if ties or np.any(d == 0) else "auto"


def _used(results: pd.DataFrame) -> pd.DataFrame:
    """The non-skipped values, as ``results.csv`` writes them (10 significant digits): the
    intervals and tests are then exactly reproducible from the file (BCa's bias correction
    counts resampled means below the observed one, where the 11th digit can flip a tie)."""
    used = results[~results["skipped"] & results["value"].notna()]
    written = [float(f"{value:.10g}") for value in used["value"]]
    return used.assign(k=used["k"].astype("Int64"), value=written)


def _groups(frame: pd.DataFrame, keys: list[str]) -> Any:
    return frame.groupby(keys, dropna=False, sort=False)


def with_intervals(
    summary: pd.DataFrame, results: pd.DataFrame, settings: Bootstrap
) -> pd.DataFrame:
    """``summary`` with ``ci_low`` and ``ci_high`` of each mean, from ``results``' values over the
    folds it averages (keys: algorithm, stratum, metric, k, and protocol when both have one)."""
    keys = [c for c in ("protocol", "algorithm", "stratum", "metric", "k")
            if c in summary.columns and c in results.columns]
    rows = [
        dict(zip(keys, key, strict=True)) | dict(zip(("ci_low", "ci_high"),
                                                     interval(part["value"], settings)))
        for key, part in _groups(_used(results), keys)
    ]
    return attach_intervals(summary, pd.DataFrame(rows, columns=[*keys, "ci_low", "ci_high"]))


def attach_intervals(summary: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with the ``ci_low`` and ``ci_high`` of ``intervals`` (another summary of the
    same results, or :func:`with_intervals`' own table), matched on the keys both have."""
    keys = [c for c in ("protocol", "algorithm", "stratum", "metric", "k")
            if c in summary.columns and c in intervals.columns]
    intervals = intervals[[*keys, "ci_low", "ci_high"]].copy()
    intervals["k"] = intervals["k"].astype("Int64")
    return summary.assign(k=summary["k"].astype("Int64")).merge(intervals, on=keys, how="left")


def _ordered(names: Sequence[str], order: Sequence[str] | None) -> list[str]:
    rank = {name: i for i, name in enumerate(order or [])}
    return sorted(names, key=lambda name: (rank.get(name, len(rank)), list(names).index(name)))


def _holm_table(rows: list[dict[str, Any]], columns: list[str], family: list[str]
                ) -> pd.DataFrame:
    """The test rows as a table of ``columns``, with ``p_holm`` per family (its keys + test)."""
    frame = pd.DataFrame(rows, columns=[c for c in columns if c != "p_holm"])
    frame["p_holm"] = np.nan
    for _, part in _groups(frame, [*family, "test"]):
        frame.loc[part.index, "p_holm"] = holm(part["p_value"].to_numpy())
    frame["k"] = frame["k"].astype("Int64")
    return frame[columns]


def compare_algorithms(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None
) -> pd.DataFrame:
    """``significance.csv``: every pair of algorithms at every (stratum, metric, k), paired over
    the folds both scored, both tests, Holm within each (stratum, metric, k, test).

    ``order``: the algorithms' order (a before b); default: as they appear in ``results``.
    """
    rows: list[dict[str, Any]] = []
    for key, part in _groups(_used(results), _KEYS):
        wide = part.pivot_table(index="fold", columns="algorithm", values="value",
                                aggfunc="first")
        names = _ordered(list(dict.fromkeys(part["algorithm"])), order)
        for first, second in combinations(names, 2):
            pair = wide[[first, second]].dropna()
            for row in paired_tests(pair[first], pair[second], settings):
                rows.append(dict(zip(_KEYS, key, strict=True))
                            | {"algorithm_a": first, "algorithm_b": second} | row)
    return _holm_table(rows, SIGNIFICANCE_COLUMNS, _KEYS)


def compare_strata(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None
) -> pd.DataFrame:
    """``significance_strata.csv``: is a's lead over b different in stratum s than in s'?
    Every pair of algorithms and every pair of strata other than ``all``, paired over the folds
    where all four values exist; Holm within each (metric, k, test)."""
    used = _used(results)
    used = used[used["stratum"] != "all"]
    rows: list[dict[str, Any]] = []
    for (metric, k), part in _groups(used, ["metric", "k"]):
        wide = part.pivot_table(index="fold", columns=["stratum", "algorithm"], values="value",
                                aggfunc="first")
        names = _ordered(list(dict.fromkeys(part["algorithm"])), order)
        strata = list(dict.fromkeys(part["stratum"]))
        for first, second in combinations(names, 2):
            for s_a, s_b in combinations(strata, 2):
                columns = [(s_a, first), (s_a, second), (s_b, first), (s_b, second)]
                if not all(c in wide.columns for c in columns):
                    continue
                four = wide[columns].dropna()
                lead_a = four[(s_a, first)] - four[(s_a, second)]
                lead_b = four[(s_b, first)] - four[(s_b, second)]
                for row in paired_tests(lead_a, lead_b, settings):
                    rows.append({"metric": metric, "k": k, "algorithm_a": first,
                                 "algorithm_b": second, "stratum_a": s_a, "stratum_b": s_b}
                                | row)
    return _holm_table(rows, STRATA_COLUMNS, ["metric", "k"])


def compare_protocols(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None
) -> pd.DataFrame:
    """``significance_protocols.csv``: is a's lead over b different under protocol P than under
    Q? The long table of ``sweval compare`` (a ``protocol`` column; stratum ``all``), every pair
    of algorithms both protocols evaluate, unpaired tests; Holm within each (metric, k, test)."""
    used = _used(results)
    used = used[used["stratum"] == "all"]
    rows: list[dict[str, Any]] = []
    for (metric, k), part in _groups(used, ["metric", "k"]):
        names = _ordered(list(dict.fromkeys(part["algorithm"])), order)
        protocols = list(dict.fromkeys(part["protocol"]))
        leads: dict[tuple[str, str, str], pd.Series] = {}
        for protocol in protocols:
            wide = part[part["protocol"] == protocol].pivot_table(
                index="fold", columns="algorithm", values="value", aggfunc="first")
            for first, second in combinations(names, 2):
                if first in wide.columns and second in wide.columns:
                    pair = wide[[first, second]].dropna()
                    leads[(protocol, first, second)] = pair[first] - pair[second]
        for first, second in combinations(names, 2):
            for p_a, p_b in combinations(protocols, 2):
                if (p_a, first, second) not in leads or (p_b, first, second) not in leads:
                    continue
                for row in unpaired_tests(leads[(p_a, first, second)],
                                          leads[(p_b, first, second)], settings):
                    rows.append({"metric": metric, "k": k, "algorithm_a": first,
                                 "algorithm_b": second, "protocol_a": p_a, "protocol_b": p_b}
                                | row)
    return _holm_table(rows, PROTOCOL_COLUMNS, ["metric", "k"])


def compare_algorithms_per_protocol(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None
) -> pd.DataFrame:
    """:func:`compare_algorithms` within each protocol of a ``protocol`` column (first)."""
    parts = []
    for protocol, part in results.groupby("protocol", sort=False):
        table = compare_algorithms(part.drop(columns="protocol"), settings, order)
        table.insert(0, "protocol", protocol)
        parts.append(table)
    if not parts:
        return pd.DataFrame(columns=["protocol", *SIGNIFICANCE_COLUMNS])
    return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class Lead:
    """The best algorithm's lead over the runner-up at one (stratum, metric, k)."""

    best: str
    runner_up: str
    n_folds: int
    mean_diff: float
    ci_low: float
    ci_high: float
    p_holm: float
    note: str

    @property
    def significant(self) -> bool:
        return bool(np.isfinite(self.p_holm) and self.p_holm < ALPHA)


def best_lead(
    summary: pd.DataFrame, significance: pd.DataFrame, *, stratum: str, metric: str,
    k: int | None, test: str = "wilcoxon",
) -> Lead | None:
    """The lead of the best over the runner-up (None with fewer than two means).

    The best is the summary's (:func:`~evaluators.run.results.is_best`; of ties, the first in
    :func:`ranked_algorithms`' order), the runner-up the next of
    :func:`ranked_algorithms`. That can be a series scored on fewer folds and ahead of the best
    on them (Δ% > 0): then ``mean_diff`` is negative, the best behind on the folds both have."""
    part = summary[(summary["stratum"] == stratum) & (summary["metric"] == metric)
                   & _k_is(summary["k"], k) & summary["mean"].notna()]
    if len(part) < 2:
        return None
    ranked = ranked_algorithms(part)
    summary_best = (set(part.loc[is_best(part), "algorithm"].astype(str))
                    if "delta" in part else set())
    best = next((a for a in ranked if a in summary_best), ranked[0])
    second = next(a for a in ranked if a != best)
    rows = significance[(significance["stratum"] == stratum) & (significance["metric"] == metric)
                        & _k_is(significance["k"], k) & (significance["test"] == test)]
    for a, b, sign in ((best, second, 1.0), (second, best, -1.0)):
        row = rows[(rows["algorithm_a"] == a) & (rows["algorithm_b"] == b)]
        if len(row):
            r = row.iloc[0]
            low, high = sorted((sign * r["ci_low"], sign * r["ci_high"]))
            return Lead(best=best, runner_up=second, n_folds=int(r["n_folds"]),
                        mean_diff=sign * float(r["mean_diff"]), ci_low=low, ci_high=high,
                        p_holm=float(r["p_holm"]), note=str(r["note"]))
    return None


def ranked_algorithms(part: pd.DataFrame) -> list[str]:
    """The algorithms of one (stratum, metric, k) of a summary, best first by
    :func:`~evaluators.run.results.ranking_score` compared to 12 decimals (float noise is no
    lead); ties keep their order."""
    score = np.round(ranking_score(part).to_numpy(dtype=float), 12)
    order = part.assign(_score=score).sort_values("_score", ascending=False, kind="stable")
    return order["algorithm"].astype(str).tolist()


def _k_is(column: pd.Series, k: int | None) -> pd.Series:
    return column.isna() if k is None else (column == k).fillna(False).astype(bool)
