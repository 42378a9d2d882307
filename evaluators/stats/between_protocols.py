"""Between protocols (``sweval compare``, ``significance_protocols.csv``): is a's lead over b
different under protocol P than under Q? The splits differ (folds, LOOCV repetitions, one
leave-last-one-out split), so nothing pairs them: the per-split leads x_i = value(a, P, i) −
value(b, P, i) are compared unpaired with y_j (protocol Q)::

    mean_diff    = mean(x) − mean(y)       interval: resampling.unpaired_intervals
    mann-whitney = scipy.stats.mannwhitneyu(x, y)
    welch        = scipy.stats.ttest_ind(x, y, equal_var=False)

each side needing :data:`~evaluators.stats.paired.MIN_UNITS` splits for a p-value; Holm per
(metric, k, test).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from sweval.evaluators.stats.long_table import blocks, groups, ordered, rows_of, used_values
from sweval.evaluators.stats.paired import MIN_UNITS
from sweval.evaluators.stats.power import holm
from sweval.evaluators.stats.resampling import Bootstrap, unpaired_intervals

MIN_FOLDS = MIN_UNITS
NO_POWER_UNPAIRED = f"fewer than {MIN_FOLDS} splits on a side: the test has no power, no p-value"
#: Columns of ``significance_protocols.csv`` (a's lead over b, one protocol against another).
PROTOCOL_COLUMNS = [
    "metric", "k", "algorithm_a", "algorithm_b", "protocol_a", "protocol_b", "n_folds_a",
    "n_folds_b", "mean_diff", "ci_low", "ci_high", "test", "statistic", "p_value", "p_holm", "note",
]
UNPAIRED_TESTS = ("mann-whitney", "welch")


def unpaired_tests(x: ArrayLike, y: ArrayLike, settings: Bootstrap) -> list[dict[str, Any]]:
    """Mann-Whitney U and Welch's t-test of x against y: one row per test with n_folds_a,
    n_folds_b, mean_diff (mean x − mean y) and its interval, statistic, p_value and note."""
    return _unpaired_rows([({}, x, y)], settings)


def _unpaired_rows(pairs: Sequence[tuple[dict[str, Any], ArrayLike, ArrayLike]],
                   settings: Bootstrap) -> list[dict[str, Any]]:
    """The unpaired rows of many pairs; the tests run once per (n_x, n_y, ties) group (scipy
    chooses Mann-Whitney's method from the sizes and whether any value ties)."""
    from scipy.stats import mannwhitneyu, ttest_ind

    arrays = [(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
              for _, x, y in pairs]
    low, high = unpaired_intervals(arrays, settings)
    results = {test: (np.full(len(pairs), np.nan), np.full(len(pairs), np.nan))
               for test in UNPAIRED_TESTS}
    groups: dict[tuple[int, int, bool], list[int]] = {}
    for i, (a, b) in enumerate(arrays):
        both = np.concatenate([a, b])
        identical = len(a) > 0 and np.all(both == a[0])
        if min(len(a), len(b)) >= MIN_FOLDS and not identical:
            groups.setdefault((len(a), len(b), len(np.unique(both)) < len(both)), []).append(i)
    with warnings.catch_warnings():  # near-constant values: scipy's precision warning
        warnings.simplefilter("ignore", RuntimeWarning)
        for chosen in groups.values():
            xs = np.vstack([arrays[i][0] for i in chosen])
            ys = np.vstack([arrays[i][1] for i in chosen])
            for test, result in (("mann-whitney", mannwhitneyu(xs, ys, axis=1)),
                                 ("welch", ttest_ind(xs, ys, equal_var=False, axis=1))):
                results[test][0][chosen], results[test][1][chosen] = (result.statistic,
                                                                      result.pvalue)
    rows = []
    for i, ((labels, _, _), (a, b)) in enumerate(zip(pairs, arrays, strict=True)):
        common = labels | {"n_folds_a": len(a), "n_folds_b": len(b),
                           "mean_diff": float(a.mean() - b.mean()) if len(a) and len(b)
                           else np.nan, "ci_low": low[i], "ci_high": high[i]}
        for test in UNPAIRED_TESTS:
            statistic, p_value, note = results[test][0][i], results[test][1][i], ""
            if min(len(a), len(b)) < MIN_FOLDS:
                note = NO_POWER_UNPAIRED
            elif len(a) and np.all(np.concatenate([a, b]) == a[0]):
                statistic, p_value, note = 0.0, 1.0, "identical on every split"
            rows.append(common | {"test": test, "statistic": statistic, "p_value": p_value,
                                  "note": note})
    return rows


def compare_protocols(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None
) -> pd.DataFrame:
    """``significance_protocols.csv``: is a's lead over b different under protocol P than under
    Q? The long table of ``sweval compare`` (a ``protocol`` column; stratum ``all``), every pair
    of algorithms both protocols evaluate, unpaired tests; Holm within each (metric, k, test)."""
    used = used_values(results)
    used = used[used["stratum"] == "all"]
    pairs: list[tuple[dict[str, Any], ArrayLike, ArrayLike]] = []
    for (metric, k), wide in blocks(used, ["metric", "k"], ["protocol", "algorithm"]):
        part = used.loc[rows_of(used, ["metric", "k"], (metric, k))]
        names = ordered(list(dict.fromkeys(part["algorithm"])), order)
        protocols = list(dict.fromkeys(part["protocol"]))
        leads: dict[tuple[str, str, str], Any] = {}
        for protocol in protocols:
            for first, second in combinations(names, 2):
                if (protocol, first) in wide.columns and (protocol, second) in wide.columns:
                    x, y = wide[(protocol, first)].to_numpy(), wide[(protocol, second)].to_numpy()
                    both = ~np.isnan(x) & ~np.isnan(y)
                    leads[(protocol, first, second)] = x[both] - y[both]
        for first, second in combinations(names, 2):
            for p_a, p_b in combinations(protocols, 2):
                if (p_a, first, second) in leads and (p_b, first, second) in leads:
                    pairs.append(({"metric": metric, "k": k, "algorithm_a": first,
                                   "algorithm_b": second, "protocol_a": p_a, "protocol_b": p_b},
                                  leads[(p_a, first, second)], leads[(p_b, first, second)]))
    frame = pd.DataFrame(_unpaired_rows(pairs, settings),
                         columns=[c for c in PROTOCOL_COLUMNS if c != "p_holm"])
    frame["p_holm"] = np.nan
    for _, part in groups(frame, ["metric", "k", "test"]):
        frame.loc[part.index, "p_holm"] = holm(part["p_value"].to_numpy(dtype=float))
    frame["k"] = frame["k"].astype("Int64")
    return frame[PROTOCOL_COLUMNS]
