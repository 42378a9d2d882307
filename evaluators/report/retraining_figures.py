"""The retraining section's figures (matplotlib; :mod:`evaluators.report.retraining` draws them
only for a run with ``--horizon`` or ``--cadence``): staleness against model age, and the
cadences' Pareto front of accuracy against fit cost."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sweval.evaluators.report.figures import DPI, legend_above


def staleness_figure(summary: pd.DataFrame, label: str,
                      colours: dict[str, tuple[float, ...]]) -> Figure:
    """Stale − fresh (paired over the windows) against age, one line per algorithm, with its
    bootstrap interval as a band."""
    fig = Figure(figsize=(7.0, 4.2), dpi=DPI, layout="constrained")
    ax: Axes = fig.subplots()
    handles = []
    for algorithm, part in summary.groupby("algorithm", sort=False):
        part = part.sort_values("age")
        colour = colours[str(algorithm)]
        (line,) = ax.plot(part["age"], part["mean_diff"], marker="o", color=colour,
                          label=str(algorithm))
        ax.fill_between(part["age"], part["diff_ci_low"], part["diff_ci_high"], color=colour,
                        alpha=0.15, linewidth=0)
        handles.append(line)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ages = sorted(summary["age"].unique())
    days = summary.drop_duplicates("age").set_index("age")["age_s"] / 86_400
    ax.set_xticks(ages, [f"{a}\n({days[a]:g} d)" for a in ages])
    ax.set_xlabel("model age: windows since its fit (days)")
    ax.set_ylabel(f"{label}: stale − retrained")
    legend_above(fig, handles)
    return fig


def pareto_figure(summary: pd.DataFrame, label: str,
                   colours: dict[str, tuple[float, ...]]) -> Figure:
    """Per algorithm and cadence: the fit (+ update) seconds relative to cadence 1's (x, log
    scale: an update may cost more than the fit it replaces) and the paired difference in
    ``label`` (y, with its interval); points of one algorithm and policy joined by cadence."""
    fig = Figure(figsize=(7.0, 4.2), dpi=DPI, layout="constrained")
    ax: Axes = fig.subplots()
    handles = []
    policy = summary["policy"] if "policy" in summary else pd.Series("retrain", summary.index)
    for (algorithm, name), part in summary.groupby(["algorithm", policy], sort=False):
        part = part.sort_values("cadence")
        if name != "retrain":  # the update series starts from the same point, cadence 1
            part = pd.concat([summary[(summary["algorithm"] == algorithm) & (policy == "retrain")
                                      & (summary["cadence"] == 1)], part])
        share = part["fit_share"].to_numpy(float)
        diff = part["mean_diff"].to_numpy(float)
        low = np.nan_to_num(diff - part["diff_ci_low"].to_numpy(float))
        high = np.nan_to_num(part["diff_ci_high"].to_numpy(float) - diff)
        colour = colours[str(algorithm)]
        container = ax.errorbar(share, diff, yerr=[low, high], marker="o", color=colour,
                                capsize=3, linestyle="-" if name == "retrain" else "--",
                                label=str(algorithm) if name == "retrain"
                                else f"{algorithm}, updated between retrains")
        for x, y, cadence in zip(share, diff, part["cadence"], strict=True):
            ax.annotate(f"c={cadence}", (x, y), textcoords="offset points", xytext=(4, 4),
                        fontsize=7, color=colour)
        handles.append(container)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("fit (+ update) seconds / those of retraining every window (log scale)")
    ax.set_ylabel(f"{label}: cadence c − cadence 1")
    legend_above(fig, handles)
    return fig
