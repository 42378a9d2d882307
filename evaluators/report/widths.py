"""The report of a comparison of window widths (``sweval run --window 1D,3D,7D``).

``report.html`` in the comparison's directory: the mean of the report's metric at its k per
algorithm and width with the rank in brackets (``widths.csv``), Kendall's τ between every pair
of widths (``widths_kendall.csv``), a figure of the metric against the width per algorithm
(``report-widths.png``, bootstrap intervals as error bars where the runs have them), and links to
each width's own report (``window-<width>/report.html``).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sweval.evaluators.report.drawn import ReportFigure
from sweval.evaluators.report.figures import DPI, figure_png, series_colours
from sweval.evaluators.report.tables import metric_label

FIGURE = "report-widths.png"


def at(table: pd.DataFrame, metric: str, k: int | None) -> pd.DataFrame:
    """The rows of ``table`` (widths.csv or widths_kendall.csv) at ``metric`` and ``k``."""
    rows = table[table["metric"] == metric]
    return rows[rows["k"].isna()] if k is None else rows[rows["k"] == k]


def widths_figure(table: pd.DataFrame, metric: str, k: int | None) -> ReportFigure:
    """The mean of ``metric`` at ``k`` against the window width, one line per algorithm."""
    rows = at(table, metric, k)
    widths = list(dict.fromkeys(rows["window"]))
    order = sorted(widths, key=lambda w: int(rows.loc[rows["window"] == w, "width_s"].iloc[0]))
    position = {width: i for i, width in enumerate(order)}
    algorithms = list(dict.fromkeys(rows["algorithm"]))
    colours = series_colours(algorithms)
    fig = Figure(figsize=(6.4, 3.8), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    for i, algorithm in enumerate(algorithms):  # each a little aside: the bars stay apart
        mine = rows[rows["algorithm"] == algorithm].copy()
        mine["x"] = mine["window"].map(position) + 0.05 * (i - (len(algorithms) - 1) / 2)
        mine = mine.sort_values("x")
        low = (mine["mean"] - mine["ci_low"]).to_numpy(dtype=float)
        high = (mine["ci_high"] - mine["mean"]).to_numpy(dtype=float)
        errors = None if np.isnan(low).all() else np.vstack([low, high])
        ax.errorbar(mine["x"], mine["mean"], yerr=errors, marker="o", capsize=3,
                    color=colours[algorithm], label=algorithm)
    ax.set_xticks(range(len(order)), order)
    ax.set_xlabel("window width tΔ")
    label = metric_label(metric, k)
    ax.set_ylabel(f"mean {label} over folds")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(f"{label} against the window width", fontsize=10)
    return ReportFigure(FIGURE, figure_png(fig),
                        f"Mean {label} over folds against the window width, per algorithm")


def widths_page(table: pd.DataFrame, kendall: pd.DataFrame, metric: str, k: int | None,
                *, title: str, figure: ReportFigure, links: dict[str, str]) -> str:
    """``report.html`` of the comparison (see the module docstring)."""
    rows = at(table, metric, k)
    label = metric_label(metric, k)
    cells = rows.assign(cell=[f"{m:.4f} ({r:g})" for m, r in zip(rows["mean"], rows["rank"],
                                                                  strict=True)])
    means = cells.pivot(index="algorithm", columns="window", values="cell")
    means = means.reindex(index=list(dict.fromkeys(rows["algorithm"])),
                          columns=list(dict.fromkeys(rows["window"])))
    taus = at(kendall, metric, k)[["window_a", "window_b", "tau", "p_value", "n_algorithms"]]
    runs = "".join(f'<li><a href="{html.escape(href)}">{html.escape(width)}</a></li>'
                   for width, href in links.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>
<body>
<h1>{html.escape(title)}</h1>
<h2>Window widths: {html.escape(label)}</h2>
<p>Mean {html.escape(label)} over each width's folds, and in brackets the algorithm's rank
within the width (1 = best; widths.csv). Each width is the run of <code>sweval run --window
W</code>: its own windows, ending at the first multiple of W after the last event (or starting at
--start).</p>
{means.to_html(na_rep="–")}
<h3>Kendall's τ between the widths' rankings</h3>
{taus.to_html(index=False, float_format="%.3f", na_rep="–")}
<p><img src="data:image/png;base64,{figure.base64}" alt="{html.escape(figure.alt)}"></p>
<h3>Each width's report</h3>
<ul>{runs}</ul>
</body></html>
"""
