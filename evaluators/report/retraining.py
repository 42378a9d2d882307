"""The report's retraining section: how fast each model goes stale, what each cadence costs.

Read from ``staleness_summary.csv`` and ``cadence_summary.csv`` (a run with ``--horizon`` or
``--cadence``; :mod:`evaluators.experiments.retraining`), at the report's metric and k:

- staleness: per algorithm and age, the stale model's mean and its loss against models
  retrained just before the same windows, with the windows until it loses 10 % and 50 %; a
  figure of the paired difference (stale − fresh) against age, with its bootstrap interval;
- cadence: per algorithm and cadence, the mean, fits, fit seconds and the paired difference to
  retraining every window; a Pareto figure of that difference against the relative fit (+ update)
  seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sweval.evaluators.report.drawn import ReportFigure
from sweval.evaluators.report.facts import PlainTable
from sweval.evaluators.report.tables import metric_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: What a stale model is given and who it is scored on, as the report and docs say it.
SERVING_NOTE = (
    "A model fitted before window f serves window f+h without refitting: its parameters are the "
    "fit's; each user's history (what scores them and what is excluded as seen) is their history "
    "before window f+h, restricted to the items the model knows; it is scored on window f+h's "
    "eligible users, the same users as the model retrained just before f+h."
)


@dataclass(frozen=True)
class RetrainingSection:
    """The section's tables and figures (None where the run has no such table)."""

    label: str
    note: str
    staleness: PlainTable | None
    staleness_figure: ReportFigure | None
    cadence: PlainTable | None
    pareto: ReportFigure | None

    @property
    def figures(self) -> list[ReportFigure]:
        return [f for f in (self.staleness_figure, self.pareto) if f is not None]


def _read(directory: Path, name: str, metric: str, k: int | None) -> pd.DataFrame | None:
    path = directory / name
    if not path.exists():
        return None
    table = pd.read_csv(path)
    part = table[(table["metric"] == metric)
                 & (table["k"].isna() if k is None else table["k"] == k)]
    return part if len(part) else None


def retraining_section(directory: str | Path, metric: str,
                       k: int | None) -> RetrainingSection | None:
    """The section for ``metric``@``k``; None when the directory has neither table."""
    directory = Path(directory)
    staleness = _read(directory, "staleness_summary.csv", metric, k)
    cadence = _read(directory, "cadence_summary.csv", metric, k)
    if staleness is None and cadence is None:
        return None
    from sweval.evaluators.report.figures import series_colours
    from sweval.evaluators.report.retraining_figures import pareto_figure, staleness_figure

    label = metric_label(metric, k)
    labels = list(dict.fromkeys([*(staleness["algorithm"] if staleness is not None else []),
                                 *(cadence["algorithm"] if cadence is not None else [])]))
    colours = series_colours(labels)
    return RetrainingSection(
        label=label, note=SERVING_NOTE,
        staleness=_staleness_table(staleness) if staleness is not None else None,
        staleness_figure=(_figure("staleness", metric, k, staleness_figure(staleness, label,
                                                                              colours),
                                  f"{label} lost against model age")
                          if staleness is not None else None),
        cadence=_cadence_table(cadence) if cadence is not None else None,
        pareto=(_figure("cadence", metric, k, pareto_figure(cadence, label, colours),
                        f"{label} lost against relative fit time, per cadence")
                if cadence is not None else None),
    )


def _figure(kind: str, metric: str, k: int | None, fig: Figure, alt: str) -> ReportFigure:
    from sweval.evaluators.report.figures import figure_png

    at = f"-at-{k}" if k is not None else ""
    return ReportFigure(f"report-{kind}-{metric}{at}.png", figure_png(fig), alt)


def _percent(value: float) -> str:
    return "" if pd.isna(value) else f"{100 * value:+.1f} %"


def _staleness_table(summary: pd.DataFrame) -> PlainTable:
    """Per algorithm (rows) and age (columns): mean (loss against fresh models), then the
    windows until it loses 10 % and 50 %."""
    ages = sorted(summary["age"].unique())
    rows = []
    for algorithm, part in summary.groupby("algorithm", sort=False):
        by_age = part.set_index("age")
        cells = [str(algorithm)]
        for age in ages:
            if age not in by_age.index:
                cells.append("—")
                continue
            row = by_age.loc[age]
            cells.append(f"{row['mean']:.4f}" + ("" if age == 0 else f" ({_percent(row['loss'])})"))
        for column in ("windows_to_lose_10pct", "windows_to_lose_50pct"):
            value = part[column].iloc[0]
            cells.append(f"> {max(ages)}" if pd.isna(value) else str(int(value)))
        rows.append(cells)
    days = summary.drop_duplicates("age").set_index("age")["age_s"] / 86_400
    header = ["algorithm", *(f"age {a} ({days[a]:g} d)" for a in ages), "loses 10 % at",
              "loses 50 % at"]
    return PlainTable(columns=header, rows=rows)


def _cadence_table(summary: pd.DataFrame) -> PlainTable:
    rows = [[str(r.algorithm), _cadence_label(r), f"{r.mean:.4f}", str(r.fits),
             f"{r.fit_s + getattr(r, 'update_s', 0.0):.2f}",
             "" if pd.isna(r.fit_share) else f"{r.fit_share:.3g}×",
             "" if r.cadence == 1 else f"{r.mean_diff:+.4f} [{r.diff_ci_low:+.4f}, "
             f"{r.diff_ci_high:+.4f}]",
             "" if r.cadence == 1 or pd.isna(r.p_wilcoxon) else f"{r.p_wilcoxon:.3g}"]
            for r in summary.itertuples()]
    return PlainTable(columns=["algorithm", "cadence (windows)", "mean", "fits",
                               "fit (+ update) s",
                               "relative to cadence 1", "difference to cadence 1 [interval]",
                               "Wilcoxon p"], rows=rows)


def _cadence_label(row: object) -> str:
    """``2``, or ``2, updated`` for the update policy's series."""
    policy = getattr(row, "policy", "retrain")
    return f"{row.cadence}" + ("" if policy == "retrain" else f", {policy}d")  # type: ignore[attr-defined]
