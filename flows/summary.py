"""The summary printed at the end of a run: mean Recall@k per algorithm and k, with Δ% to the best;
and the progress bar shown while units run."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweval.evaluators.config import EvalConfig
from sweval.evaluators.metrics import LABELS
from sweval.evaluators.outputs import Outputs

if TYPE_CHECKING:
    from rich.progress import Progress


def summary_table(summary: pd.DataFrame, *, metric: str, stratum: str, title: str) -> Table:
    """A rich table: one row per algorithm, one column per k (mean and Δ% to the best)."""
    part = summary[(summary["metric"] == metric) & (summary["stratum"] == stratum)]
    ks = sorted(int(k) for k in part["k"].dropna().unique())
    table = Table(title=title, title_justify="left", padding=(0, 1))
    table.add_column("algorithm", style="bold", no_wrap=True)
    label = LABELS.get(metric, metric)
    for k in ks:
        table.add_column(f"{label}@{k}", justify="right", no_wrap=True)
    table.add_column("folds", justify="right", no_wrap=True)
    for algorithm, rows in part.groupby("algorithm", sort=False):
        cells = [escape(str(algorithm))]  # labels such as item-knn[tuned] are not markup
        for k in ks:
            row = rows[rows["k"] == k].iloc[0]
            if pd.isna(row["mean"]):
                cells.append("—")
            elif pd.isna(row["delta"]):  # every algorithm scored 0 at this k: no best, no Δ%
                cells.append(f"{row['mean']:.4f}    ")
            elif abs(row["delta"]) < 1e-12:
                cells.append(f"[bold green]{row['mean']:.4f}[/]    ")
            else:
                cells.append(f"{row['mean']:.4f} [dim]{100 * row['delta']:+.0f}%[/]")
        cells.append(f"{int(rows['n_folds'].max())}/{int(rows['n_skipped'].max())}")
        table.add_row(*cells)
    return table


def optimism_table(optimism: pd.DataFrame, config: EvalConfig) -> Table:
    """Tuned against the oracle: what choosing on the test folds themselves would claim."""
    table = Table(
        title=f"Tuning ({config.tune_mode}, {config.tune_windows} validation window(s), "
        f"{config.tune_metric}) — oracle = the candidate best on the test folds themselves",
        title_justify="left", padding=(0, 1),
    )
    for column in ("algorithm", "k", "tuned", "folds", "oracle", "oracle mean", "optimism"):
        table.add_column(column, justify="left" if column in ("algorithm", "oracle") else "right",
                         no_wrap=column in ("algorithm", "oracle"))
    for row in optimism.itertuples():
        table.add_row(escape(row.algorithm), str(row.k), f"{row.tuned_mean:.4f}", str(row.n_folds),
                      escape(row.oracle), f"{row.oracle_mean:.4f}",
                      "—" if pd.isna(row.optimism) else f"{100 * row.optimism:+.1f}%")
    return table


def print_summary(outputs: Outputs, config: EvalConfig, console: Console | None = None) -> None:
    """Print the per-stratum Recall tables, the fold counts and where the files are."""
    console = console or Console()
    summary = outputs.summary
    for stratum in summary["stratum"].unique():
        part = summary[summary["stratum"] == stratum]
        if part["n_folds"].max() == 0:
            console.print(
                f"stratum {stratum}: every fold skipped (fewer than u_min={config.u_min} "
                "eligible users)", style="yellow"
            )
            continue
        title = (
            f"Recall@k on {config.dataset_name}, {config.window} windows"
            + (f", stratum {stratum}" if stratum != "all" or len(summary["stratum"].unique()) > 1 else "")
            + " — mean over folds, Δ% to the best (green)"
        )
        console.print(summary_table(summary, metric="recall", stratum=stratum, title=title))
    folds = outputs.folds
    used = int((~folds["skipped"]).sum())
    console.print(
        f"folds: {used} used, {len(folds) - used} skipped (u_min={config.u_min}); "
        f"devices: {', '.join(f'{a}={d}' for a, d in outputs.devices.items()) or '—'}"
    )
    for reason in folds.loc[folds["skipped"], "skip_reason"].unique()[:3]:
        console.print(f"  skipped: {reason}", style="dim")
    console.print(f"units: reused {outputs.n_reused} units, computed {outputs.n_computed}")
    if outputs.optimism is not None and not outputs.optimism.empty:
        console.print(optimism_table(outputs.optimism, config))
    console.print(f"results: {outputs.directory}/results.csv, folds.csv, summary.csv, config.json")
    if (outputs.directory / "report.html").exists():
        console.print(f"report:  {outputs.directory / 'report.html'}")
    for failure in outputs.failed:
        console.print(f"failed:  {escape(failure.describe())}", style="red", highlight=False)


def unit_progress(label: str, *, enabled: bool, console: Console | None = None) -> Progress:
    """A transient rich progress display over units: ``label`` (a rich format of the task, e.g.
    ``"{task.description}"``), a bar, done/total and the elapsed time; blank unless ``enabled``.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, disable=not enabled, transient=True,
    )


@contextlib.contextmanager
def progress_bar(config: EvalConfig, total: int) -> Iterator[Callable[[int], None]]:
    """A transient progress bar over ``total`` units; yields ``advance(n)``."""
    with unit_progress(
        "[bold]evaluating[/bold] {task.description}", enabled=config.progress
    ) as progress:
        bar = progress.add_task(config.dataset_name, total=total)
        yield lambda n: progress.advance(bar, n)
