"""``inspect.html`` and its figures: the dataset diagnostics of :mod:`evaluators.experiments.inspect`.

Figures (PNG, also embedded in the page):

- ``inspect-active-time.png``: the distribution (ECDF) of users' and items' active time in days
  (paper 000 Fig. 3);
- ``inspect-releases.png``: new items and users' last interactions per window (000 Fig. 4);
- ``inspect-eligible.png``: eligible users per window for each candidate width, with u_min
  (which windows would be skipped folds);
- ``inspect-popularity.png``: transactions per window of the three most popular items
  (000 Fig. 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.data.timestamps import minute_utc
from sweval.evaluators.experiments.inspect import (
    active_days,
    active_time,
    eligibility_by_width,
    top_item_popularity,
    window_activity,
)
from sweval.evaluators.report.drawn import ReportFigure
from sweval.evaluators.report.facts import PlainTable
from sweval.evaluators.report.figures import DPI, figure_png
from sweval.evaluators.report.html import environment
from sweval.evaluators.run.output_dir import claim, publish

PAGE_TEMPLATE = "inspect.html.j2"


@dataclass(frozen=True)
class Inspection:
    """Everything ``sweval inspect`` shows: tables as frames, figures as PNG."""

    source: str
    facts: list[tuple[str, str]]
    active: pd.DataFrame
    eligibility: pd.DataFrame
    activity: pd.DataFrame
    window_label: str
    u_min: int
    figures: list[ReportFigure]


def _dates(seconds: Sequence[int] | np.ndarray) -> np.ndarray:
    return pd.to_datetime(np.asarray(seconds), unit="s").to_numpy()


def _date_axis(ax: Axes) -> None:
    locator = mdates.AutoDateLocator(maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))



def inspect_log(
    log: InteractionLog, widths: Sequence[tuple[str, int]], window: tuple[str, int], u_min: int
) -> Inspection:
    """Compute the diagnostics and draw the figures.

    Args:
        widths: candidate window widths as (label, seconds).
        window: the width of the per-window figures and table, (label, seconds).
        u_min: the fold threshold to show against.
    """
    window_label, window_s = window
    activity = window_activity(log, window_s).frame
    eligibility = eligibility_by_width(log, widths, u_min)
    facts = [
        ("data", log.source),
        ("transactions", f"{len(log):,}"),
        ("users / items", f"{log.n_users:,} / {log.n_items:,}"),
        ("period", (f"{minute_utc(log.t_min)} → {minute_utc(log.t_max)} "
                    f"({(log.t_max - log.t_min) / 86400:.1f} days)")),
        ("density", f"{len(log) / max(1, log.n_users * log.n_items):.2e}"),
    ]  # fmt: skip
    if log.policy is not None and log.policy_ids is not None:  # --policy-col, or generated
        facts.append(("policies", _policy_counts(log.policy, log.policy_ids)))
    figures = [
        ReportFigure("inspect-active-time.png", figure_png(_active_figure(log)),
                     "Distribution of users' and items' active time in days"),
        ReportFigure("inspect-releases.png", figure_png(_releases_figure(activity, window_label)),
                     f"New items and users' last interactions per {window_label} window"),
        ReportFigure("inspect-eligible.png", figure_png(_eligible_figure(log, widths, u_min)),
                     "Eligible users per window for each candidate width"),
        ReportFigure("inspect-popularity.png",
                     figure_png(_popularity_figure(log, window_s, window_label)),
                     f"Transactions per {window_label} window of the three most popular items"),
    ]  # fmt: skip
    return Inspection(
        source=log.source, facts=facts, active=active_time(log), eligibility=eligibility,
        activity=activity, window_label=window_label, u_min=u_min, figures=figures,
    )  # fmt: skip


def _policy_counts(policy: np.ndarray, labels: np.ndarray, shown: int = 10) -> str:
    """Transactions per logging policy, most first: ``email 1,204; web 980`` (the strata of
    ``sweval run --stratify-by``)."""
    counts = np.bincount(policy, minlength=len(labels))
    order = sorted(range(len(labels)), key=lambda code: (-counts[code], str(labels[code])))
    text = "; ".join(f"{labels[code]} {counts[code]:,}" for code in order[:shown])
    return text + (f"; and {len(order) - shown:,} more" if len(order) > shown else "")


def write_inspection(inspection: Inspection, directory: Path) -> list[Path]:
    """Write ``inspect.html``, the PNGs and ``inspect-windows.csv``; the paths, page first."""
    claim(directory)
    windows = inspection.activity.assign(t_start=lambda f: _dates(f["t_start"]))
    files = {"inspect.html": render(inspection).encode("utf-8")} | {
        fig.file_name: fig.png for fig in inspection.figures} | {
        "inspect-windows.csv": windows.to_csv(index=False).encode()}
    try:
        publish(directory, files, run="", command="inspect")
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot write the inspection ({exc}).") from exc
    return [directory / name for name in files]


def render(inspection: Inspection) -> str:
    """The page's HTML (self-contained: tables and inline PNGs)."""
    activity = inspection.activity.assign(
        t_start=[minute_utc(int(t)) for t in inspection.activity["t_start"]]
    )
    return environment().get_template(PAGE_TEMPLATE).render(
        title=f"Dataset diagnostics — {inspection.source}",
        facts=inspection.facts,
        active=PlainTable.of(format_frame(inspection.active)),
        eligibility=PlainTable.of(format_frame(inspection.eligibility)),
        activity=PlainTable.of(format_frame(activity.tail(60))),
        n_windows=len(activity),
        window_label=inspection.window_label,
        u_min=inspection.u_min,
        figures=inspection.figures,
    )


#: Column headings as shown (the frames keep their programmatic names).
HEADINGS = {
    "usable_share": "usable %", "median_eligible": "median eligible",
    "p10_eligible": "p10 eligible", "median_interactions": "median transactions",
    "single": "0 days %", "mean_days": "mean d", "median_days": "median d", "p90_days": "p90 d",
    "max_days": "max d", "active_users": "active users", "new_users": "new users",
    "new_items": "new items", "last_interactions": "last interactions",
    "eligible_users": "eligible", "t_start": "window start",
}


def format_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as people read them: shares as %, other floats with one decimal, counts with
    thousands separators; headings from :data:`HEADINGS`."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if column.endswith("share") or column == "single":
            out[column] = [f"{v:.1%}" for v in values]
        elif pd.api.types.is_float_dtype(values):
            out[column] = [f"{v:,.1f}" for v in values]
        elif pd.api.types.is_integer_dtype(values):
            out[column] = [f"{v:,}" for v in values]
    return out.rename(columns=HEADINGS)


def _active_figure(log: InteractionLog) -> Figure:
    fig = Figure(figsize=(7.0, 3.4), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    for entity, colour in (("users", "tab:blue"), ("items", "tab:orange")):
        days = np.sort(active_days(log, entity))
        if len(days):
            ax.step(days, np.arange(1, len(days) + 1) / len(days), where="post", color=colour,
                    label=f"{entity} (median {np.median(days):.1f} d)")
    ax.set_xlabel("active time (days between first and last transaction)")
    ax.set_ylabel("share with at most this")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def _releases_figure(activity: pd.DataFrame, label: str) -> Figure:
    fig = Figure(figsize=(7.5, 3.4), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    when = _dates(activity["t_start"])
    ax.plot(when, activity["new_items"], color="tab:blue", lw=1.4, label="new items")
    ax.plot(when, activity["last_interactions"], color="tab:red", lw=1.4,
            label="users' last interactions")
    ax.set_ylabel(f"per {label} window")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _date_axis(ax)
    return fig


def _eligible_figure(log: InteractionLog, widths: Sequence[tuple[str, int]], u_min: int) -> Figure:
    fig = Figure(figsize=(7.5, 2.0 + 1.6 * len(widths)), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(widths), 1, squeeze=False).ravel()
    for ax, (label, seconds) in zip(axes, widths, strict=True):
        frame = window_activity(log, seconds).frame
        eligible = frame["eligible_users"].to_numpy()
        when = _dates(frame["t_start"])
        ax.plot(when, np.maximum(eligible, 0.8), color="tab:green", lw=1.0, drawstyle="steps-post")
        ax.axhline(max(u_min, 0.8), color="tab:red", ls=":", lw=1.2, label=f"u_min = {u_min}")
        usable = int((eligible >= u_min).sum())
        ax.set_title(f"tΔ = {label}: {usable} of {len(frame)} windows keep ≥ u_min eligible users",
                     fontsize=9)
        ax.set_yscale("log")
        ax.set_ylabel("eligible users", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        _date_axis(ax)
    return fig


def _popularity_figure(log: InteractionLog, width_s: int, label: str) -> Figure:
    frame = top_item_popularity(log, width_s)
    fig = Figure(figsize=(7.5, 3.2), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    when = _dates(frame["t_start"])
    for column in frame.columns[1:]:
        ax.plot(when, frame[column], lw=1.2, label=f"item {column}")
    ax.set_ylabel(f"transactions per {label}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    _date_axis(ax)
    return fig
