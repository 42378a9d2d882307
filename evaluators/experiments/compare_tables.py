"""Comparing protocols: the future-item leakage diagnostic and the comparison tables.

Leakage (papers/000, Table 4): an item's *first appearance* is its first timestamp in the whole
log D. A recommended item is a *future item* for user u when its first appearance is after u's
reference time (the held-out transaction's time, or the user's first test transaction)::

    future[j, r] = first_seen[list_j[r]] > reference_time_j

Tables: per protocol the macro means with Δ% to the best (the paper's Table 2), the rankings of
the algorithms at each k, and Kendall's τ between every two protocols' rankings (scipy's τ-b).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.evaluators.protocols.splits import Split
from sweval.evaluators.run.results import COLUMNS, ranking_score, summarise
from sweval.evaluators.stats.significance import ranked_algorithms
from sweval.evaluators.units.engine import UnitResult

#: Columns of the leakage table.
LEAKAGE_COLUMNS = [
    "protocol", "fold", "algorithm", "k", "n_lists", "n_recommended", "n_future",
    "share_future", "n_lists_with_future",
]


def future_items(
    recommended: NDArray[np.int64],
    reference_time: NDArray[np.int64],
    first_seen: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """future[j, r]: the r-th recommended item of user j first appears after j's reference time.

    Args:
        recommended: (n, K) global item codes, −1 = no item.
        reference_time: (n,) the test instance's time per user.
        first_seen: first timestamp per item code (:func:`item_first_seen`).
    """
    valid = recommended >= 0
    return valid & (first_seen[np.maximum(recommended, 0)] > reference_time[:, None])


def leakage_rows(
    protocol: str,
    split: Split,
    unit: UnitResult,
    ks: list[int],
    first_seen: NDArray[np.int64],
) -> list[dict[str, object]]:
    """The leakage diagnostic of one unit: future items among the top-k lists, for every k."""
    recommended = unit.recommended
    if recommended is None:
        raise ValueError("the unit's recommended lists were not kept")
    future = future_items(recommended, split.reference_time, first_seen)
    valid = recommended >= 0
    rows = []
    for k in ks:
        n_recommended = int(valid[:, :k].sum())
        n_future = int(future[:, :k].sum())
        rows.append(
            {
                "protocol": protocol,
                "fold": split.index,
                "algorithm": unit.algorithm,
                "k": k,
                "n_lists": len(recommended),
                "n_recommended": n_recommended,
                "n_future": n_future,
                "share_future": n_future / n_recommended if n_recommended else np.nan,
                "n_lists_with_future": int(future[:, :k].any(axis=1).sum()),
            }
        )
    return rows


COMPARE_COLUMNS = ["protocol", *COLUMNS]


def compare_summary(results: pd.DataFrame) -> pd.DataFrame:
    """:func:`~evaluators.run.results.summarise` per protocol (mean over splits, Δ% to the best)."""
    parts = []
    for protocol, part in results.groupby("protocol", sort=False):
        summary = summarise(part.drop(columns="protocol"))
        summary.insert(0, "protocol", protocol)
        parts.append(summary)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def table2(summary: pd.DataFrame, *, metric: str = "recall", stratum: str = "all") -> pd.DataFrame:
    """The paper's Table 2 as a long frame: protocol, k, algorithm, mean, delta (a fraction)."""
    part = summary[(summary["metric"] == metric) & (summary["stratum"] == stratum)]
    columns = ["protocol", "k", "algorithm", "mean", "delta", "std", "n_folds", "n_skipped"]
    return part[columns].reset_index(drop=True)


def rankings(summary: pd.DataFrame, k: int, *, metric: str = "recall") -> dict[str, list[str]]:
    """Per protocol, the evaluated algorithms best first at metric@k: by Δ% (each against the
    best on the folds both have, :func:`~evaluators.run.results.summarise`), then mean, ties by
    name."""
    out: dict[str, list[str]] = {}
    for protocol, rows in _ranked_part(summary, k, metric).groupby("protocol", sort=False):
        out[str(protocol)] = ranked_algorithms(rows.sort_values("algorithm", kind="stable"))
    return out


def _ranked_part(summary: pd.DataFrame, k: int, metric: str) -> pd.DataFrame:
    """The rows the rankings at metric@k read: stratum ``all``, the algorithms with a mean."""
    part = summary[
        (summary["metric"] == metric) & (summary["k"] == k) & (summary["stratum"] == "all")
    ]
    return part[part["mean"].notna()]


def ranking_scores(
    summary: pd.DataFrame, k: int, *, metric: str = "recall"
) -> dict[str, dict[str, float]]:
    """Per protocol, every evaluated algorithm's :func:`~evaluators.run.results.ranking_score` at
    metric@k, rounded to 12 decimals so that float noise does not split equal means."""
    part = _ranked_part(summary, k, metric)
    part = part.assign(score=np.round(ranking_score(part).to_numpy(dtype=float), 12))
    return {str(protocol): dict(zip(rows["algorithm"].astype(str), rows["score"], strict=True))
            for protocol, rows in part.groupby("protocol", sort=False)}


def _ranks(scores: dict[str, float], among: set[str] | None = None) -> dict[str, int]:
    """1 + the number of algorithms (of ``among``, default all) scored strictly higher."""
    among = set(scores) if among is None else among
    return {a: 1 + sum(scores[o] > score for o in among if o in scores)
            for a, score in scores.items() if a in among}


def tied_ranks(
    summary: pd.DataFrame, k: int, *, metric: str = "recall"
) -> dict[str, dict[str, int]]:
    """Per protocol, every evaluated algorithm's rank at metric@k: 1 + the number of algorithms
    ranked strictly above it (:func:`ranking_scores`), so equal means share a rank (1, 1, 3)."""
    return {protocol: _ranks(scores)
            for protocol, scores in ranking_scores(summary, k, metric=metric).items()}


def rank_shift(
    summary: pd.DataFrame, protocols: Sequence[str], *, metric: str = "recall"
) -> pd.DataFrame:
    """002 Table 3: per k, every algorithm's rank under each protocol and its shift against the
    first protocol (``shift`` = reference rank − rank: +2 moved up two places).

    Ranks are 1-based over the algorithms each protocol evaluates (:func:`tied_ranks`: equal
    means share a rank), rows in :func:`rankings`' order; an algorithm a protocol does not
    evaluate has no rank there. The shift counts places among the algorithms *both* protocols
    rank (POP-N is not evaluated under LOOCV; a tuned series lacks some): an algorithm absent
    from one side moves no one.
    Columns: ``k, algorithm, protocol, rank, shift``, rows in the reference protocol's order.
    """
    rows = []
    ks = sorted(int(k) for k in summary.loc[summary["k"].notna(), "k"].unique())
    for k in ks:
        ranked = rankings(summary, k, metric=metric)
        scores = ranking_scores(summary, k, metric=metric)
        reference = ranked.get(protocols[0], [])
        order = reference + sorted({a for p in protocols for a in ranked.get(p, [])}
                                   - set(reference))
        base_scores = scores.get(protocols[0], {})
        shifts = {}  # per protocol: the places each algorithm of both protocols moved
        for protocol in protocols:
            common = set(base_scores) & set(scores.get(protocol, {}))
            base, moved = _ranks(base_scores, common), _ranks(scores.get(protocol, {}), common)
            shifts[protocol] = {a: base[a] - moved[a] for a in common}
        ranks = tied_ranks(summary, k, metric=metric)
        for algorithm in order:
            for protocol in protocols:
                rows.append({"k": k, "algorithm": algorithm, "protocol": protocol,
                             "rank": ranks.get(protocol, {}).get(algorithm),
                             "shift": shifts[protocol].get(algorithm)})
    frame = pd.DataFrame(rows, columns=["k", "algorithm", "protocol", "rank", "shift"])
    return frame.astype({"rank": "Int64", "shift": "Int64"})


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Kendall's τ-b (ties accounted for) and its p-value, via ``scipy.stats.kendalltau``.

    NaN when fewer than two values or when one side is constant.
    """
    from scipy.stats import kendalltau

    if len(a) != len(b):
        raise ValueError("the two score lists differ in length")
    if len(a) < 2:
        return float("nan"), float("nan")
    result = kendalltau(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    return float(result.statistic), float(result.pvalue)


def kendall_table(
    summary: pd.DataFrame, protocols: Sequence[str], *, metric: str = "recall"
) -> pd.DataFrame:
    """Kendall's τ between the algorithm rankings of every pair of protocols, for every k.

    The rankings compare the algorithms evaluated under both protocols (POP-N is absent from
    LOOCV), by their metric@k as :func:`~evaluators.run.results.ranking_score` orders them (Δ%:
    the mean where every algorithm has the same folds).
    """
    part = summary[(summary["metric"] == metric) & (summary["stratum"] == "all")]
    part = part[part["k"].notna() & part["mean"].notna()]
    part = part.assign(score=np.round(ranking_score(part).to_numpy(dtype=float), 12))
    ks = sorted(int(k) for k in part["k"].unique())
    rows = []
    for first, second in combinations(protocols, 2):
        for k in ks:
            at_k = part[part["k"] == k]
            a = at_k[at_k["protocol"] == first].set_index("algorithm")["score"]
            b = at_k[at_k["protocol"] == second].set_index("algorithm")["score"]
            common = [name for name in a.index if name in b.index]
            tau, p_value = kendall_tau(a[common].tolist(), b[common].tolist())
            rows.append(
                {"protocol_a": first, "protocol_b": second, "metric": metric, "k": k,
                 "tau": tau, "p_value": p_value, "n_algorithms": len(common),
                 "algorithms": ",".join(common)}
            )
    return pd.DataFrame(
        rows, columns=["protocol_a", "protocol_b", "metric", "k", "tau", "p_value",
                       "n_algorithms", "algorithms"]
    )


def leakage_summary(leakage: pd.DataFrame) -> pd.DataFrame:
    """Leakage pooled over splits per (protocol, algorithm, k): counts summed, share = sum/sum."""
    keys = ["protocol", "algorithm", "k"]
    if leakage.empty:
        return pd.DataFrame(columns=[*keys, "n_splits", "n_lists", "n_recommended", "n_future",
                                     "share_future", "n_lists_with_future"])
    grouped = leakage.groupby(keys, sort=False)
    out = grouped[["n_lists", "n_recommended", "n_future", "n_lists_with_future"]].sum()
    out.insert(0, "n_splits", grouped["fold"].nunique())
    out["share_future"] = np.where(
        out["n_recommended"] > 0, out["n_future"] / out["n_recommended"].clip(lower=1), np.nan
    )
    return out.reset_index()[
        [*keys, "n_splits", "n_lists", "n_recommended", "n_future", "share_future",
         "n_lists_with_future"]
    ]
