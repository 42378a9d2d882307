"""Paired tests of two series on the same units (folds, or users), with effect sizes: one call
for many pairs, each pair's numbers equal to scipy's own functions on its differences.

For one pair, x (algorithm a) and y (b) on the same n units in the same order::

    d          = round(x − y, 12)      float noise of values written with 10 significant digits
                                       is not a difference (with it a constant lead gave t = 4e15)
    mean_diff  = mean(d), rel_diff = mean(x) / mean(y) − 1, effect = mean(d) / sd(d) (Cohen's
                 d_z), each with its bootstrap interval (evaluators.stats.resampling)
    wilcoxon   = scipy.stats.wilcoxon(d, method=m)    signed-rank, zero differences dropped
                                                      (scipy's "wilcox"); every d = 0: p = 1
                 m = "approx" when d has zeros or tied |d| (the normal approximation with the
                 tie correction and no continuity correction: R's wilcox.test(d, exact = FALSE,
                 correct = FALSE)), else scipy's "auto" (exact up to 50 units)
    rank_biserial = (T⁺ − T⁻) / (T⁺ + T⁻)   the Wilcoxon row's matched-pairs rank-biserial
                 correlation, T± the sums of the ranks of |d| over the non-zero d of each sign
    t-test     = scipy.stats.ttest_1samp(d, 0)        = ttest_rel(x, y); every d = 0:
                                                      statistic 0, p = 1; every d equal, not 0:
                                                      no p-value (no variance; a note says so)
    permutation = scipy.stats.permutation_test((d,), mean, permutation_type="samples",
                 n_resamples=B, rng=np.random.default_rng(seed))   the sign-flip test of
                 mean(d), two-sided: exact over all 2^n signs when 2^n ≤ B, else B random
                 flips; run when n ≤ PERMUTATION_MAX_N (where the t-test's normal theory is
                 weakest), computed here for all pairs of one n at once with scipy's draws

With fewer than :data:`MIN_UNITS` units no test is run (Wilcoxon's smallest two-sided p over 4
units is 0.125): ``statistic`` and ``p_value`` stay empty and ``note`` says so; the differences
and their intervals are still given. ``min_p_reachable`` and ``mde``: :mod:`.power`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweval.evaluators.stats.resampling import Bootstrap, paired_intervals

#: Fewer paired units than this: the tests are not run.
MIN_UNITS = 5
#: The permutation test is run for pairs of at most this many units.
PERMUTATION_MAX_N = 50
#: Decimals the paired differences are rounded to before testing.
DIFFERENCE_DECIMALS = 12
TESTS = ("wilcoxon", "t-test", "permutation")
#: The t-test's note when a leads b by the same amount on every unit.
CONSTANT_DIFFERENCE = "the same difference on every fold: no variance, the t-test is undefined"


def no_power_note(unit: str) -> str:
    """The note of a pair with fewer than :data:`MIN_UNITS` units (``folds`` or ``users``)."""
    return f"fewer than {MIN_UNITS} paired {unit}: the test has no power, no p-value"


def constant_note(unit: str) -> str:
    return CONSTANT_DIFFERENCE.replace("every fold", f"every {unit.rstrip('s')}")


@dataclass
class Pair:
    """Two series on the same units: ``labels`` (the row's keys), ``x`` and ``y`` (same order),
    ``n_folds`` (the folds the units come from)."""

    labels: dict[str, Any]
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    n_folds: int


def wilcoxon_method(d: NDArray[np.float64]) -> str:
    """``approx`` when the differences have zeros or ties, else ``auto`` (module docstring)."""
    magnitudes = np.abs(d)
    ties = len(np.unique(magnitudes)) < len(magnitudes)
    return "approx" if ties or np.any(d == 0) else "auto"


def paired_rows(pairs: Sequence[Pair], settings: Bootstrap, *, unit: str = "folds",
                tests: Sequence[str] = TESTS) -> list[dict[str, Any]]:
    """One row per pair and test (the permutation test only where n ≤ PERMUTATION_MAX_N):
    ``labels`` plus unit, n_folds, n_units, the differences with their intervals, test,
    statistic, p_value, rank_biserial, p_floor (the smallest p before correction) and note.
    Pairs of the same n share their resamples (a fresh generator of the seed for each)."""
    rows: list[dict[str, Any]] = []
    groups: dict[int, list[int]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(len(pair.x), []).append(i)
    ordered: dict[int, list[dict[str, Any]]] = {}
    for n, positions in groups.items():
        x = np.column_stack([np.asarray(pairs[i].x, dtype=np.float64) for i in positions]
                            ) if n else np.zeros((0, len(positions)))
        y = np.column_stack([np.asarray(pairs[i].y, dtype=np.float64) for i in positions]
                            ) if n else np.zeros((0, len(positions)))
        for i, made in zip(positions, _group_rows(x, y, settings, unit, tests), strict=True):
            ordered[i] = [pairs[i].labels | {"n_folds": pairs[i].n_folds} | row for row in made]
    for i in range(len(pairs)):
        rows += ordered[i]
    return rows


def _group_rows(x: NDArray[np.float64], y: NDArray[np.float64], settings: Bootstrap, unit: str,
                tests: Sequence[str]) -> list[list[dict[str, Any]]]:
    """The rows of each column of x and y (n × m, the same n)."""
    n, m = x.shape
    d = np.round(x - y, DIFFERENCE_DECIMALS)
    intervals = paired_intervals(x, y, d, settings)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_d = d.mean(axis=0) if n else np.full(m, np.nan)
        rel = (x.mean(axis=0) / y.mean(axis=0) - 1) if n else np.full(m, np.nan)
        sd = d.std(axis=0, ddof=1) if n > 1 else np.full(m, np.nan)
        effect = np.where(sd > 0, mean_d / sd, np.nan)
    results = {test: _run(test, d, settings) for test in tests
               if test != "permutation" or n <= PERMUTATION_MAX_N}
    biserial = rank_biserial(d)
    identical = np.all(d == 0, axis=0) if n else np.zeros(m, dtype=bool)
    constant = np.all(d == d[:1], axis=0) & ~identical if n else np.zeros(m, dtype=bool)
    out = []
    for j in range(m):
        common = {
            "unit": unit, "n_units": n, "mean_diff": mean_d[j],
            "ci_low": intervals.mean[0][j], "ci_high": intervals.mean[1][j],
            "rel_diff": rel[j], "rel_ci_low": intervals.rel[0][j],
            "rel_ci_high": intervals.rel[1][j], "effect": effect[j],
            "effect_ci_low": intervals.effect[0][j], "effect_ci_high": intervals.effect[1][j],
            "sd_diff": sd[j],
        }
        rows = []
        for test, (statistic, p_value, floor) in results.items():
            note = ""
            stat, p = statistic[j], p_value[j]
            if n < MIN_UNITS:
                stat, p, note = np.nan, np.nan, no_power_note(unit)
            elif identical[j]:
                stat, p, note = 0.0, 1.0, f"identical on every {unit.rstrip('s')}"
            elif constant[j] and test == "t-test":
                stat, p, note = np.nan, np.nan, constant_note(unit)
            rows.append(common | {
                "test": test, "statistic": stat, "p_value": p,
                "rank_biserial": biserial[j] if test == "wilcoxon" else np.nan,
                "p_floor": floor[j], "note": note})
        out.append(rows)
    return out


def _run(test: str, d: NDArray[np.float64], settings: Bootstrap
         ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Statistic, p-value and floor of ``test`` for every column of d (n × m); NaN where the
    test cannot run (fewer than MIN_UNITS units, every d = 0)."""
    n, m = d.shape
    statistic, p_value, floor = (np.full(m, np.nan) for _ in range(3))
    if test == "t-test":
        floor[:] = 0.0
    runnable = np.flatnonzero(~np.all(d == 0, axis=0)) if n >= MIN_UNITS else np.array([], int)
    if not len(runnable):
        if test != "t-test":
            floor[:] = 1.0 if n else np.nan
        return statistic, p_value, floor
    if test != "t-test":
        floor[:] = 1.0  # every d = 0 gives p = 1
    with warnings.catch_warnings():  # near-constant values: scipy's precision warning
        warnings.simplefilter("ignore", RuntimeWarning)
        if test == "t-test":
            from scipy.stats import ttest_1samp

            result = ttest_1samp(d[:, runnable], 0.0, axis=0)
            statistic[runnable], p_value[runnable] = result.statistic, result.pvalue
        elif test == "wilcoxon":
            _wilcoxon(d, runnable, statistic, p_value, floor)
        else:
            sub = d[:, runnable]
            statistic[runnable] = sub.mean(axis=0)
            p_value[runnable] = sign_flip_p(sub, settings)
            floor[runnable] = sign_flip_p(np.abs(sub), settings)
    return statistic, p_value, floor


def _wilcoxon(d: NDArray[np.float64], columns: NDArray[np.int64], statistic: NDArray[np.float64],
              p_value: NDArray[np.float64], floor: NDArray[np.float64]) -> None:
    """scipy's Wilcoxon test of the given columns, those of one method at a time; the floor is
    the test of |d| (every difference of one sign)."""
    from scipy.stats import wilcoxon

    methods: dict[str, list[int]] = {}
    for j in columns:
        methods.setdefault(wilcoxon_method(d[:, j]), []).append(int(j))
    for method, chosen in methods.items():
        result = wilcoxon(d[:, chosen], method=method, axis=0)
        statistic[chosen], p_value[chosen] = result.statistic, result.pvalue
        floor[chosen] = wilcoxon(np.abs(d[:, chosen]), method=method, axis=0).pvalue


def rank_biserial(d: NDArray[np.float64]) -> NDArray[np.float64]:
    """(T⁺ − T⁻) / (T⁺ + T⁻) per column of d (n × m): the ranks of |d| among the non-zero d,
    ties averaged (scipy.stats.rankdata); NaN where every d = 0."""
    from scipy.stats import rankdata

    n, m = d.shape
    out = np.full(m, np.nan)
    for j in range(m):
        nonzero = d[d[:, j] != 0, j]
        if len(nonzero):
            ranks = rankdata(np.abs(nonzero))
            out[j] = (ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum()
    return out


#: Elements per block of the sign-flip null distribution (permutations × units × columns).
_BLOCK = 4_000_000


def sign_flip_p(d: NDArray[np.float64], settings: Bootstrap) -> NDArray[np.float64]:
    """The two-sided p-value of scipy's paired permutation test of mean(d) for each column of
    d (n × m), with scipy's own draws (module docstring): exact over the 2^n signs when
    2^n ≤ B, else B random flips (``rng.permuted`` of (d, −d) for each unit, as scipy draws
    them) with the +1 adjustment; ties within 100 ε of the observed mean count as reaching it.
    """
    n, m = d.shape
    total = 2**n
    if total <= settings.n_resamples:
        first = np.array(list(product((0, 1), repeat=n)), dtype=np.int8)
        n_null, adjustment = total, 0
    else:
        rng = np.random.default_rng(settings.seed)
        order = rng.permuted(np.tile(np.arange(2), (settings.n_resamples, n, 1)), axis=-1)
        first = order[..., 0].astype(np.int8)
        n_null, adjustment = settings.n_resamples, 1
    signs = 1.0 - 2.0 * first  # 0: +d, 1: −d
    columns = np.ascontiguousarray(d.T)
    observed = np.array([np.mean(column) for column in columns])
    gamma = np.abs(np.finfo(np.float64).eps * 100 * observed)
    less = np.zeros(m)
    greater = np.zeros(m)
    step = max(1, _BLOCK // max(n_null * n, 1))
    for start in range(0, m, step):
        block = columns[start:start + step]  # c × n
        null = np.mean(signs[None, :, :] * block[:, None, :], axis=-1)  # c × n_null
        less[start:start + step] = np.count_nonzero(
            null <= (observed + gamma)[start:start + step, None], axis=1)
        greater[start:start + step] = np.count_nonzero(
            null >= (observed - gamma)[start:start + step, None], axis=1)
    p_less = (less + adjustment) / (n_null + adjustment)
    p_greater = (greater + adjustment) / (n_null + adjustment)
    return np.clip(np.minimum(p_less, p_greater) * 2, 0.0, 1.0)
