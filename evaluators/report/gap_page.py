"""``report.html`` of a ``sweval gap`` output: how far each validation's score was from the
deployed one (papers/003 Table 2), drawn and ranked.

Per metric, at one k (``gap.csv`` has every k):

- the table of the console: each validation value v with its change 100 · (t / v − 1) % to the
  deployed value t, and t;
- ``report-gap-<metric>-at-<k>.png``: one row per algorithm, a dot per validation and a bar at
  the deployed value, so the distance from each dot to the bar is the gap;
- whether each validation ranks the algorithms as deployment does: Kendall's τ-b between the
  validation values and the deployed values over the algorithms both score (scipy's
  ``kendalltau``), and whether the validation's best algorithm is the deployed best (ties in
  values, as ``gap.csv`` writes them, count as ties).

The page reads only the output's files (``gap.csv``, ``gap.json``, ``results.csv``), so
``sweval report DIR`` redraws it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from sweval.data.errors import SwevalError
from sweval.data.timestamps import minute_utc
from sweval.evaluators.experiments.gap import VALIDATIONS, gap_notes
from sweval.evaluators.metrics.names import LABELS, shown_k
from sweval.evaluators.report.drawn import ReportFigure
from sweval.evaluators.report.facts import PlainTable
from sweval.evaluators.report.figures import figure_png, legend_above
from sweval.evaluators.report.html import environment
from sweval.evaluators.report.page import REPORT_PAGE, publish_report, report_target

PAGE_TEMPLATE = "gap.html.j2"
#: The files of a ``sweval gap`` output that the page reads.
GAP_FILES = ("gap.csv", "gap.json", "results.csv")
#: A colour per validation set (the deployed value is black).
SET_COLOURS = {"traditional": "tab:red", "proportional": "tab:orange", "cut-off": "tab:blue"}


@dataclass(frozen=True)
class GapSection:
    """One metric at one k: the gap table, the agreement of rankings and the figure."""

    metric: str
    k: int | None
    label: str
    table: PlainTable
    agreement: PlainTable
    figure: ReportFigure


def is_gap_output(directory: Path) -> bool:
    """Whether ``directory`` was written by ``sweval gap`` (it has ``gap.json``)."""
    return (directory / "gap.json").is_file()


def write_gap_report(
    directory: Path,
    *,
    metrics: Sequence[str] = ("recall",),
    k: int | None = None,
    destination: Path | None = None,
) -> list[Path]:
    """Write ``report.html`` and its PNGs for a ``sweval gap`` output; the paths, page first.

    Args:
        metrics: the metrics to show (``all``: every metric of ``gap.csv``).
        k: the cut-off shown (default: 10, else the largest k of the run).
        destination: where to write (default: ``directory``).

    Raises:
        SwevalError: a missing or unreadable file, a metric or k the output does not have.
    """
    gap, record, results = _read(directory)
    have = list(dict.fromkeys(gap["metric"]))
    chosen = have if list(metrics) == ["all"] else list(dict.fromkeys(metrics))
    unknown = [m for m in chosen if m not in have]
    if unknown:
        raise SwevalError(f"metric(s) {', '.join(unknown)} not in {directory / 'gap.csv'} "
                          f"(it has {', '.join(have)}).")
    ks = sorted(int(value) for value in gap["k"].dropna().unique())
    if k is not None and k not in ks:
        raise SwevalError(f"k={k} not in {directory / 'gap.csv'} (it has "
                          f"{', '.join(map(str, ks))}).")
    shown = k if k is not None else shown_k(ks)
    algorithms = list(record["config"]["algorithms"])
    with_k = set(gap.loc[gap["k"].notna(), "metric"])  # R-Precision has none
    sections = [gap_section(gap, metric, shown if metric in with_k else None, algorithms)
                for metric in chosen]
    target = report_target(directory, destination)
    page = environment().get_template(PAGE_TEMPLATE).render(
        title=f"Validation-to-deployment gap — {_source(record)}",
        generated=datetime.now(tz=UTC).strftime("%Y-%m-%d %H:%M UTC"),
        facts=gap_facts(record, results),
        sections=sections,
        notes=gap_notes(results),
    )
    files = {REPORT_PAGE: page.encode("utf-8")} | {
        section.figure.file_name: section.figure.png for section in sections}
    try:
        publish_report(target, files, source=directory)
    except OSError as exc:
        raise SwevalError(f"{target}: cannot write the report ({exc}).") from exc
    return [target / name for name in files]


def _read(directory: Path) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    missing = [name for name in GAP_FILES if not (directory / name).is_file()]
    if missing:
        raise SwevalError(f"{directory}: no {', '.join(missing)}: not a complete `sweval gap` "
                          "output (run the command again).")
    try:
        gap = pd.read_csv(directory / "gap.csv")
        record = json.loads((directory / "gap.json").read_text())
        results = pd.read_csv(directory / "results.csv", keep_default_na=False,
                              na_values=[""], dtype={"skip_reason": str})
    except (OSError, ValueError) as exc:
        raise SwevalError(f"{directory}: cannot read the gap's tables ({exc}).") from exc
    return gap, record, results


def _source(record: dict) -> str:
    data = record["config"].get("data")
    return Path(data).name if data else "generated log"


def gap_facts(record: dict, results: pd.DataFrame) -> list[tuple[str, str]]:
    """The design as the page's header shows it: data, T, the windows, r, the seed, L,
    relevance, u_min and the users each set evaluated."""
    config = record["config"]
    start, width = int(record["deploy_start"]), int(record["window_s"])
    window = config.get("window") or f"{width} s"
    history = ("all of it" if record.get("train_window_s") is None
               else f"its last {config.get('train_window')}")
    users = (results[results["stratum"] == "all"].groupby("set", sort=False)["n_eligible"]
             .max())
    order = [name for name in [*VALIDATIONS, "test"] if name in users.index]
    return [
        ("data", config.get("data") or "generated log"),
        ("T (deployment)", (f"{minute_utc(start)}; deployed on [T, T + {window}) → "
                            f"{minute_utc(start + width)}")),
        ("validated on", (f"the log before T ({history}); cut-off window [T − {window}, T) "
                          f"from {minute_utc(start - width)}")),
        ("hold-out share r", (f"{record['share']:g} of each user's transactions (traditional: "
                              f"random, seed {record['seed']}; proportional: the last ones)")),
        ("relevance", f"{record.get('relevance', 'all')} (cut-off set and deployment)"),
        ("u_min", str(config.get("u_min"))),
        ("users evaluated", "; ".join(f"{name} {int(users[name]):,}" for name in order)),
    ]


def gap_section(
    gap: pd.DataFrame, metric: str, k: int | None, algorithms: list[str]
) -> GapSection:
    """The table, the agreement of rankings and the figure of ``metric`` at ``k`` (None for a
    metric measured at each user's |Rel_u|, R-Precision)."""
    at_k = gap["k"].isna() if k is None else gap["k"] == k
    part = gap[(gap["metric"] == metric) & at_k]
    validation = part.pivot(index="algorithm", columns="validation", values="validation_value")
    change = part.pivot(index="algorithm", columns="validation", values="drop_pct")
    deployed = part.groupby("algorithm")["test_value"].first()
    shown = [a for a in algorithms if a in deployed.index]
    sets = [name for name in VALIDATIONS if name in validation.columns]
    rows = []
    for algorithm in shown:
        row = [algorithm]
        for name in VALIDATIONS:
            value = validation.at[algorithm, name] if name in sets else np.nan
            pct = change.at[algorithm, name] if name in sets else np.nan
            row += ["—" if pd.isna(value) else f"{value:.4f}",
                    "" if pd.isna(pct) else f"{pct:+z.1f}%"]
        rows.append([*row, f"{deployed[algorithm]:.4f}"])
    columns = ["algorithm"] + [c for name in VALIDATIONS for c in (f"val {name}", "change")]
    label = LABELS.get(metric, metric) + ("" if k is None else f"@{k}")
    name = f"report-gap-{metric}" + ("" if k is None else f"-at-{k}")
    return GapSection(
        metric=metric, k=k, label=label,
        table=PlainTable(columns=[*columns, "deployed"], rows=rows),
        agreement=ranking_agreement(validation.reindex(shown), deployed.reindex(shown)),
        figure=ReportFigure(f"{name}.png",
                            figure_png(gap_figure(validation.reindex(shown),
                                                  deployed.reindex(shown), label)),
                            f"{label}: each validation's value and the deployed value"),
    )


def ranking_agreement(validation: pd.DataFrame, deployed: pd.Series) -> PlainTable:
    """Per validation: Kendall's τ-b with the deployed ranking (over the algorithms both
    score; "—" for fewer than two, or when either side is constant), its best algorithm(s) and
    whether one of them is best deployed (among every deployed algorithm: a validation that
    cannot score the deployed best does not pick it)."""
    from scipy.stats import kendalltau

    best_deployed = _best(deployed)
    rows = []
    for name in VALIDATIONS:
        values = validation[name] if name in validation.columns else pd.Series(dtype=float)
        both = pd.concat({"v": values, "t": deployed}, axis=1).dropna()
        tau = kendalltau(both["v"], both["t"]).statistic if len(both) >= 2 else np.nan
        best = _best(both["v"])
        rows.append([
            f"val {name}", str(len(both)), "—" if np.isnan(tau) else f"{tau:+z.2f}",
            ", ".join(best) or "—",
            "—" if not best else ("yes" if set(best) & set(best_deployed) else "no"),
        ])
    columns = ["validation", "algorithms", "Kendall τ with deployed", "its best",
               "picks the deployed best?"]
    rows.append(["deployed", str(int(deployed.notna().sum())), "", ", ".join(best_deployed), ""])
    return PlainTable(columns=columns, rows=rows)


def _best(values: pd.Series) -> list[str]:
    """The algorithms with the highest value (all of them when tied)."""
    values = values.dropna()
    if values.empty:
        return []
    return [str(a) for a in values.index[values == values.max()]]


def gap_figure(validation: pd.DataFrame, deployed: pd.Series, label: str) -> Figure:
    """One row per algorithm (the first on top): a dot per validation value, a black bar at
    the deployed value, a grey line from each dot to the bar."""
    n = len(deployed)
    fig = Figure(figsize=(7.0, 0.55 * n + 1.0), layout="constrained")
    ax = fig.add_subplot()
    rows = np.arange(n)[::-1]
    for y, algorithm in zip(rows, deployed.index, strict=True):
        test = deployed[algorithm]
        for name in VALIDATIONS:
            value = validation.at[algorithm, name] if name in validation.columns else np.nan
            if pd.isna(value):
                continue
            ax.plot([value, test], [y, y], color="0.8", lw=1, zorder=1)
            ax.plot(value, y, "o", ms=7, color=SET_COLOURS[name], zorder=3)
        ax.plot(test, y, "|", ms=18, mew=2.5, color="black", zorder=4)
    ax.set_yticks(rows, [str(a) for a in deployed.index])
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlabel(label)
    ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], ls="none", marker="o", ms=7, color=colour, label=f"val {name}")
               for name, colour in SET_COLOURS.items()]
    handles.append(Line2D([], [], ls="none", marker="|", ms=14, mew=2.5, color="black",
                          label="deployed"))
    legend_above(fig, handles)
    return fig
