"""Honest hyper-parameter tuning on the timeline: nested choice on the windows before each fold.

A grid (``--tune item-knn.n_neighbors=10,50,200``, the product of every ``--tune`` of one
algorithm) makes candidates (:mod:`evaluators.stats.tuning_candidates`), each an ordinary
variant whose units every fold computes. The tuned algorithm ``item-knn[tuned]`` is then scored
on test fold f with the candidate chosen on validation windows that all end at or before t_f::

    rolling (default)   fold f: the M folds before f (f−M .. f−1; skipped ones ignored)
    once                every fold ≥ M: the M folds before the first test fold (0 .. M−1)

    choice = the candidate with the best mean ``--tune-metric`` over those windows;
             ties (equal to 12 significant digits) go to the earlier candidate in grid order

Fold f−1's window is [t_{f−1}, t_f) and its model trains on D_{t_{f−1}}: nothing at or after t_f
reaches the choice. Folds without a validation window (the first M, or M skipped ones) have no
tuned value and say why. Beside the tuned series, the *oracle* (the candidate with the best mean
over the tuned series' test folds themselves, what picking by the test results gives) and its
*optimism* = oracle mean / tuned mean − 1.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.stats.tuning_candidates import Search, searches, tune_metric

TUNING_COLUMNS = [
    "fold", "algorithm", "candidate", "params", "validation_value", "n_validation_windows",
    "chosen", "stratum",
]
OPTIMISM_COLUMNS = [
    "algorithm", "metric", "k", "tuned_mean", "n_folds", "oracle", "oracle_mean", "optimism",
]


def fold_values(
    results: pd.DataFrame, metric: str, k: int | None, stratum: str = "all"
) -> pd.DataFrame:
    """fold × algorithm values of one metric (NaN for skipped folds) in one stratum."""
    rows = results[(results["stratum"] == stratum) & (results["metric"] == metric)]
    rows = rows[rows["k"].isna()] if k is None else rows[rows["k"] == k]
    return rows.pivot_table(index="fold", columns="algorithm", values="value", dropna=False)


def validation_folds(folds: list[int], used: set[int], fold: int, config: EvalConfig) -> list[int]:
    """The windows the choice for test fold ``fold`` reads (all end at or before its start)."""
    m = config.tune_windows
    if config.tune_mode == "once":
        first = folds[:m]
        return [f for f in first if f in used] if fold >= m else []
    return [f for f in range(fold - m, fold) if f in used] if fold >= m else []


def tune(
    results: pd.DataFrame, config: EvalConfig, found: list[Search] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tuned series' rows (every metric, relabelled from the chosen candidate) and
    ``tuning.csv``: one row per (test fold, algorithm, candidate, stratum).

    Each stratum chooses on its own validation values (``--stratify-by``: a stratum is the
    protocol run on that policy's data, or on its users), so the tuned series of a stratum
    may use another candidate than that of all users on the same fold.

    A candidate whose unit failed on one of a choice's validation windows has no mean there
    (``validation_value`` empty, ``n_validation_windows`` counts the windows it has) and cannot
    be chosen: means over different windows do not compare. When the chosen candidate failed on
    the test fold itself, or every candidate failed on a window, the tuned series has no value
    on that fold and its ``skip_reason`` says so."""
    metric, k = tune_metric(config)
    folds = sorted(int(f) for f in results["fold"].unique())
    found = searches(config) if found is None else found
    added, choices = [], []
    for stratum in dict.fromkeys(results["stratum"]):
        mine = results[results["stratum"] == stratum]
        values = fold_values(mine, metric, k, stratum)
        used = {int(f) for f in mine.loc[~mine["skipped"].astype(bool), "fold"].unique()}
        for search in found:
            valid = values.reindex(index=folds, columns=search.candidates)
            for fold in folds:
                windows = validation_folds(folds, used, fold, config)  # not skipped by u_min
                window_values = valid.loc[windows].to_numpy()  # windows × candidates
                counts = np.isfinite(window_values).sum(axis=0)  # a failed unit has no value
                means = [float(window_values[:, i].mean())
                         if windows and counts[i] == len(windows) else np.nan
                         for i in range(len(search.candidates))]
                rounded = np.round(means, 12)
                chosen = int(np.nanargmax(rounded)) if not np.isnan(rounded).all() else None
                for i, (label, params) in enumerate(
                        zip(search.candidates, search.params, strict=True)):
                    choices.append({
                        "fold": fold, "algorithm": search.label, "candidate": label,
                        "params": json.dumps(params, sort_keys=True),
                        "validation_value": means[i], "n_validation_windows": int(counts[i]),
                        "chosen": i == chosen, "stratum": stratum,
                    })
                added.append(_tuned_rows(mine, fold, search, chosen, used, bool(windows),
                                         config))
    tuned = pd.concat(added, ignore_index=True) if added else results.iloc[:0]
    return tuned, pd.DataFrame(choices, columns=TUNING_COLUMNS)


def _tuned_rows(
    results: pd.DataFrame, fold: int, search: Search, chosen: int | None, used: set[int],
    has_windows: bool, config: EvalConfig,
) -> pd.DataFrame:
    """The tuned series' rows on one fold: the chosen candidate's, relabelled; without a value
    (and the reason) when the fold is skipped, no candidate could be chosen or the chosen one's
    unit failed here. Rows without a value copy the fold's shape (strata, metrics, users) from
    the first candidate with rows on it, else from any algorithm's."""
    on_fold = results[results["fold"] == fold]
    label = search.candidates[chosen] if chosen is not None else None
    rows = on_fold[on_fold["algorithm"] == label]
    if fold in used and label is not None and len(rows):
        return rows.assign(algorithm=search.label)
    present = [c for c in search.candidates if (on_fold["algorithm"] == c).any()]
    template = present[0] if present else (on_fold["algorithm"].iloc[0] if len(on_fold) else None)
    rows = on_fold[on_fold["algorithm"] == template].copy()
    if fold not in used:
        reason = rows["skip_reason"]  # the fold's own (u_min)
    elif not has_windows:
        reason = (f"no validation window before this fold (--tune-windows "
                  f"{config.tune_windows}, --tune-mode {config.tune_mode})")
    elif label is None:
        reason = "every candidate failed on a validation window (see the failed units)"
    else:
        reason = f"the chosen candidate {label} failed on this fold"
    return rows.assign(algorithm=search.label, value=np.nan, skipped=True, skip_reason=reason)


def optimism(
    results: pd.DataFrame, config: EvalConfig, found: list[Search] | None = None
) -> pd.DataFrame:
    """Per tuned algorithm and k: the tuned mean, the oracle candidate (best mean over the same
    test folds) and optimism = oracle mean / tuned mean − 1 (Recall@k), exactly 0 when the two
    means agree to 12 decimals (as choices are compared). It is negative when the tuned series,
    which may switch candidates from fold to fold, beats every single candidate. A candidate
    without a value on one of those folds (its unit failed) cannot be the oracle."""
    rows = []
    for search in searches(config) if found is None else found:
        for k in config.k:
            values = fold_values(results, "recall", k)
            tuned = values[search.label].dropna()
            if tuned.empty:
                continue
            # a candidate whose unit failed on one of these folds has no mean over them
            means = values.reindex(columns=search.candidates).loc[tuned.index].mean(skipna=False)
            if means.isna().all():
                continue
            best = search.candidates[int(np.nanargmax(np.round(means.to_numpy(), 12)))]
            tuned_mean, oracle_mean = float(tuned.mean()), float(means[best])
            if tuned_mean <= 0:
                ratio = np.nan
            elif round(oracle_mean, 12) == round(tuned_mean, 12):  # the same values, summed
                ratio = 0.0                                         # in another order
            else:
                ratio = oracle_mean / tuned_mean - 1
            rows.append({
                "algorithm": search.label, "metric": "recall", "k": k, "tuned_mean": tuned_mean,
                "n_folds": len(tuned), "oracle": best, "oracle_mean": oracle_mean,
                "optimism": ratio,
            })
    return pd.DataFrame(rows, columns=OPTIMISM_COLUMNS)
