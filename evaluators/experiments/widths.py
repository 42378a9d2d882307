"""Window width as a compared dimension: the same algorithms at several widths tΔ.

``sweval run --window 1D,3D,7D`` (and :func:`sweval.widths`) runs the plain evaluation once per
width, each exactly as ``sweval run --window W`` lays it out (its own ``--folds`` windows,
aligned to end at the first multiple of W after the last event, or starting at ``--start``), and
compares them::

    runs = {w: run(config with window=w) for w in widths}   the one driver per width; a unit
                                                            is keyed by its window bounds, never
                                                            by the width: windows that coincide
                                                            (7D and 1W) share their units
    widths_table(runs)                                      widths.csv
    kendall_table(widths_table(runs))                       widths_kendall.csv

``widths.csv``, one row per (window, algorithm, metric, k) of the runs' summaries (stratum
``all``)::

    window, width_s                     the width as given, and in seconds
    mean, ci_low, ci_high, n_folds      the run's summary.csv row (mean over its folds and its
                                        bootstrap interval, when the run has one)
    rank                                the algorithm's rank within the width at (metric, k):
                                        1 = the highest mean, ties share their average rank

``widths_kendall.csv``, one row per pair of widths (a before b, in the order given) and
(metric, k): Kendall's τ_b between the two widths' means over the algorithms both scored
(:func:`scipy.stats.kendalltau`), its p-value and the number of algorithms.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweval.data.durations import parse_duration
from sweval.data.errors import SwevalError
from sweval.evaluators.experiments.sweep import in_locked_directory, run_each
from sweval.evaluators.metrics.names import shown_k

WIDTHS_COLUMNS = ["window", "width_s", "algorithm", "metric", "k", "mean", "ci_low", "ci_high",
                  "n_folds", "rank"]
KENDALL_COLUMNS = ["window_a", "window_b", "metric", "k", "tau", "p_value", "n_algorithms"]
#: The files a comparison of widths publishes in its output directory (each width's own run
#: goes to ``window-<width>/``).
FILES = ("widths.csv", "widths_kendall.csv")


def listed(text: str | None) -> bool:
    """Whether an option's text lists several values (``1D,3D``)."""
    return text is not None and "," in text


def split_list(text: str, option: str) -> list[str]:
    """The values of a comma-separated option, stripped.

    Raises:
        SwevalError: an empty value, or one value given twice.
    """
    values = [part.strip() for part in text.split(",")]
    if any(not value for value in values):
        raise SwevalError(f"{option} {text!r}: an empty value in the list.")
    twice = sorted({value for value in values if values.count(value) > 1})
    if twice:
        raise SwevalError(f"{option} {text!r}: {', '.join(twice)} is listed twice.")
    return values


def parse_widths(text: str) -> list[str]:
    """The widths of ``--window`` (one or several), each checked to be a duration.

    Raises:
        SwevalError: a width that is not a duration, or one listed twice.
    """
    widths = split_list(text, "--window")
    for width in widths:
        parse_duration(width, option="--window")
    return widths


def check_composes(config: Any, *, rolling: bool = False) -> None:
    """Refuse what a run of several widths does not combine with.

    Raises:
        SwevalError: ``--rolling`` (a series is one width's), ``--horizon``/``--cadence``
            (ages and cadences are counted in windows, which differ in time between widths),
            or a list of ``--train-window`` too (one swept dimension at a time).
    """
    given = [name for name, on in (("--rolling", rolling), ("--horizon", config.horizon > 0),
                                   ("--cadence", bool(config.cadence)),
                                   ("--train-window with several lengths",
                                    listed(config.train_window))) if on]
    if given:
        raise SwevalError(
            f"--window {config.window}: several widths do not combine with "
            f"{', '.join(given)} (a rolling series is one width's; model ages and cadences are "
            "counted in windows, whose length differs between widths; one list at a time). "
            "Run each width on its own for those.")


def widths_table(runs: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (window, algorithm, metric, k) of ``runs`` (width → an object with the
    ``summary`` table of a run, e.g. :class:`sweval.Evaluation`), in the order of ``runs``; the
    columns of the module docstring."""
    parts = []
    for width, run in runs.items():
        summary = run.summary[run.summary["stratum"] == "all"]
        part = summary[["algorithm", "metric", "k", "mean", "ci_low", "ci_high",
                        "n_folds"]].copy()
        part.insert(0, "width_s", parse_duration(width, option="--window"))
        part.insert(0, "window", width)
        keys = [part["metric"], part["k"].fillna(-1)]
        part["rank"] = part.groupby(keys, sort=False)["mean"].rank(ascending=False,
                                                                   method="average")
        parts.append(part)
    table = pd.concat(parts, ignore_index=True)
    return table[WIDTHS_COLUMNS]


def kendall_table(table: pd.DataFrame) -> pd.DataFrame:
    """Kendall's τ_b between every pair of widths' rankings, per (metric, k) (see the module
    docstring); τ is NaN where fewer than two algorithms, or a constant ranking, are shared."""
    widths = list(dict.fromkeys(table["window"]))
    rows = []
    scored = table.assign(k=table["k"].fillna(-1))
    for a, b in itertools.combinations(widths, 2):
        left = scored[scored["window"] == a].set_index(["metric", "k", "algorithm"])["mean"]
        right = scored[scored["window"] == b].set_index(["metric", "k", "algorithm"])["mean"]
        both = pd.concat([left.rename("a"), right.rename("b")], axis=1, join="inner").dropna()
        for (metric, k), part in both.groupby(level=["metric", "k"], sort=False):
            tau, p_value = _tau(part["a"].to_numpy(), part["b"].to_numpy())
            rows.append({"window_a": a, "window_b": b, "metric": metric,
                         "k": np.nan if k == -1 else k, "tau": tau, "p_value": p_value,
                         "n_algorithms": len(part)})
    return pd.DataFrame(rows, columns=KENDALL_COLUMNS)


def _tau(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """scipy's τ_b and p-value (NaN for fewer than two values or a constant side)."""
    from scipy.stats import kendalltau

    if len(a) < 2:
        return float("nan"), float("nan")
    with warnings.catch_warnings():  # a constant ranking: scipy warns and returns NaN
        warnings.simplefilter("ignore")
        result = kendalltau(a, b)
    return float(result.statistic), float(result.pvalue)


def run_directory(width: str) -> str:
    """The folder of one width's run inside the comparison's output directory."""
    return f"window-{width}"


# ------------------------------------------------------------------------------ a run of widths
@dataclass(frozen=True)
class Widths:
    """A comparison of window widths.

    Attributes:
        config: the configuration (its ``window`` lists the widths).
        runs: each width's run (``sweval run``'s tables: ``.summary``, ``.n_computed``, ...).
        table: ``widths.csv``; kendall: ``widths_kendall.csv``.
        directory: where the files were written (None: in memory only).
    """

    config: Any
    runs: dict[str, Any]
    table: pd.DataFrame
    kendall: pd.DataFrame
    directory: Path | None = None

    @property
    def n_computed(self) -> int:
        return sum(int(run.n_computed) for run in self.runs.values())

    @property
    def n_reused(self) -> int:
        return sum(int(run.n_reused) for run in self.runs.values())

    @property
    def shown(self) -> tuple[str, int | None]:
        """The metric and k of the printed table and the figure: Recall (else the first
        metric) at 10 (else the largest k)."""
        metrics = list(dict.fromkeys(self.table["metric"]))
        metric = "recall" if "recall" in metrics else metrics[0]
        ks = [int(k) for k in self.table.loc[self.table["metric"] == metric, "k"].dropna()]
        return metric, (shown_k(ks) if ks else None)

    def text(self) -> str:
        """The printed table: mean (rank) per algorithm and width at :attr:`shown`, then τ."""
        from sweval.evaluators.report.tables import metric_label
        from sweval.evaluators.report.widths import at

        metric, k = self.shown
        rows = at(self.table, metric, k)
        cells = rows.assign(cell=[f"{m:.4f} ({r:g})" for m, r in zip(
            rows["mean"], rows["rank"], strict=True)])
        means = cells.pivot(index="algorithm", columns="window", values="cell").reindex(
            index=list(dict.fromkeys(rows["algorithm"])), columns=list(self.runs))
        taus = at(self.kendall, metric, k)
        lines = [f"mean {metric_label(metric, k)} over folds (rank within the width)",
                 means.to_string(na_rep="-"), "",
                 f"Kendall's tau between the widths' rankings ({metric_label(metric, k)})"]
        lines += [f"  {row.window_a} vs {row.window_b}: tau = {row.tau:.3f} (p = "
                  f"{row.p_value:.3g}, {row.n_algorithms} algorithms)"
                  for row in taus.itertuples()]
        return "\n".join(lines) + "\n"


def compare_widths(config: Any, run: Callable[[Any], Any], *,
                   directory: str | Path | None = None) -> Widths:
    """Run ``config`` once per width of its ``--window`` list and compare them.

    Args:
        config: the run's configuration; ``config.window`` lists the widths.
        run: evaluates one width's configuration (``window`` one width and, with
            ``directory``, ``output`` its folder ``window-<width>/``) and returns its tables.
        directory: the comparison's output directory (claimed first; the comparison's files
            are published there once every width has run), or None.

    Raises:
        SwevalError: bad widths, options that do not combine (:func:`check_composes`), an
            output directory SW-EVAL may not write, or any error of a width's run.
    """
    widths = parse_widths(config.window)
    check_composes(config)
    return in_locked_directory(directory, "run-widths",
                               lambda target: _sweep(config, widths, run, target))


def _sweep(config: Any, widths: list[str], run: Callable[[Any], Any],
           target: Path | None) -> Any:
    """The work of the sweep above, its output directory (if any) locked."""
    runs = run_each(config, widths, lambda width: {"window": width}, run_directory, run, target)
    table = widths_table(runs)
    found = Widths(config, runs, table, kendall_table(table), target)
    if target is not None:
        write_widths(found)
    return found


def write_widths(found: Widths) -> None:
    """Publish ``widths.csv``, ``widths_kendall.csv``, ``widths.txt`` and (with
    ``config.report``) ``report.html`` and its figure into the comparison's directory."""
    from sweval.evaluators.run.output_dir import publish

    assert found.directory is not None
    files = {"widths.csv": found.table.to_csv(index=False, float_format="%.10g").encode(),
             "widths_kendall.csv": found.kendall.to_csv(index=False,
                                                        float_format="%.10g").encode(),
             "widths.txt": found.text().encode()}
    if found.config.report:
        from sweval.evaluators.report.widths import widths_figure, widths_page

        metric, k = found.shown
        figure = widths_figure(found.table, metric, k)
        links = {width: f"{run_directory(width)}/report.html" for width in found.runs}
        page = widths_page(found.table, found.kendall, metric, k, figure=figure, links=links,
                           title=f"SW-EVAL window widths — {found.config.dataset_name}")
        files |= {figure.file_name: figure.png, "report.html": page.encode()}
    try:
        publish(found.directory, files, run=found.config.result_hash(), command="run-widths")
    except OSError as exc:
        raise SwevalError(f"{found.directory}: cannot write the comparison of widths "
                          f"({exc}).") from exc
