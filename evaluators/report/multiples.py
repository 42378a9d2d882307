"""The per-fold figure as small multiples, for runs with many algorithm configurations.

One line per algorithm on one axis is unreadable past half a dozen (eleven configurations gave
eleven overlapping lines): :func:`figure_small_multiples` draws one small panel per algorithm,
its own line in its colour over the others in light grey, on a shared y axis, so each series
can be read and compared with the rest at a glance.
"""

from __future__ import annotations

import math

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sweval.evaluators.report.data import ReportData
from sweval.evaluators.report.tables import metric_label

#: More algorithms than this: the per-fold figure is drawn as small multiples.
MAX_LINES = 6
#: Panels per row of the small multiples.
COLUMNS = 3


def figure_small_multiples(data: ReportData, metric: str, k: int | None, protocol: str,
                           stratum: str, title: str) -> Figure:
    """``metric``@k per fold, one panel per algorithm (its line in colour, the others grey),
    on a shared y axis, for one (protocol, stratum) of ``data``; skipped folds are marked with
    an x on the time axis."""
    from sweval.evaluators.report.figures import DPI, series_colours

    res = data.results
    selected = (res["metric"] == metric) & (res["k"].isna() if k is None else res["k"] == k)
    part = res[selected & (res["protocol"] == protocol) & (res["stratum"] == stratum)]
    folds = part.groupby("fold", sort=True).agg(t_start=("t_start", "first"),
                                                 t_end=("t_end", "first"),
                                                 skipped=("skipped", "all"))
    start = pd.to_datetime(folds["t_start"].astype(np.int64), unit="s")
    middle = start + pd.to_timedelta((folds["t_end"] - folds["t_start"]).astype(np.int64),
                                     unit="s") / 2
    series = {algorithm: part[part["algorithm"] == algorithm].set_index("fold")["value"]
              .reindex(folds.index) for algorithm in data.algorithms
              if (part["algorithm"] == algorithm).any()}
    colours = series_colours(data.algorithms)
    rows = math.ceil(len(series) / COLUMNS)
    fig = Figure(figsize=(12.5, 2.2 * rows + 0.6), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, COLUMNS, squeeze=False, sharex=True, sharey=True)
    skipped = folds["skipped"].to_numpy()
    for ax, (algorithm, values) in zip(axes.flat, series.items(), strict=False):
        for other, others in series.items():
            if other != algorithm:
                ax.plot(middle, others, lw=0.8, color="0.82", zorder=1)
        ax.plot(middle, values, marker="o", ms=3, lw=1.6, color=colours[algorithm], zorder=2)
        if skipped.any():
            ax.plot(middle[skipped], np.zeros(int(skipped.sum())), ls="none", marker="x",
                    ms=6, mew=1.4, color="#c0392b", clip_on=False)
        ax.set_title(algorithm, fontsize=9, color=colours[algorithm], wrap=True)
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    for ax in list(axes.flat)[len(series):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(metric_label(metric, k))
    locator = mdates.AutoDateLocator(maxticks=6)
    for ax in axes[-1, :]:
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    fig.suptitle(f"{title}: one panel per algorithm (grey: the others)"
                 + ("; x: skipped fold" if skipped.any() else ""), fontsize=10)
    return fig
