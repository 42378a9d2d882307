"""The metrics a run can report (``--metrics``), their labels and their order in the tables.

Two kinds, one results row per (fold, algorithm, stratum, metric, k) for both:

- per-user metrics (:data:`PER_USER`): a value per eligible user, averaged over the users of
  the fold (or stratum group), then over the folds; also written per user by ``--per-user``;
- per-fold exposure metrics (:data:`PER_FOLD`): one value per fold computed from all the fold's
  top-k lists together (:mod:`evaluators.metrics.exposure`), then averaged over the folds.

The formulas are in :mod:`evaluators.metrics.ranking` (SPEC §4 and the ones added here) and
docs/protocol.md §4b. ``--metrics all`` takes every metric; the default is SPEC §4's four.
"""

from __future__ import annotations

from sweval.data.errors import SwevalError

#: SPEC §4's metrics: the default of ``--metrics``.
DEFAULT_METRICS = ["recall", "hit_rate", "ndcg", "r_precision"]
#: Every per-user metric, in display order (R-precision has no k).
PER_USER = ["recall", "hit_rate", "ndcg", "r_precision", "precision", "recall_capped", "mrr",
            "recency"]
#: Every per-fold exposure metric, in display order.
PER_FOLD = ["coverage", "popularity", "gini"]
ALL_METRICS = PER_USER + PER_FOLD
#: SPEC §4's display labels, e.g. ``Recall@10``.
SPEC_LABELS = {"recall": "Recall", "hit_rate": "HitRate", "ndcg": "NDCG",
               "r_precision": "R-precision"}
#: Display labels, e.g. ``Precision@10``.
LABELS = SPEC_LABELS | {
    "precision": "Precision", "recall_capped": "Recall (capped)", "mrr": "MRR",
    "recency": "Recency", "coverage": "Coverage", "popularity": "Popularity", "gini": "Gini",
}
#: The order of metrics in the tables.
ORDER = {name: rank for rank, name in enumerate(ALL_METRICS)}
#: Metrics without a best (higher is not better): no Δ% in summary.csv.
UNRANKED = {"popularity", "gini"}
#: Metrics measured once per user at k = |Rel_u| (no k column).
WITHOUT_K = {"r_precision"}


def shown_k(ks: list[int]) -> int:
    """The k of a printed table or a figure that shows one: 10 when asked for, else the
    largest."""
    return 10 if 10 in ks else max(ks)


def parse_metrics(names: list[str]) -> list[str]:
    """The ``--metrics`` selection in display order: names from :data:`ALL_METRICS`, or
    ``all``.

    Raises:
        SwevalError: an unknown name, or none.
    """
    chosen = {name.strip().lower() for name in names if name.strip()}
    if "all" in chosen:
        return list(ALL_METRICS)
    unknown = sorted(chosen - set(ALL_METRICS))
    if unknown:
        raise SwevalError(
            f"--metrics: unknown metric(s) {', '.join(unknown)}; choose from "
            f"{', '.join(ALL_METRICS)} or all"
        )
    if not chosen:
        raise SwevalError("--metrics: give at least one metric")
    return [name for name in ALL_METRICS if name in chosen]


def metric_keys(ks: list[int], metrics: list[str] | None = None) -> list[tuple[str, int | None]]:
    """Every (metric, k) a run reports, in display order (default: SPEC §4's metrics)."""
    chosen = DEFAULT_METRICS if metrics is None else metrics
    with_k = [(metric, k) for metric in chosen if metric not in WITHOUT_K for k in ks]
    return with_k + [(metric, None) for metric in chosen if metric in WITHOUT_K]
