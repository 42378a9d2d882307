"""Reports a person wants to look at: the paper's tables and figures, from an output directory.

Reads what a run (or a comparison) wrote and builds, for the requested metrics:

- the layout of the paper's Tables 2–3: mean metric@k per algorithm (columns) and k (rows), one
  row block per stratum and one column block per protocol, with Δ% to the best (in bold) at the
  same (protocol, stratum, k);
- Figure 1/2 style: mean metric@k against k, one line per algorithm, one panel per
  (protocol, stratum);
- over time: each algorithm's metric@k per fold, with the fold's n_eligible as a bar underlay
  (right axis) and the skipped folds marked;
- ``report.html``: self-contained (tables, run facts and the figures as base64 PNG; no script, no
  network access), next to the PNG files.

::

    write_report("runs/latest")   ->  [runs/latest/report.html, runs/latest/report-recall-vs-k.png,
                                       runs/latest/report-recall-at-10-over-time.png]

The input is ``compare.csv`` when the directory has one (the long table plus a ``protocol``
column), else ``results.csv``. Means, Δ% and fold counts are recomputed from that table with
:func:`evaluators.results.summarise` (per protocol), so they match ``summary.csv``.
This module is a plain library: no Prefect, no MLflow (``flows/report_cli.py`` adds those).
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: CI, servers, flows

import matplotlib.dates as mdates  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from sweval.data.errors import SwevalError  # noqa: E402
from sweval.evaluators.metrics import LABELS  # noqa: E402
from sweval.evaluators.results import summarise  # noqa: E402

_log = logging.getLogger(__name__)

DPI = 100
DEFAULT_K = 10
_PNG_METADATA = {"Software": None}  # byte-stable PNGs: no matplotlib version inside


# ---------------------------------------------------------------------------------------------
# Input


@dataclass(frozen=True)
class ReportData:
    """What a report is built from.

    Attributes:
        directory: the output directory read.
        table_file: the long table read (``results.csv`` or ``compare.csv``).
        results: the long table, with a ``protocol`` column ("" when the input has none).
        summary: per (protocol, algorithm, stratum, metric, k): mean, std, n_folds, n_skipped,
            delta, as :func:`~evaluators.results.summarise` computes them per protocol.
        config: ``config.json`` (``compare.json`` next to ``compare.csv``; empty when absent).
        folds: ``folds.csv`` (None when absent).
        units: ``units.csv`` (None when absent or empty).
    """

    directory: Path
    table_file: str
    results: pd.DataFrame
    summary: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)
    folds: pd.DataFrame | None = None
    units: pd.DataFrame | None = None

    @property
    def protocols(self) -> list[str]:
        return _unique(self.results["protocol"])

    @property
    def labelled_protocols(self) -> bool:
        """Whether protocols get their own headers (the input had a protocol column)."""
        return self.protocols != [""]

    @property
    def strata(self) -> list[str]:
        strata = _unique(self.results["stratum"])
        return sorted(strata, key=lambda s: s != "all")  # stable: "all" first, then as found

    @property
    def algorithms(self) -> list[str]:
        return _unique(self.results["algorithm"])

    @property
    def metrics(self) -> list[str]:
        return _unique(self.results["metric"])

    def ks(self, metric: str) -> list[int]:
        part = self.results.loc[self.results["metric"] == metric, "k"].dropna()
        return sorted({int(k) for k in part})


def _unique(values: pd.Series) -> list[str]:
    return [str(v) for v in dict.fromkeys(values.tolist())]


def read_results(path: str | Path) -> pd.DataFrame:
    """Read a long results table (``results.csv`` / ``compare.csv``) with its proper types.

    Strings stay strings (a policy called "NA" is not missing); ``k`` is nullable (R-precision
    has none), ``value`` is empty for skipped folds.
    """
    frame = pd.read_csv(
        path, keep_default_na=False, na_values={"value": [""], "k": [""]},
        dtype={"algorithm": str, "stratum": str, "metric": str, "skip_reason": str,
               "protocol": str},
    )
    required = {"fold", "algorithm", "stratum", "metric", "k", "value", "skipped"}
    missing = required - set(frame.columns)
    if missing:
        raise SwevalError(f"{path}: not a results table (missing {', '.join(sorted(missing))}).")
    frame["k"] = pd.to_numeric(frame["k"]).astype("Int64")
    frame["value"] = pd.to_numeric(frame["value"]).astype(np.float64)
    if frame["skipped"].dtype != bool:
        frame["skipped"] = frame["skipped"].astype(str).str.lower().isin(["true", "1"])
    if "protocol" not in frame.columns:
        frame["protocol"] = ""
    return frame


def summarise_protocols(results: pd.DataFrame) -> pd.DataFrame:
    """:func:`~evaluators.results.summarise` per protocol (Δ% is to the best within a protocol)."""
    parts = []
    for protocol, part in results.groupby("protocol", sort=False):
        summary = summarise(part.drop(columns="protocol").reset_index(drop=True))
        summary.insert(0, "protocol", str(protocol))
        parts.append(summary)
    return pd.concat(parts, ignore_index=True)


def load(directory: str | Path) -> ReportData:
    """Read an output directory.

    Raises:
        SwevalError: no such directory, or it holds neither ``compare.csv`` nor ``results.csv``.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise SwevalError(f"{directory}: no such directory.")
    for name in ("compare.csv", "results.csv"):
        if (directory / name).is_file():
            break
    else:
        raise SwevalError(
            f"{directory}: no results.csv or compare.csv here; give the output directory of "
            "`sweval run` or `sweval compare`."
        )
    results = read_results(directory / name)
    if results.empty:
        raise SwevalError(f"{directory / name}: the table has no rows.")
    config: dict[str, Any] = {}
    record = directory / ("compare.json" if name == "compare.csv" else "config.json")
    if record.is_file():
        try:
            config = json.loads(record.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            _log.warning("%s unreadable (%s); the report omits the run facts", record, exc)
    folds = _read_optional(directory / "folds.csv")
    units = _read_optional(directory / "units.csv")
    return ReportData(
        directory=directory, table_file=name, results=results,
        summary=summarise_protocols(results), config=config, folds=folds, units=units,
    )


def _read_optional(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=False, na_values={"t_start": [""]})
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError):
        return None
    return None if frame.empty else frame


# ---------------------------------------------------------------------------------------------
# Tables (paper Tables 2-3)


@dataclass(frozen=True)
class Cell:
    """One algorithm's summary at one (protocol, stratum, metric, k)."""

    mean: float
    delta: float
    std: float
    n_folds: int
    n_skipped: int
    best: bool


@dataclass(frozen=True)
class MetricTable:
    """The Table 2/3 layout of one metric.

    Attributes:
        metric: the metric name (``recall``, ...).
        strata: row blocks, in order.
        ks: rows within each block (``None`` for a metric without k, R-precision).
        columns: column blocks and columns: (protocol, algorithm), in order.
        cells: ``{(protocol, stratum, algorithm, k): Cell}``; a missing key is an algorithm the
            protocol does not run (e.g. POP-N under LOOCV).
    """

    metric: str
    strata: list[str]
    ks: list[int | None]
    columns: list[tuple[str, str]]
    cells: dict[tuple[str, str, str, int | None], Cell]

    def folds_used(self, protocol: str, stratum: str, algorithm: str) -> tuple[int, int] | None:
        """(used, skipped) folds of a column in a block, the most over its k."""
        found = [c for (p, s, a, _), c in self.cells.items()
                 if (p, s, a) == (protocol, stratum, algorithm)]
        if not found:
            return None
        return max(c.n_folds for c in found), max(c.n_skipped for c in found)


def metric_table(summary: pd.DataFrame, metric: str) -> MetricTable:
    """The Table 2/3 layout of ``metric`` from a per-protocol summary.

    A cell is best when its mean is the largest (and > 0) among the algorithms of its
    (protocol, stratum, k); ties are all best.
    """
    part = summary[summary["metric"] == metric]
    if part.empty:
        raise SwevalError(f"metric {metric!r} is not in the results.")
    part = part.assign(key_k=[None if pd.isna(k) else int(k) for k in part["k"]])
    groups = part.groupby(["protocol", "stratum", "metric", "k"], dropna=False)
    top = groups["mean"].transform("max")
    strata = sorted(_unique(part["stratum"]), key=lambda s: s != "all")
    ks = sorted(set(part["key_k"]), key=lambda k: (k is None, k or 0))
    columns = list(dict.fromkeys(zip(part["protocol"].astype(str), part["algorithm"].astype(str))))
    cells = {}
    for row, best in zip(part.itertuples(index=False), top, strict=True):
        mean = float(row.mean)
        cells[(str(row.protocol), str(row.stratum), str(row.algorithm), row.key_k)] = Cell(
            mean=mean, delta=float(row.delta), std=float(row.std), n_folds=int(row.n_folds),
            n_skipped=int(row.n_skipped),
            best=bool(np.isfinite(mean) and best > 0 and mean >= best),
        )
    return MetricTable(metric=metric, strata=strata, ks=ks, columns=columns, cells=cells)


def metric_label(metric: str, k: int | None = None) -> str:
    """``Recall@10``, ``R-precision``, or the raw name for an unknown metric."""
    label = LABELS.get(metric, metric)
    return label if k is None else f"{label}@{k}"


def format_mean(value: float) -> str:
    return "—" if not np.isfinite(value) else f"{value:.4f}"


def format_delta(cell: Cell) -> str:
    if cell.best:
        return "best"
    if not np.isfinite(cell.delta):
        return "—"
    return f"{100 * cell.delta:+.1f}%".replace("-", "−")


MAX_TABLE_ALGORITHMS = 10  # value columns per table: protocols side by side up to this many


def protocol_groups(table: MetricTable, limit: int = MAX_TABLE_ALGORITHMS) -> list[list[str]]:
    """Protocols side by side in one table (the paper's Table 2) while their columns fit in
    ``limit`` algorithms; more start another table below."""
    groups: list[list[str]] = []
    width = 0
    for protocol in dict.fromkeys(p for p, _ in table.columns):
        n = sum(p == protocol for p, _ in table.columns)
        if groups and width + n <= limit:
            groups[-1].append(protocol)
            width += n
        else:
            groups.append([protocol])
            width = n
    return groups


def table_html(
    table: MetricTable, *, show_protocols: bool, protocols: Sequence[str] | None = None
) -> str:
    """The table (of ``protocols``, default all) as HTML: value cells carry ``data-*`` keys and
    the full-precision mean."""
    esc = html.escape
    if protocols is None:
        protocols = list(dict.fromkeys(p for p, _ in table.columns))
    by_protocol = {p: [a for q, a in table.columns if q == p] for p in protocols}
    out = [f'<div class="scroll"><table class="metric" data-metric="{esc(table.metric)}">']
    out.append("<thead>")
    if show_protocols:
        out.append('<tr><th rowspan="2">stratum</th><th rowspan="2">k</th>')
        for p in protocols:
            out.append(f'<th colspan="{2 * len(by_protocol[p])}" class="protocol">{esc(p)}</th>')
        out.append("</tr>")
        out.append("<tr>")
    else:
        out.append("<tr><th>stratum</th><th>k</th>")
    for p in protocols:
        for a in by_protocol[p]:
            out.append(f'<th class="alg">{esc(a)}</th><th class="d">Δ%</th>')
    out.append("</tr></thead>")
    for stratum in table.strata:
        out.append(f'<tbody data-stratum="{esc(stratum)}">')
        for i, k in enumerate(table.ks):
            out.append("<tr>")
            if i == 0:
                out.append(f'<th rowspan="{len(table.ks) + 1}" class="stratum">{esc(stratum)}</th>')
            out.append(f'<td class="k">{"—" if k is None else k}</td>')
            for p in protocols:
                for a in by_protocol[p]:
                    cell = table.cells.get((p, stratum, a, k))
                    if cell is None:
                        out.append('<td class="v na">n/a</td><td class="d"></td>')
                        continue
                    title = (f"{a}, {metric_label(table.metric, k)}: mean {cell.mean:.6g}, "
                             f"std {cell.std:.4g} over {cell.n_folds} folds "
                             f"({cell.n_skipped} skipped)")
                    attrs = (f'data-protocol="{esc(p)}" data-algorithm="{esc(a)}" '
                             f'data-k="{"" if k is None else k}" data-mean="{cell.mean!r}" '
                             f'title="{esc(title)}"')
                    value = esc(format_mean(cell.mean))
                    if cell.best:
                        value = f"<strong>{value}</strong>"
                    out.append(f'<td class="v" {attrs}>{value}</td>'
                               f'<td class="d">{esc(format_delta(cell))}</td>')
            out.append("</tr>")
        out.append('<tr class="folds"><td class="k" title="folds used / skipped">folds</td>')
        for p in protocols:
            for a in by_protocol[p]:
                used = table.folds_used(p, stratum, a)
                text = "" if used is None else f"{used[0]} / {used[1]}"
                out.append(f'<td colspan="2">{text}</td>')
        out.append("</tr></tbody>")
    out.append("</table></div>")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Figures


def _colours(algorithms: Sequence[str]) -> dict[str, Any]:
    """One colour per algorithm, the same in every report: registry order first, then the rest."""
    from sweval.algorithms.registry import ALGORITHMS

    known = list(ALGORITHMS)
    extra = [a for a in algorithms if a not in ALGORITHMS]
    cmap = matplotlib.colormaps["tab10"]
    return {a: cmap((known.index(a) if a in ALGORITHMS else len(known) + extra.index(a)) % 10)
            for a in algorithms}


def _panel_title(data: ReportData, protocol: str, stratum: str) -> str:
    """"all users", "policy pop" (the stratification column's name when known), with the
    protocol in front when the input has protocols."""
    column = data.config.get("config", {}).get("stratify_by") or "stratum"
    where = "all users" if stratum == "all" else f"{column} {stratum}"
    return f"{protocol} — {where}" if data.labelled_protocols else where


def figure_vs_k(data: ReportData, metric: str) -> Figure:
    """Mean ``metric``@k against k, one line per algorithm; panels: protocols × strata."""
    summary = data.summary[(data.summary["metric"] == metric) & data.summary["k"].notna()]
    protocols, strata = data.protocols, data.strata
    colours = _colours(data.algorithms)
    # rows: protocols, columns: strata (the paper's Figure 2); one stratum: protocols side by
    # side (Figure 1)
    ncols, nrows = (len(protocols), 1) if len(strata) == 1 else (len(strata), len(protocols))
    total_width = max(7.0, min(4.6, 13.0 / ncols) * ncols)
    fig = Figure(figsize=(total_width, 3.3 * nrows + 0.5), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for i, (protocol, stratum) in enumerate((p, t) for p in protocols for t in strata):
        ax: Axes = axes[i]
        part = summary[(summary["protocol"] == protocol) & (summary["stratum"] == stratum)]
        drawn = False
        for algorithm in data.algorithms:
            rows = part[part["algorithm"] == algorithm].sort_values("k")
            rows = rows[rows["mean"].notna()]
            if rows.empty:
                continue
            ax.plot(rows["k"].astype(int), rows["mean"], marker="o", ms=4, lw=1.8,
                    color=colours[algorithm], label=algorithm)
            drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "every fold skipped" if not part.empty else "not run",
                    ha="center", va="center", transform=ax.transAxes, color="0.4")
        ks = data.ks(metric)
        ax.set_xticks(ks)
        ax.set_xlim(min(ks) - 1, max(ks) + 1)
        ax.set_xlabel("k")
        ax.set_ylim(bottom=0)
        ax.set_ylabel(f"mean {metric_label(metric)}@k")
        ax.grid(alpha=0.3)
        ax.set_title(_panel_title(data, protocol, stratum), fontsize=10)
    handles = [Line2D([], [], color=colours[a], marker="o", ms=4, label=a) for a in data.algorithms]
    fig.legend(handles=handles, loc="outside upper center", frameon=False,
               ncols=max(1, min(len(handles), int(total_width / 1.4))))
    return fig


def _over_time_panels(data: ReportData) -> list[tuple[str, str]]:
    """(protocol, stratum) pairs whose folds lie on a timeline (several distinct t_start)."""
    panels = []
    for protocol in data.protocols:
        part = data.results[data.results["protocol"] == protocol]
        if "t_start" not in part or pd.to_numeric(part["t_start"], errors="coerce").nunique() < 2:
            continue  # LOOCV-like protocols: repetitions, not time
        panels += [(protocol, s) for s in data.strata if (part["stratum"] == s).any()]
    return panels


def figure_over_time(data: ReportData, metric: str, k: int | None) -> Figure | None:
    """``metric``@k per fold, n_eligible as bars behind, skipped folds marked; one panel per
    (protocol, stratum) on a timeline. None when no protocol has a timeline."""
    panels = _over_time_panels(data)
    if not panels:
        return None
    colours = _colours(data.algorithms)
    u_min = data.config.get("config", {}).get("u_min")
    fig = Figure(figsize=(12.5, 2.9 * len(panels) + 0.6), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True)
    res = data.results
    selected = (res["metric"] == metric) & (res["k"].isna() if k is None else res["k"] == k)
    for ax, (protocol, stratum) in zip(axes[:, 0], panels, strict=True):
        part = res[selected & (res["protocol"] == protocol) & (res["stratum"] == stratum)]
        per_fold = part.groupby("fold", sort=True).agg(
            t_start=("t_start", "first"), t_end=("t_end", "first"),
            n_eligible=("n_eligible", "max"), skipped=("skipped", "all"),
        )
        start = pd.to_datetime(per_fold["t_start"].astype(np.int64), unit="s")
        seconds = (per_fold["t_end"] - per_fold["t_start"]).astype(np.int64)
        width = pd.to_timedelta(seconds, unit="s")
        middle = start + width / 2
        bars = ax.twinx()
        bars.bar(start, per_fold["n_eligible"], width=width * 0.92, align="edge",
                 color=np.where(per_fold["skipped"], "#f4c7c3", "#dddddd"),
                 edgecolor=np.where(per_fold["skipped"], "#c0392b", "none"),
                 linewidth=0.6, zorder=0)
        if u_min:
            bars.axhline(u_min, color="#c0392b", lw=0.8, ls=":", zorder=1)
        bars.set_ylabel("n_eligible", color="0.45")
        bars.tick_params(axis="y", colors="0.45")
        bars.set_ylim(0, max(1.0, float(per_fold["n_eligible"].max()), u_min or 0) * 1.15)
        ax.set_zorder(bars.get_zorder() + 1)  # the lines in front of the bars
        ax.patch.set_visible(False)
        for algorithm in data.algorithms:
            rows = part[part["algorithm"] == algorithm].set_index("fold").reindex(per_fold.index)
            if rows["algorithm"].isna().all():
                continue
            ax.plot(middle, rows["value"], marker="o", ms=3, lw=1.4, color=colours[algorithm],
                    label=algorithm)
        skipped = per_fold["skipped"].to_numpy()
        if skipped.any():
            ax.plot(middle[skipped], np.zeros(int(skipped.sum())), ls="none", marker="x",
                    ms=7, mew=1.6, color="#c0392b", clip_on=False)
        ax.set_ylim(bottom=0)
        if not np.isfinite(part["value"]).any():
            ax.set_ylim(0, 1)
            ax.text(0.5, 0.55, "every fold skipped", ha="center", va="center",
                    transform=ax.transAxes, color="0.3",
                    bbox={"facecolor": "white", "edgecolor": "0.8", "boxstyle": "round"})
        ax.set_ylabel(metric_label(metric, k))
        ax.grid(alpha=0.3)
        n_skip = int(skipped.sum())
        ax.set_title(f"{_panel_title(data, protocol, stratum)}: "
                     f"{len(per_fold) - n_skip} folds used, {n_skip} skipped", fontsize=10)
    locator = mdates.AutoDateLocator(maxticks=12)
    axes[-1, 0].xaxis.set_major_locator(locator)
    axes[-1, 0].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    axes[-1, 0].set_xlabel("fold window (UTC)")
    handles: list[Any] = [Line2D([], [], color=colours[a], marker="o", ms=3, label=a)
                          for a in data.algorithms]
    skip_label = "skipped fold" + (f" (n_eligible < u_min = {u_min})" if u_min else "")
    handles += [Patch(color="#dddddd", label="n_eligible (right axis)"),
                Line2D([], [], ls="none", marker="x", color="#c0392b", mew=1.6,
                       label=skip_label)]
    fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 6),
               frameon=False)
    return fig


def figure_png(fig: Figure) -> bytes:
    """The figure as PNG bytes (the Agg canvas, no pyplot state)."""
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata=_PNG_METADATA)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------
# HTML


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1320px;color:#222;padding:0 16px}
h1{font-size:1.5em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:10px 0 18px;font-size:.9em}
th,td{border:1px solid #ddd;padding:3px 7px}
thead th,td.k{white-space:nowrap}
thead th{background:#f3f4f6}
td.v{text-align:right;font-variant-numeric:tabular-nums}
td.d{text-align:right;color:#666;font-size:.9em}
td.k{text-align:center}th.stratum{background:#fafafa;vertical-align:top}
tr.folds td{color:#777;font-size:.85em;text-align:center;background:#fcfcfc}
td.na{color:#aaa;text-align:center}
div.scroll{overflow-x:auto}
img{max-width:100%;height:auto;border:1px solid #eee}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:.92em}
dl.facts dt{color:#666}dl.facts dd{margin:0}
details{margin:8px 0}summary{cursor:pointer;color:#333}
.muted{color:#777;font-size:.9em}
"""


def _date(t: Any) -> str:
    try:
        return datetime.fromtimestamp(int(t), tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError, OSError):
        return "—"


def _facts_html(data: ReportData, origin: str | None) -> str:
    config = data.config.get("config", {})
    facts: list[tuple[str, str]] = []
    d = data.config.get("data", {})
    if d:
        counts = ", ".join(f"{d[key]:,} {noun}" for key, noun in (
            ("n_interactions", "interactions"), ("n_users", "users"), ("n_items", "items"))
            if isinstance(d.get(key), int))
        facts.append(("data", f"{d.get('source', '?')}" + (f": {counts}" if counts else "")))
        if "t_min" in d:
            facts.append(("time span", f"{_date(d['t_min'])} → {_date(d.get('t_max'))} UTC"))
    if config:
        protocol = (f"window {config.get('window')}, {config.get('folds')} folds, "
                    f"u_min = {config.get('u_min')}, k = {config.get('k')}, "
                    f"relevance {config.get('relevance')}, dedup {config.get('dedup')}")
        if config.get("train_window"):
            protocol += f", training window {config['train_window']}"
        facts.append(("protocol", protocol))
        if config.get("stratify_by"):
            facts.append(("strata", f"by {config['stratify_by']} "
                          f"(mode {config.get('stratify_mode')})"))
    if data.config.get("protocols"):
        protocols = ", ".join(map(str, data.config["protocols"]))
        if "loocv_repeats" in data.config:
            protocols += f" (LOOCV: {data.config['loocv_repeats']} repetitions)"
        facts.append(("protocols", protocols))
    if "folds_used" in data.config:
        facts.append(("folds", f"{data.config['folds_used']} used, "
                      f"{data.config.get('folds_skipped', 0)} skipped"))
    params = data.config.get("resolved_params")
    devices = data.config.get("devices", {})
    for algorithm in data.algorithms if params is not None else []:
        bits = [", ".join(f"{p}={v}" for p, v in params.get(algorithm, {}).items()) or "defaults"]
        if isinstance(devices.get(algorithm), str):
            bits.append(f"device {devices[algorithm]}")
        facts.append((algorithm, "; ".join(bits)))
    if data.config.get("run_key"):
        facts.append(("run key", str(data.config["run_key"])))
    facts.append(("source", origin or str(data.directory / data.table_file)))
    rows = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in facts)
    return f'<dl class="facts">{rows}</dl>'


def _frame_html(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f'<table class="plain"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _folds_html(data: ReportData) -> str:
    folds = data.folds
    if folds is None or "skipped" not in folds:
        return ""
    skipped = folds["skipped"].astype(str).str.lower() == "true"
    shown = folds.copy()
    for column in ("t_start", "t_end"):
        if column in shown:
            shown[column] = shown[column].map(_date)
    reasons = folds.loc[skipped, "skip_reason"].astype(str).value_counts()
    reason_text = "".join(
        f"<li>{html.escape(r)} ({n} fold{'s' * (n != 1)})</li>" for r, n in reasons.items()
    )
    strata_note = (" (for all users; a stratum also skips the folds where its own n_eligible "
                   "is below u_min — see the per-fold figure)" if len(data.strata) > 1 else "")
    return (
        f"<h2>Folds</h2><p>{len(folds)} folds: {int((~skipped).sum())} used, "
        f"{int(skipped.sum())} skipped{strata_note}.</p>"
        + (f"<ul>{reason_text}</ul>" if reason_text else "")
        + f"<details><summary>folds.csv</summary>{_frame_html(shown)}</details>"
    )


def _timings_html(data: ReportData) -> str:
    units = data.units
    if units is None or "algorithm" not in units:
        return ""
    stages = [c for c in units.columns if c.endswith("_s")]
    if not stages:
        return ""
    total = units.groupby("algorithm", sort=False)[stages].sum()
    total["total_s"] = total.sum(axis=1)
    shown = total.reset_index().round(2)
    return ("<details><summary>Compute time per algorithm (seconds, summed over folds)"
            f"</summary>{_frame_html(shown)}</details>")


def _img(png: bytes, alt: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}"></p>'


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


def write_report(
    output_dir: str | Path,
    *,
    metrics: Sequence[str] = ("recall",),
    k: int | None = None,
    destination: str | Path | None = None,
    title: str | None = None,
    origin: str | None = None,
) -> list[Path]:
    """Build the report of an output directory and write it.

    Args:
        output_dir: a directory written by ``sweval run`` or ``sweval compare``.
        metrics: the metrics to report (``recall``, ``hit_rate``, ``ndcg``, ``r_precision``), or
            ``["all"]`` for every metric in the results. Tables and figures come per metric.
        k: the cut-off of the over-time figures (default 10, else the middle k of the run).
        destination: where to write (default: ``output_dir``).
        title: the HTML title (default: from the data source).
        origin: where the results came from, as shown in the report (default: the table's path;
            e.g. "MLflow run <id>" when they were downloaded).

    Returns:
        The written files: ``report.html`` first, then the PNG figures
        (``report-<metric>-vs-k.png``, ``report-<metric>-at-<k>-over-time.png``).

    Raises:
        SwevalError: unreadable directory, a metric or k not in the results.
    """
    data = load(output_dir)
    chosen = data.metrics if list(metrics) == ["all"] else list(dict.fromkeys(metrics))
    unknown = [m for m in chosen if m not in data.metrics]
    if unknown:
        raise SwevalError(
            f"metric(s) {', '.join(unknown)} not in the results (they have "
            f"{', '.join(data.metrics)})."
        )
    k_time = {metric: _choose_k(data, metric, k) for metric in chosen}
    target = Path(destination) if destination is not None else data.directory
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SwevalError(f"{target}: cannot create the report directory ({exc}).") from exc
    source = data.config.get("data", {}).get("source") or data.directory.name
    title = title or f"SW-EVAL report — {source}"

    pngs: list[tuple[str, bytes]] = []
    sections: list[str] = []
    for metric in chosen:
        table = metric_table(data.summary, metric)
        label = metric_label(metric) + ("" if table.ks == [None] else "@k")
        parts = [
            f"<h2>{html.escape(metric_label(metric))}</h2>",
            f'<p class="muted">Mean {html.escape(label)} over the non-skipped folds. Δ% = mean '
            "/ best − 1 at the same k, stratum and protocol; the best is in bold. Row “folds”: "
            "folds used / skipped. Hover a value for its standard deviation.</p>",
        ]
        parts += [table_html(table, show_protocols=data.labelled_protocols, protocols=group)
                  for group in protocol_groups(table)]
        if data.ks(metric):
            name = f"report-{_slug(metric)}-vs-k.png"
            png = figure_png(figure_vs_k(data, metric))
            pngs.append((name, png))
            parts.append(f"<h3>Mean {html.escape(metric_label(metric))}@k against k</h3>"
                         + _img(png, f"mean {metric_label(metric)}@k against k"))
        fig = figure_over_time(data, metric, k_time[metric])
        if fig is not None:
            label = metric_label(metric, k_time[metric])
            at = "" if k_time[metric] is None else f"-at-{k_time[metric]}"
            name = f"report-{_slug(metric)}{at}-over-time.png"
            png = figure_png(fig)
            pngs.append((name, png))
            parts.append(
                f"<h3>{html.escape(label)} per fold</h3><p class=\"muted\">Lines: each "
                f"algorithm's {html.escape(label)} on each fold's window. Grey bars (right axis): "
                "the fold's eligible users; red bars and × : skipped folds (below u_min, dotted "
                "line); no value is computed for them.</p>" + _img(png, f"{label} per fold")
            )
        sections.append("\n".join(parts))

    generated = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p class=\"muted\">Generated {generated} from {html.escape(data.table_file)}; "
        "values are macro means over non-skipped folds (SPEC §4).</p>"
        + _facts_html(data, origin)
        + "\n".join(sections)
        + _folds_html(data)
        + _timings_html(data)
        + "</body></html>\n"
    )
    written = [target / "report.html"]
    try:
        written[0].write_text(page, encoding="utf-8")
        for name, png in pngs:
            (target / name).write_bytes(png)
            written.append(target / name)
    except OSError as exc:
        raise SwevalError(f"{target}: cannot write the report ({exc}).") from exc
    return written
