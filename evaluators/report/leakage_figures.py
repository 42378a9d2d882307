"""The leakage-severity figure (papers/000 Fig. 8): HR@k and NDCG@k against the number j of
future periods in training, one line per algorithm.

``decay-pop``, when evaluated, is drawn as a dashed horizontal line at its j = 0 value: the
leak-free reference (004 §3.2) that the leaky models are read against.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from sweval.evaluators.metrics.names import LABELS
from sweval.evaluators.report.figures import DPI, legend_above, series_colours

REFERENCE = "decay-pop"


def severity_figure(results: pd.DataFrame, algorithms: Sequence[str], k: int,
                    metrics: Sequence[str] = ("hit_rate", "ndcg")) -> Figure:
    """One panel per metric: metric@k against j."""
    rows = results[(results["stratum"] == "all") & ~results["skipped"].astype(bool)
                   & (results["k"] == k)]
    colours = series_colours(algorithms)
    fig = Figure(figsize=(4.6 * len(metrics), 3.4), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(metrics), squeeze=False).ravel()
    for ax, metric in zip(axes, metrics, strict=True):
        part = rows[rows["metric"] == metric]
        for algorithm in algorithms:
            line = part[part["algorithm"] == algorithm].sort_values("fold")
            if line.empty:
                continue
            ax.plot(line["fold"], line["value"], marker="o", ms=4, lw=1.6,
                    color=colours[algorithm], label=algorithm)
            if algorithm.split("(")[0] == REFERENCE:
                base = line[line["fold"] == 0]["value"]
                if len(base):
                    ax.axhline(float(base.iloc[0]), color=colours[algorithm], ls="--", lw=1.0,
                               label=f"{algorithm} at j = 0 (leak-free)")
        ax.set_xlabel("future periods in training (j)")
        ax.set_title(f"{LABELS.get(metric, metric)}@{k}", fontsize=10)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
    legend_above(fig, axes[0].get_legend_handles_labels()[0])
    return fig
