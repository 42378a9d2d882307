"""The report's part on a comparison of protocols: do they agree, and which ones see the future?

Read from the files ``sweval compare`` writes beside ``compare.csv``, at one k:

- the ranks of the algorithms under every protocol, with the places gained or lost against the
  first one (``rank_shift.csv``, papers/002 Table 3);
- Kendall's τ between every pair of protocols' rankings, at every k (``kendall.csv``), and the
  scatter of each configuration's mean under one protocol against the other (papers/002 Fig. 2,
  redrawn at the report's k);
- the leakage diagnostic: recommended items that first appear in the log after the test instance
  (``leakage.csv``, papers/000 Table 4);
- each protocol's top-k lists against SW-EVAL's for the same user (``overlap_protocols.csv``).

The rankings and τ are by ``compare.json``'s ``rank_metric`` (``--rank-metric``, default Recall).
The cells are those ``sweval compare`` prints (:mod:`evaluators.experiments.compare_views`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.evaluators.experiments.compare_views import (
    kendall_view,
    leakage_view,
    overlap_view,
    rank_shift_view,
)
from sweval.evaluators.metrics.names import shown_k
from sweval.evaluators.report.data import ReportData
from sweval.evaluators.report.drawn import ReportFigure, png
from sweval.evaluators.report.facts import PlainTable
from sweval.evaluators.report.tables import metric_label
from sweval.evaluators.units.memo import Memo

_TEXT = {"protocol": str, "protocol_a": str, "protocol_b": str, "algorithm": str,
         "algorithms": str}
"""Columns read as text: an algorithm or stratum called "NA" is a name, not a missing value."""


@dataclass(frozen=True)
class ProtocolAgreement:
    """What the report shows about the protocols of a comparison.

    Attributes:
        k: the cut-off of the ranks, the scatter, the leakage and the overlap.
        label: the ranking metric at k, ``Recall@10``.
        reference: the protocol the rank shifts are counted against (the first one).
        ranks: algorithm × protocol ranks (None with one protocol).
        kendall: protocol pair × k, τ with its p-value (None with one protocol).
        scatter: papers/002 Fig. 2 at k (None with one protocol).
        leakage: per (protocol, algorithm), the future items among the top-k lists.
        overlap: protocol × algorithm, mean Jaccard against SW-EVAL's lists (None without pairs).
    """

    k: int
    label: str
    reference: str
    ranks: PlainTable | None
    kendall: PlainTable | None
    scatter: ReportFigure | None
    leakage: PlainTable | None
    overlap: PlainTable | None


def _read(path: Path) -> pd.DataFrame | None:
    """``path`` as a frame, None when it is missing, empty or not a table."""
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path, dtype=_TEXT, keep_default_na=False, na_values=[""])
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError, ValueError):
        return None
    return None if frame.empty else frame


def protocol_agreement(data: ReportData, k: int | None = None, memo: Memo | None = None
                       ) -> ProtocolAgreement | None:
    """The comparison part of the report of ``data`` at ``k`` (default 10, else the largest k of
    the ranking metric), or None when ``data`` is not a comparison's directory; with ``memo``,
    its figure drawn once per tables (:mod:`evaluators.report.drawn`)."""
    if data.table_file != "compare.csv":
        return None
    metric = str(data.config.get("rank_metric", "recall"))
    ks = data.ks(metric)
    if not ks:
        return None
    k = k if k in ks else shown_k(ks)
    protocols = data.protocols
    directory = data.directory
    ranks = kendall = scatter = None
    if len(protocols) > 1:
        shifts = _read(directory / "rank_shift.csv")
        if shifts is not None:
            ranks = PlainTable.of(rank_shift_view(shifts, protocols, k))
        tau = _read(directory / "kendall.csv")
        if tau is not None:
            tau = tau[tau["metric"] == metric]
            kendall = PlainTable.of(kendall_view(tau, ks))
            picture = png(memo, "protocols-scatter", (data.summary, tau, protocols, k, metric),
                          lambda: _scatter(data.summary, tau, protocols, k, metric))
            scatter = ReportFigure(
                f"report-protocols-{metric}-at-{k}.png", picture or b"",
                f"mean {metric_label(metric, k)} of every configuration under one protocol "
                "against another, with Kendall's τ")
    leaks = _read(directory / "leakage.csv")
    leakage = None if leaks is None else PlainTable.of(leakage_view(leaks, k))
    pairs = _read(directory / "overlap_protocols.csv")
    overlap_frame = None if pairs is None else overlap_view(pairs, k)
    return ProtocolAgreement(
        k=k, label=metric_label(metric, k), reference=protocols[0], ranks=ranks,
        kendall=kendall, scatter=scatter, leakage=leakage,
        overlap=None if overlap_frame is None else PlainTable.of(overlap_frame),
    )


def _scatter(summary: pd.DataFrame, tau: pd.DataFrame, protocols: list[str], k: int,
             metric: str) -> Any:
    """The protocols' scatter, drawn (matplotlib is imported to draw only)."""
    from sweval.evaluators.report.compare_figures import protocol_scatter

    return protocol_scatter(summary, tau, protocols, k, metric=metric)
