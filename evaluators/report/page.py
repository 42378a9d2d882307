"""Reports a person wants to look at: the paper's tables and figures, from an output directory.

Reads what a run (or a comparison) wrote and builds, for the requested metrics:

- the layout of the paper's Tables 2–3: mean metric@k per algorithm (columns) and k (rows), one
  row block per stratum and one column block per protocol, with Δ% to the best (in bold) at the
  same (protocol, stratum, k);
- Figure 1/2 style: mean metric@k against k, one line per algorithm, one panel per
  (protocol, stratum);
- over time: each algorithm's metric@k per fold, with the fold's n_eligible as a bar underlay
  (right axis) and the skipped folds marked;
- for a comparison of protocols: the ranks under each protocol, Kendall's τ between them, the
  leakage diagnostic and the lists' overlap with SW-EVAL's (:mod:`evaluators.report.protocols`);
- ``report.html``: self-contained (tables, run facts and the figures as base64 PNG; no script, no
  network access), next to the PNG files.

::

    write_report("runs/latest")   ->  [runs/latest/report.html, runs/latest/report-recall-vs-k.png,
                                       runs/latest/report-recall-at-10-over-time.png]

The input is ``compare.csv`` when the directory has one (the long table plus a ``protocol``
column), else ``results.csv``. Means, Δ% and fold counts are recomputed from that table with
:func:`evaluators.run.results.summarise` (per protocol), so they match ``summary.csv``.
This module is a plain library: no Prefect, no MLflow (``flows/cli/report.py`` adds those).
It assembles and writes; the parts are in their own modules:

- :mod:`evaluators.report.data`: reading the directory (:class:`ReportData`);
- :mod:`evaluators.report.tables`: the metric tables and how values are written;
- :mod:`evaluators.report.figures`: the matplotlib figures and their PNG bytes;
- :mod:`evaluators.report.facts`: run facts, folds and compute time;
- :mod:`evaluators.report.significance`: who beats whom, and the policy effect between strata;
- :mod:`evaluators.report.html` and ``templates/``: the HTML (jinja2, autoescaped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.report.data import ReportData, load, read_results, summarise_protocols
from sweval.evaluators.report.drawn import ReportFigure, png, tables_fingerprint
from sweval.evaluators.report.facts import (
    PlainTable,
    compute_times,
    failed_units,
    folds_summary,
    run_facts,
    tuning_summary,
)
from sweval.evaluators.report.html import render_page, table_html
from sweval.evaluators.report.protocols import ProtocolAgreement, protocol_agreement
from sweval.evaluators.report.retraining import retraining_section
from sweval.evaluators.report.significance import (
    SignificanceMatrix,
    policy_effect,
    significance_matrices,
)
from sweval.evaluators.report.tables import (
    MAX_TABLE_ALGORITHMS,
    Cell,
    MetricTable,
    format_delta,
    format_mean,
    metric_label,
    metric_table,
    protocol_groups,
)
from sweval.evaluators.run.output_dir import add, claim, manifest, publish
from sweval.evaluators.stats.overlap import overlap_matrix
from sweval.evaluators.units.memo import Memo

__all__ = [  # the report's API, importable from here as before the split
    "DEFAULT_K", "MAX_TABLE_ALGORITHMS", "Cell", "MetricSection", "MetricTable",
    "ProtocolAgreement", "ReportData", "ReportFigure",
    "format_delta", "format_mean", "load", "metric_label", "metric_table", "protocol_groups",
    "read_results", "summarise_protocols", "table_html", "write_report",
]

DEFAULT_K = 10


def _figures() -> Any:
    """:mod:`evaluators.report.figures`, imported to draw a figure (matplotlib): a report whose
    figures are all in the memo never imports it."""
    from sweval.evaluators.report import figures

    return figures


@dataclass(frozen=True)
class MetricSection:
    """What the report shows for one metric: its table(s) and figures.

    Attributes:
        metric: the metric name.
        table: its Table 2/3 layout.
        protocol_groups: the protocols of each table (see :func:`protocol_groups`).
        k_time: the k of the over-time figure (None for a metric without k).
        vs_k: the metric@k against k figure (None for a metric without k).
        over_time: the per-fold figure (None when no protocol has a timeline).
        significance: who beats whom at ``k_time``, per (protocol, stratum).
        policy_effect: the leads' differences between strata at ``k_time`` (None without).
    """

    metric: str
    table: MetricTable
    protocol_groups: list[list[str]]
    k_time: int | None
    vs_k: ReportFigure | None
    over_time: ReportFigure | None
    significance: list[SignificanceMatrix]
    policy_effect: PlainTable | None

    @property
    def label(self) -> str:
        """``Recall``."""
        return metric_label(self.metric)

    @property
    def label_k(self) -> str:
        """``Recall@k``, or the label alone for a metric without k (read by the template)."""
        return self.label + ("" if self.table.ks == [None] else "@k")

    @property
    def label_at_k(self) -> str:
        """``Recall@10`` at the over-time figure's k (read by the template)."""
        return metric_label(self.metric, self.k_time)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _choose_k(data: ReportData, metric: str, k: int | None) -> int | None:
    ks = data.ks(metric)
    if not ks:
        return None
    if k is not None:
        if k not in ks:
            raise SwevalError(f"--k {k}: the results have k = {', '.join(map(str, ks))}.")
        return k
    return DEFAULT_K if DEFAULT_K in ks else ks[len(ks) // 2]


def metric_section(data: ReportData, metric: str, k_time: int | None, *,
                   memo: Memo | None = None, drawn_from: str = "") -> MetricSection:
    """Table(s) and figures of ``metric``, the over-time figure at ``k_time``; with ``memo``,
    figures drawn before from the same tables (``drawn_from``:
    :func:`~evaluators.report.drawn.tables_fingerprint`) are read from it."""
    table = metric_table(data.summary, metric)
    vs_k = None
    if data.ks(metric):
        vs_k = ReportFigure(f"report-{_slug(metric)}-vs-k.png",
                            png(memo, "vs-k", (drawn_from, metric),
                                lambda: _figures().figure_vs_k(data, metric)) or b"",
                            f"mean {metric_label(metric)}@k against k")
    over_time = None
    picture = png(memo, "over-time", (drawn_from, metric, k_time),
                  lambda: _figures().figure_over_time(data, metric, k_time))
    if picture is not None:
        at = "" if k_time is None else f"-at-{k_time}"
        over_time = ReportFigure(f"report-{_slug(metric)}{at}-over-time.png", picture,
                                 f"{metric_label(metric, k_time)} per fold")
    return MetricSection(metric=metric, table=table, protocol_groups=protocol_groups(table),
                         k_time=k_time, vs_k=vs_k, over_time=over_time,
                         significance=significance_matrices(data, metric, k_time),
                         policy_effect=policy_effect(data, metric, k_time))


def overlap_figure(data: ReportData, k: int | None, memo: Memo | None = None
                   ) -> ReportFigure | None:
    """The heat map of ``overlap.csv`` at ``k`` (default 10, else the largest k it has), or
    None when the directory has none."""
    path = data.directory / "overlap.csv"
    if not path.exists():
        return None
    frame = pd.read_csv(path)
    ks = sorted(int(value) for value in frame["k"].unique())
    if not ks:
        return None
    chosen = k if k in ks else DEFAULT_K if DEFAULT_K in ks else ks[-1]
    matrix = overlap_matrix(frame, chosen)
    if matrix is None:
        return None
    return ReportFigure(f"report-overlap-at-{chosen}.png",
                        png(memo, "overlap", (matrix, chosen),
                            lambda: _figures().figure_overlap(matrix, chosen)) or b"",
                        f"Mean Jaccard@{chosen} of the top-{chosen} lists between algorithms")


def write_report(
    output_dir: str | Path,
    *,
    metrics: Sequence[str] | None = None,
    k: int | None = None,
    destination: str | Path | None = None,
    title: str | None = None,
    origin: str | None = None,
    intervals: pd.DataFrame | None = None,
    memo: Memo | None = None,
) -> list[Path]:
    """Build the report of an output directory and write it.

    Args:
        output_dir: a directory written by ``sweval run`` or ``sweval compare``.
        metrics: the metrics to report (``recall``, ``hit_rate``, ``ndcg``, ``r_precision``, and
            any other ``--metrics`` of the run), or ``["all"]`` for every metric in the results.
            Tables and figures come per metric. Default: Recall, else the results' first.
        k: the cut-off of the over-time figures (default 10, else the middle k of the run) and
            of a comparison's ranks, leakage and overlap (default 10, else the largest k).
        destination: where to write (default: ``output_dir``).
        title: the HTML title (default: from the data source).
        origin: where the results came from, as shown in the report (default: the table's path;
            e.g. "MLflow run <id>" when they were downloaded).
        intervals: the means' bootstrap intervals, when the run that wrote ``results.csv``
            builds the report and has them (its summary; see
            :func:`~evaluators.report.data.load`).
        memo: the unit store's memo: figures drawn before from the same tables are read from
            it, those drawn now kept there (:mod:`evaluators.report.drawn`).

    Returns:
        The written files: ``report.html`` first, then the PNG figures
        (``report-<metric>-vs-k.png``, ``report-<metric>-at-<k>-over-time.png``,
        ``report-overlap-at-<k>.png`` when the directory has ``overlap.csv``,
        ``report-protocols-<metric>-at-<k>.png`` for a comparison of protocols).

    Raises:
        SwevalError: unreadable directory, a metric or k not in the results.
    """
    data = load(output_dir, intervals=intervals)
    if metrics is None:
        metrics = ["recall"] if "recall" in data.metrics or not data.metrics else data.metrics[:1]
    chosen = data.metrics if list(metrics) == ["all"] else list(dict.fromkeys(metrics))
    unknown = [m for m in chosen if m not in data.metrics]
    if unknown:
        raise SwevalError(
            f"metric(s) {', '.join(unknown)} not in the results (they have "
            f"{', '.join(data.metrics)})."
        )
    k_time = {metric: _choose_k(data, metric, k) for metric in chosen}
    target = report_target(data.directory, destination)
    source = data.config.get("data", {}).get("source") or data.directory.name
    title = title or f"SW-EVAL report — {source}"
    drawn_from = tables_fingerprint(data) if memo is not None else ""
    sections = [metric_section(data, metric, k_time[metric], memo=memo, drawn_from=drawn_from)
                for metric in chosen]
    overlap = overlap_figure(data, k, memo)
    protocols = protocol_agreement(data, k, memo)
    retraining = retraining_section(data.directory, chosen[0], k_time[chosen[0]])
    page = render_page(
        title=title,
        generated=datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        table_file=data.table_file,
        facts=run_facts(data, origin),
        failed_units=failed_units(data),
        sections=sections,
        show_protocols=data.labelled_protocols,
        folds=folds_summary(data),
        compute_times=compute_times(data),
        tuning=tuning_summary(data),
        ci_level=f"{100 * data.bootstrap.level:g}%",
        overlap=overlap,
        protocols=protocols,
        retraining=retraining,
    )
    figures = [f for s in sections for f in (s.vs_k, s.over_time) if f is not None]
    figures += [overlap] if overlap is not None else []
    figures += retraining.figures if retraining is not None else []
    figures += [protocols.scatter] if protocols is not None and protocols.scatter else []
    files = {figure.file_name: figure.png for figure in figures} | {
        REPORT_PAGE: page.encode("utf-8")}
    try:
        publish_report(target, files, source=data.directory)
    except OSError as exc:
        raise SwevalError(f"{target}: cannot write the report ({exc}).") from exc
    return [target / REPORT_PAGE, *(target / figure.file_name for figure in figures)]


#: The report's page; its figures are ``report-*.png`` beside it.
REPORT_PAGE = "report.html"


def report_target(source: Path, destination: str | Path | None) -> Path:
    """Where a report of ``source`` goes: ``source`` itself, else ``destination``, which must be
    SW-EVAL's to write (:func:`~evaluators.run.output_dir.claim`) and hold no run's tables.

    Raises:
        SwevalError: a destination SW-EVAL may not write, or another run's output directory.
    """
    if destination is None or Path(destination).resolve() == source.resolve():
        return source
    target = claim(destination)
    found = manifest(target)
    if found is not None and found["files"] and found.get("command") != "report":
        raise SwevalError(f"{target}: holds the output of `sweval {found.get('command')}`; a "
                          "report of another directory would mix with it: choose another "
                          "--output.")
    return target


def publish_report(target: Path, files: dict[str, bytes], *, source: Path) -> None:
    """Write the report's files into ``target``: added to the run's published set (an earlier
    report's figures dropped) when ``target`` is the run's directory, else published as a
    report's own set."""
    if target.resolve() == source.resolve():
        earlier = manifest(target)
        drop = [name for name in (earlier or {}).get("files", {})
                if name == REPORT_PAGE or (name.startswith("report-") and name.endswith(".png"))]
        add(target, files, drop=drop)
    else:
        publish(target, files, run=str(source.resolve()), command="report")
