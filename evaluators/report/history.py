"""The report of a sweep of training-window lengths (``sweval run --train-window 30D,90D,all``).

``report.html`` in the sweep's directory: the mean of the report's metric at its k per algorithm
and length with its interval, the loss against the last length and the fit seconds
(``history.csv``), the same with the length tuned per fold (``tuned``; its choices in
``history_tuning.csv``), a figure of the metric against the length per algorithm
(``report-history.png``: intervals as error bars, the tuned series as a dashed line), and
links to each length's own report (``train-<length>/report.html``).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sweval.evaluators.experiments.history_tuning import TUNED_LENGTH
from sweval.evaluators.report.drawn import ReportFigure
from sweval.evaluators.report.figures import DPI, figure_png, series_colours
from sweval.evaluators.report.tables import metric_label
from sweval.evaluators.report.widths import at

FIGURE = "report-history.png"


def history_figure(table: pd.DataFrame, metric: str, k: int | None) -> ReportFigure:
    """The mean of ``metric`` at ``k`` against the training-window length, one line per
    algorithm, and its tuned series (if any) as a dashed level across."""
    rows = at(table, metric, k)
    fixed = rows[rows["train_window"] != TUNED_LENGTH]
    lengths = list(dict.fromkeys(fixed["train_window"]))
    algorithms = list(dict.fromkeys(fixed["algorithm"]))
    colours = series_colours(algorithms)
    fig = Figure(figsize=(6.4, 4.4), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    for i, algorithm in enumerate(algorithms):  # each a little aside: the bars stay apart
        mine = fixed[fixed["algorithm"] == algorithm]
        x = mine["train_window"].map(lengths.index) + 0.05 * (i - (len(algorithms) - 1) / 2)
        low = (mine["mean"] - mine["ci_low"]).to_numpy(dtype=float)
        high = (mine["ci_high"] - mine["mean"]).to_numpy(dtype=float)
        errors = None if np.isnan(low).all() else np.vstack([low, high])
        ax.errorbar(x, mine["mean"], yerr=errors, marker="o", capsize=3,
                    color=colours[algorithm], label=algorithm)
        tuned = rows[(rows["train_window"] == TUNED_LENGTH) & (rows["algorithm"] == algorithm)]
        if len(tuned):
            ax.axhline(float(tuned["mean"].iloc[0]), color=colours[algorithm], linestyle="--",
                       linewidth=1, label=f"{algorithm}, tuned per fold")
    ax.set_xticks(range(len(lengths)), lengths)
    ax.set_xlabel("training window (history before each window)")
    label = metric_label(metric, k)
    ax.set_ylabel(f"mean {label} over folds")
    fig.legend(fontsize=8, frameon=False, loc="outside lower center", ncols=2)
    ax.set_title(f"{label} against the training history", fontsize=10)
    return ReportFigure(FIGURE, figure_png(fig), f"Mean {label} over folds against the "
                        "training-window length, per algorithm")


def history_page(table: pd.DataFrame, metric: str, k: int | None, *, title: str,
                 figure: ReportFigure, links: dict[str, str]) -> str:
    """``report.html`` of the sweep (see the module docstring)."""
    rows = at(table, metric, k)
    label = metric_label(metric, k)
    cells = rows.assign(cell=[
        f"{m:.4f} [{lo:.4f}, {hi:.4f}] {loss:+.1%}, {fit:.1f} s" if np.isfinite(lo)
        else f"{m:.4f} {loss:+.1%}, {fit:.1f} s"
        for m, lo, hi, loss, fit in zip(rows["mean"], rows["ci_low"], rows["ci_high"],
                                        rows["loss"], rows["fit_s"], strict=True)])
    means = cells.pivot(index="algorithm", columns="train_window", values="cell").reindex(
        index=list(dict.fromkeys(rows["algorithm"])),
        columns=list(dict.fromkeys(rows["train_window"])))
    runs = "".join(f'<li><a href="{html.escape(href)}">{html.escape(length)}</a></li>'
                   for length, href in links.items())
    tuned = ("" if TUNED_LENGTH not in means.columns else
             f"<p><code>{TUNED_LENGTH}</code>: on each fold, the length whose --tune-metric was "
             "best on the windows before it (its fits are every length's; the choices are in "
             "history_tuning.csv).</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>
<body>
<h1>{html.escape(title)}</h1>
<h2>Training history: {html.escape(label)}</h2>
<p>Mean {html.escape(label)} over the folds with its interval, the loss against the last
length and the fit seconds over the folds (history.csv). Every length is scored on the same
folds; only the training data change.</p>
{means.to_html(na_rep="–")}
{tuned}
<p><img src="data:image/png;base64,{figure.base64}" alt="{html.escape(figure.alt)}"></p>
<h3>Each length's report</h3>
<ul>{runs}</ul>
</body></html>
"""
