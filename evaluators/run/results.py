"""The long results table (SPEC §8) and its summary (macro mean ± std over folds, Δ% to the best).

``results.csv`` has one row per (fold, algorithm, stratum, metric, k)::

    fold, t_start, t_end, algorithm, stratum, metric, k, value, n_users, n_eligible,
    skipped, skip_reason, config_hash

``n_eligible`` is the eligible users of the row's group, which u_min is checked against (|U_f|
of the fold; of the stratum's sub-log in mode ``subset``; the group's part of U_f in mode
``test``), ``n_users`` the number of users the value averages over (the same number). ``k`` is
empty for R-precision. Skipped folds keep their rows with an empty value, so the table shows
every fold.

The metrics are ``--metrics`` (:mod:`evaluators.metrics.names`; default SPEC §4's four). A per-user
metric's value is the mean over the row's users; an exposure metric's (coverage, popularity,
gini) is computed once from all the row's users' lists, so ``n_users`` counts the lists it read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol, TypedDict

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.evaluators.metrics.measures import FoldLevel
from sweval.evaluators.metrics.names import ORDER, UNRANKED, metric_keys
from sweval.evaluators.units.engine import UnitResult

COLUMNS = [
    "fold", "t_start", "t_end", "algorithm", "stratum", "metric", "k", "value",
    "n_users", "n_eligible", "skipped", "skip_reason", "config_hash",
]
SORT_KEYS = ["fold", "algorithm", "stratum", "metric", "k"]
#: Columns only some runs have, after :data:`COLUMNS`: ``fallback`` (``--cold-users``): the
#: model whose lists a first-time row measures when its own algorithm cannot score those
#: users (``pop``), empty elsewhere.
OPTIONAL = ["fallback"]


class Window(Protocol):
    """What a row needs of the fold or split it measures: a
    :class:`~evaluators.protocols.folds.Fold` or a :class:`~evaluators.protocols.splits.Split`."""

    @property
    def index(self) -> int: ...
    @property
    def t_start(self) -> int: ...
    @property
    def t_end(self) -> int: ...
    @property
    def n_eligible(self) -> int: ...
    @property
    def skip_reason(self) -> str | None: ...


class ResultRow(TypedDict):
    """One row of ``results.csv`` (the columns of :data:`COLUMNS`, in order)."""

    fold: int
    t_start: int
    t_end: int
    algorithm: str
    stratum: str
    metric: str
    k: int | None
    value: float
    n_users: int
    n_eligible: int
    skipped: bool
    skip_reason: str
    config_hash: str


def unit_rows(
    fold: Window,
    unit: UnitResult,
    *,
    stratum: str = "all",
    groups: Mapping[str, NDArray[np.bool_]] | None = None,
    config_hash: str = "",
    fold_level: FoldLevel | None = None,
) -> list[ResultRow]:
    """Rows of one evaluated unit: the mean over all its users, or over each group's users.

    Args:
        fold: the fold evaluated.
        unit: its per-user values.
        stratum: label of the rows when ``groups`` is None.
        groups: ``{stratum: mask over unit.users}`` to report several strata from one unit.
        config_hash: the run's configuration hash.
        fold_level: the exposure metrics of the same users' lists (one value per fold).
    """
    selections = groups if groups is not None else {stratum: None}
    rows: list[ResultRow] = []
    for label, mask in selections.items():
        n_users = len(unit.users) if mask is None else int(mask.sum())
        measured = {key: _mean(values if mask is None else values[mask])
                    for key, values in unit.values.items()}
        if fold_level is not None:
            measured |= {key: (value if n_users else np.nan, n_users)
                         for key, value in fold_level(mask).items()}
        for (metric, k), (value, n_defined) in measured.items():
            reason = "" if n_defined else (
                "n_users=0: no eligible user in this group" if not n_users
                else f"n_users=0: {metric} is undefined for every user of this group")
            rows.append(
                {
                    "fold": fold.index,
                    "t_start": fold.t_start,
                    "t_end": fold.t_end,
                    "algorithm": unit.algorithm,
                    "stratum": label,
                    "metric": metric,
                    "k": k,
                    "value": value,
                    "n_users": n_defined,
                    "n_eligible": fold.n_eligible,
                    # a mean over no user is undefined: such a row is skipped, never averaged
                    "skipped": not n_defined,
                    "skip_reason": reason,
                    "config_hash": config_hash,
                }
            )
    return rows


def _mean(values: NDArray[np.float64]) -> tuple[float, int]:
    """(mean, users averaged) of per-user values; a NaN value is a user for whom the metric
    is undefined (Recall_reachable@k without a reachable relevant item) and is left out."""
    if not len(values):
        return np.nan, 0
    undefined = np.isnan(values)
    if not undefined.any():
        return float(values.mean()), len(values)
    defined = values[~undefined]
    return (float(defined.mean()) if len(defined) else np.nan), len(defined)


def skipped_rows(
    fold: Window,
    algorithm: str,
    ks: list[int],
    *,
    stratum: str = "all",
    reason: str | None = None,
    n_users: int | None = None,
    config_hash: str = "",
    metrics: list[str] | None = None,
) -> list[ResultRow]:
    """Rows of a skipped unit: every metric present (default: SPEC §4's), value empty, reason
    recorded."""
    return [
        {
            "fold": fold.index,
            "t_start": fold.t_start,
            "t_end": fold.t_end,
            "algorithm": algorithm,
            "stratum": stratum,
            "metric": metric,
            "k": k,
            "value": np.nan,
            "n_users": fold.n_eligible if n_users is None else n_users,
            "n_eligible": fold.n_eligible if n_users is None else n_users,
            "skipped": True,
            "skip_reason": reason or fold.skip_reason or "",
            "config_hash": config_hash,
        }
        for metric, k in metric_keys(ks, metrics)
    ]


def ranking_score(summary: pd.DataFrame) -> pd.Series:
    """What ranks the algorithms of one (protocol, stratum, metric, k), higher first: Δ%, each
    against the best on the folds both have. Where no algorithm of the group has a Δ% (an
    unranked metric, all means 0, a summary without Δ%), the mean; an algorithm without one
    among others with one ranks after them."""
    if "delta" not in summary:
        return summary["mean"]
    keys = [c for c in ("protocol", "stratum", "metric", "k") if c in summary]
    delta = summary["delta"]
    has_delta = delta.notna().groupby([summary[c] for c in keys], dropna=False).transform("any")
    return delta.where(delta.notna(), np.where(has_delta, -np.inf, summary["mean"]))


def is_best(summary: pd.DataFrame) -> pd.Series:
    """Per row, whether it is the best of its (protocol, stratum, metric, k): Δ% = 0 over the
    most folds any algorithm of the group was scored on (ties are all best). A series scored on
    fewer folds whose Δ% is 0 (the best's equal on the folds both have) is not the best."""
    best = summary["delta"].abs() < 1e-12
    if "delta_folds" not in summary:  # a summary written before delta_folds existed
        return best
    keys = [c for c in ("protocol", "stratum", "metric", "k") if c in summary]
    most = summary.groupby(keys, dropna=False)["delta_folds"].transform("max")
    return best & (summary["delta_folds"] == most)


def _std(values: pd.Series) -> float:
    """The standard deviation over folds (ddof = 1) of the values as ``results.csv`` writes
    them (10 significant digits, as the intervals read them): exactly 0 when they are all equal
    (not the float noise of their mean), none for one fold, where it is undefined (0 would
    claim a fold-to-fold spread of nothing)."""
    if len(values) < 2:
        return np.nan
    written = np.array([float(f"{value:.10g}") for value in values])
    return 0.0 if (written == written[0]).all() else float(np.std(written, ddof=1))


def _deltas(used: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """``delta`` and ``delta_folds`` of :func:`summarise`, per (algorithm, stratum, metric, k)
    with a value."""
    keys = ["algorithm", "stratum", "metric", "k"]
    means = {(a, s, m, None if pd.isna(k) else int(k)): mean for a, s, m, k, mean
             in summary[[*keys, "mean"]].itertuples(index=False)}
    rows = []
    for (stratum, metric, k), group in used.groupby(keys[1:], dropna=False, sort=False):
        at = (stratum, metric, None if pd.isna(k) else int(k))
        values = {a: part.set_index("fold")["value"]
                  for a, part in group.groupby("algorithm", sort=False)}
        most = max(len(v) for v in values.values())
        best = max((a for a, v in values.items() if len(v) == most), key=lambda a: means[(a, *at)])
        for algorithm, own in values.items():
            folds = own.index.intersection(values[best].index)
            if len(folds) == len(own) == len(values[best]):  # the same folds: the own means
                mine, top = means[(algorithm, *at)], means[(best, *at)]
            else:
                mine, top = own[folds].mean(), values[best][folds].mean()
            rows.append({"algorithm": algorithm, "stratum": stratum, "metric": metric, "k": k,
                         "delta": mine / top - 1.0 if top > 0 else np.nan,
                         "delta_folds": len(folds)})
    return pd.DataFrame(rows, columns=[*keys, "delta", "delta_folds"])


def stratum_order(strata: pd.Series) -> dict[str, int]:
    """The rank of every stratum label: ``all`` first, then ``returning`` and ``first-time``,
    then the policies as their ids sort (numerically when every label spells an integer, ``2``
    before ``10``; history bins ``1-4``, ``5-19``, ``20+`` by their lower edge; else as text)."""
    labels = [str(label) for label in strata.unique()]
    named = [label for label in ("returning", "first-time") if label in labels]
    policies = [label for label in labels if label != "all" and label not in named]
    numeric = all(re.fullmatch(r"0|-?[1-9][0-9]*", label) for label in policies)
    bins = all(re.fullmatch(r"[1-9][0-9]*(-[1-9][0-9]*|\+)?", label) for label in policies)
    key = int if numeric else (lambda label: int(re.split(r"[-+]", label)[0])) if bins else str
    ordered = sorted(policies, key=key)
    return {label: i for i, label in enumerate(["all", *named, *ordered])}


#: The most strata compared pair by pair (``significance_strata.csv``) and drawn in a report. A
#: column of hundreds of values given to ``--stratify-by`` made both explode: 500 strata are
#: 124,750 pairs of tests per algorithm pair, metric and k (hours), and a report of 500 panels
#: per figure (20 minutes of rendering).
MAX_STRATA_SHOWN = 12


def largest_strata(results: pd.DataFrame, n: int = MAX_STRATA_SHOWN) -> list[str] | None:
    """The ``n`` strata other than ``all`` with the most eligible users over the folds (ties:
    in the table's order), in the table's order; None when there are no more than ``n``."""
    strata = results.loc[results["stratum"] != "all"]
    names = list(dict.fromkeys(strata["stratum"].astype(str)))
    if len(names) <= n:
        return None
    per_fold = strata.drop_duplicates(["fold", "stratum"])
    size = (per_fold.groupby(per_fold["stratum"].astype(str), sort=False)["n_eligible"].sum()
            if "n_eligible" in per_fold else per_fold["stratum"].astype(str).value_counts())
    kept = set(sorted(names, key=lambda name: -float(size.get(name, 0)))[:n])
    return [name for name in names if name in kept]


def results_frame(rows: Iterable[Mapping[str, object]], algorithms: list[str]) -> pd.DataFrame:
    """The long table, in a canonical order (fold, algorithm as configured, stratum, metric, k)."""
    rows = list(rows)
    optional = [name for name in OPTIONAL if any(name in row for row in rows)]
    frame = pd.DataFrame(rows, columns=[*COLUMNS, *optional])
    frame["k"] = frame["k"].astype("Int64")
    for column in ("fold", "t_start", "t_end", "n_users", "n_eligible"):
        frame[column] = frame[column].astype(np.int64)
    frame["skipped"] = frame["skipped"].astype(bool)
    frame["value"] = frame["value"].astype(np.float64)
    algorithm_rank = {name: i for i, name in enumerate(algorithms)}
    order = np.lexsort(
        (
            frame["k"].fillna(0).to_numpy(),
            frame["metric"].map(ORDER).to_numpy(),
            frame["stratum"].map(stratum_order(frame["stratum"])).to_numpy(),
            frame["algorithm"].map(algorithm_rank).fillna(len(algorithm_rank)).to_numpy(),
            frame["fold"].to_numpy(),
        )
    )
    return frame.iloc[order].reset_index(drop=True)


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Macro mean ± std over non-skipped folds (std empty for one fold), per (algorithm,
    stratum, metric, k), with Δ%.

    ``mean`` is over the algorithm's own scored folds. The best, at each (stratum, metric, k),
    is the highest mean among the algorithms scored on the most folds (every algorithm, unless a
    tuned series lacks its first folds or a unit failed). Δ% (``delta``) compares an algorithm
    with the best on the ``delta_folds`` folds both have::

        delta = mean of a over those folds / mean of the best over them − 1   (−0.25 = 25 % worse)

    = mean / best mean − 1 for an algorithm with the best's folds. A series with fewer folds is
    compared on its own, paired (it may be +), and is never the best for missing a hard fold.
    None for :data:`~evaluators.metrics.names.UNRANKED` metrics (more is not better) and where the
    best's mean over the folds is 0.
    """
    keys = ["algorithm", "stratum", "metric", "k"]
    used = results[~results["skipped"]]
    grouped = used.groupby(keys, dropna=False, sort=False)["value"]
    summary = grouped.agg(mean="mean", std=_std, n_folds="count").reset_index()
    skipped = (
        results[results["skipped"]]
        .groupby(keys, dropna=False, sort=False)["fold"].nunique()
        .rename("n_skipped").reset_index()
    )
    summary = summary.merge(skipped, on=keys, how="outer")
    summary["n_folds"] = summary["n_folds"].fillna(0).astype(int)
    summary["n_skipped"] = summary["n_skipped"].fillna(0).astype(int)
    summary = summary.merge(_deltas(used, summary), on=keys, how="left")
    summary["delta_folds"] = summary["delta_folds"].fillna(0).astype(int)
    summary.loc[summary["metric"].isin(UNRANKED), "delta"] = np.nan
    order = results[keys].drop_duplicates().reset_index(drop=True).reset_index()
    summary = summary.merge(order, on=keys, how="left").sort_values("index").drop(columns="index")
    if "fallback" in results:  # --cold-users: whose lists a first-time mean measures
        used_fallback = used[used["fallback"].fillna("") != ""]
        fallback = used_fallback.groupby(keys, dropna=False, sort=False)["fallback"].first()
        summary = summary.merge(fallback.reset_index(), on=keys, how="left")
    return summary.reset_index(drop=True)
