"""The report's figures, drawn with matplotlib (Agg canvas, no pyplot state) and saved as PNG.

- Figure 1/2 style (:func:`figure_vs_k`): mean metric@k against k, one line per algorithm, one
  panel per (protocol, stratum);
- over time (:func:`figure_over_time`): each algorithm's metric@k per fold, with the fold's
  n_eligible as a bar underlay (right axis) and the skipped folds marked;
- top-k overlap (:func:`figure_overlap`): mean Jaccard@k between algorithms as a heat map, the
  diagonal each algorithm's stability over consecutive folds (papers/000 Fig. 7's question).

:func:`figure_png` gives byte-stable PNG bytes (no matplotlib version inside).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
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

from sweval.evaluators.report.data import ReportData  # noqa: E402
from sweval.evaluators.report.tables import metric_label  # noqa: E402
from sweval.evaluators.wording import plural  # noqa: E402

DPI = 100
_PNG_METADATA = {"Software": None}  # byte-stable PNGs: no matplotlib version inside


#: Qualitative colour maps whose colours, in this order and without repeats, colour the series:
#: tab10 (matplotlib's default cycle) first, then tab20's lighter shades, tab20b and tab20c.
QUALITATIVE_MAPS = ("tab10", "tab20", "tab20b", "tab20c")


def _palette(n: int) -> list[tuple[float, ...]]:
    """At least ``n`` distinct colours: those of :data:`QUALITATIVE_MAPS` (60), then, past
    them, evenly spaced colours of the continuous map ``turbo``."""
    colours = list(dict.fromkeys(
        tuple(colour) for name in QUALITATIVE_MAPS for colour in matplotlib.colormaps[name].colors
    ))
    if n > len(colours):
        spaced = matplotlib.colormaps["turbo"](np.linspace(0.0, 1.0, n - len(colours)))
        colours += [tuple(colour) for colour in spaced]
    return colours


def series_colours(labels: Sequence[str]) -> dict[str, tuple[float, ...]]:
    """A distinct colour for every label; the same labels get the same colours.

    A built-in algorithm (``pop``, ``item-knn``, ...) takes its place in the registry's order of
    tab10, as in every report; every other label (a variant ``item-knn(n_neighbors=50)``, a
    tuned series ``item-knn[tuned]``, a plugin) takes the next colour no label took, in the
    order of ``labels``. The report's figures all pass every label of the report, so that a
    label has one colour in all of them.
    """
    from sweval.algorithms.registry import ALGORITHMS

    labels = list(dict.fromkeys(labels))
    palette = _palette(len(ALGORITHMS) + len(labels))
    slots = {name: i for i, name in enumerate(ALGORITHMS) if name in labels}
    free = (colour for i, colour in enumerate(palette) if i not in slots.values())
    return {label: palette[slots[label]] if label in slots else next(free) for label in labels}


def legend_above(fig: Figure, handles: Sequence[Any]) -> None:
    """The legend of a constrained-layout figure above its panels, in as many columns as the
    figure's width holds (fewer with long labels). The figure grows by the legend's height, so
    that the panels keep theirs, and to the legend's width when one column is wider. No
    handles: no legend."""
    if not handles:
        return
    renderer = FigureCanvasAgg(fig).get_renderer()
    margins = 2 * fig.get_layout_engine().get()["w_pad"] * fig.dpi  # pixels, left and right
    for ncols in range(len(handles), 0, -1):
        legend = fig.legend(handles=handles, loc="outside upper center", frameon=False,
                            ncols=ncols)
        box = legend.get_window_extent(renderer)
        if box.width + margins <= fig.bbox.width or ncols == 1:
            break
        legend.remove()
    fig.set_size_inches(max(fig.bbox.width, box.width + margins) / fig.dpi,
                        fig.get_figheight() + box.height / fig.dpi)


def _panel_title(data: ReportData, protocol: str, stratum: str) -> str:
    """"all users", "policy pop" (the stratification column's name when known), with the
    protocol in front when the input has protocols."""
    column = data.config.get("config", {}).get("stratify_by") or "stratum"
    where = "all users" if stratum == "all" else f"{column} {stratum}"
    if stratum in ("returning", "first-time"):
        where = f"{stratum} users"
    elif column == "user-history" and stratum != "all":
        where = f"users with {stratum} past interactions"
    return f"{protocol} — {where}" if data.labelled_protocols else where


def figure_vs_k(data: ReportData, metric: str) -> Figure:
    """Mean ``metric``@k against k, one line per algorithm; panels: protocols × strata."""
    summary = data.summary[(data.summary["metric"] == metric) & data.summary["k"].notna()]
    protocols, strata = data.protocols, data.strata
    colours = series_colours(data.algorithms)
    # rows: protocols, columns: strata (the paper's Figure 2); one stratum: protocols side by
    # side (Figure 1)
    ncols, nrows = (len(protocols), 1) if len(strata) == 1 else (len(strata), len(protocols))
    total_width = max(7.0, min(4.6, 13.0 / ncols) * ncols)
    fig = Figure(figsize=(total_width, 3.3 * nrows), dpi=DPI, layout="constrained")
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
    legend_above(fig, handles)
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
    (protocol, stratum) on a timeline. With more than ``MAX_LINES`` algorithms on one panel,
    small multiples instead (:mod:`evaluators.report.multiples`). None when no protocol has a
    timeline."""
    panels = _over_time_panels(data)
    if not panels:
        return None
    from sweval.evaluators.report.multiples import MAX_LINES, figure_small_multiples

    if len(data.algorithms) > MAX_LINES and len(panels) == 1:  # one line each: unreadable
        protocol, stratum = panels[0]
        return figure_small_multiples(data, metric, k, protocol, stratum,
                                      _panel_title(data, protocol, stratum))
    colours = series_colours(data.algorithms)
    u_min = data.config.get("config", {}).get("u_min")
    fig = Figure(figsize=(12.5, 2.9 * len(panels)), dpi=DPI, layout="constrained")
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
                     f"{plural(len(per_fold) - n_skip, 'fold')} used, {n_skip} skipped",
                     fontsize=10)
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
    legend_above(fig, handles)
    return fig


def figure_overlap(matrix: pd.DataFrame, k: int) -> Figure:
    """The algorithm × algorithm matrix of mean Jaccard@k (:func:`evaluators.stats.overlap.
    overlap_matrix`) as an annotated heat map on [0, 1]; blank cells were not compared."""
    labels = [str(label) for label in matrix.index]
    side = max(3.6, 0.62 * len(labels) + 2.4)
    fig = Figure(figsize=(side + 1.0, side), dpi=DPI, layout="constrained")
    ax: Axes = fig.subplots()
    values = matrix.to_numpy(dtype=float)
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=1.0)
    for (row, column), value in np.ndenumerate(values):
        if np.isfinite(value):
            ax.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if value > 0.6 else "white")
    ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_title(f"Top-{k} overlap: mean Jaccard over folds\n"
                 "(diagonal: the same algorithm on consecutive folds)", fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.8, label=f"Jaccard@{k}")
    return fig


def figure_png(fig: Figure) -> bytes:
    """The figure as PNG bytes (the Agg canvas, no pyplot state)."""
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata=_PNG_METADATA)
    return buffer.getvalue()
