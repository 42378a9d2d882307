"""The summary printed at the end of a run: mean Recall@k per algorithm and k (the first chosen
metric when --metrics leaves Recall out), with Δ% to the best, its bootstrap interval and whether
the best's lead over the runner-up (or --baseline) is significant, with what the design can show;
and the top-k overlap between algorithms."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import pandas as pd
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.retraining import FILES as RETRAINING_FILES
from sweval.evaluators.metrics.names import LABELS, shown_k
from sweval.evaluators.metrics.reachable import ceiling_words
from sweval.evaluators.run.outputs import Outputs
from sweval.evaluators.run.results import is_best, largest_strata
from sweval.evaluators.stats.overlap import overlap_matrix
from sweval.evaluators.stats.tuning_candidates import TUNED
from sweval.evaluators.wording import (
    NO_INTERVAL,
    interval_text,
    plural,
    store_line,
    units_line,
)
from sweval.flows.cli.labels import label_room, legend_lines, short_labels
from sweval.flows.cli.significance import lead_cell, print_significance_notes, shown_metric
from sweval.flows.cli.terminal import folding_header, note_cell, table_console, widest_line


def summary_table(
    summary: pd.DataFrame, *, metric: str, stratum: str, title: str,
    significance: pd.DataFrame | None = None, failed: Mapping[str, int] | None = None,
    unit: str | None = None, baseline: str | None = None,
    shown: Mapping[str, str] | None = None,
) -> Table:
    """A rich table: one row per algorithm, one column per k (mean and Δ% to the best, below it
    the bootstrap interval when the summary has one), and the folds used/skipped, with the
    units that failed (``failed``: per label) in red; with ``significance``, a last row says
    whether the best's lead over the runner-up (or ``baseline``) is significant on ``unit``
    (Wilcoxon, the run's correction, ``ALPHA``), or that the design cannot tell.

    In a narrow console the algorithm labels fold and the numbers stay whole; a column of
    numbers is as wide as they are, the lead row's notes wrap within it. ``shown``: the name to
    show for a label (:func:`short_labels`), else the label."""
    part = summary[(summary["metric"] == metric) & (summary["stratum"] == stratum)]
    best = is_best(part)
    ks = sorted(int(k) for k in part["k"].dropna().unique())
    body = []  # (label, a cell per k, folds) per algorithm
    for algorithm, rows in part.groupby("algorithm", sort=False):
        at_k = [rows[rows["k"] == k].iloc[0] for k in ks]
        name = (shown or {}).get(str(algorithm), str(algorithm))
        body.append((escape(name),  # labels such as item-knn[tuned] are not markup
                     [value_cell(row, best=bool(best.loc[row.name])) for row in at_k],
                     folds_cell(rows, (failed or {}).get(str(algorithm), 0))))
    table = Table(title=title, title_justify="left", padding=(0, 1))
    table.add_column("algorithm", style="bold", overflow="fold")
    label = LABELS.get(metric, metric)
    for i, k in enumerate(ks):
        header = f"{label}@{k}"
        table.add_column(header, justify="right", no_wrap=True,
                         max_width=widest_line([header, *(values[i] for _, values, _ in body)]))
    table.add_column("folds", justify="right", no_wrap=True)
    for name, values, folds in body:
        table.add_row(name, *values, folds)
    if significance is not None:
        table.add_row("best's lead" if baseline is None else f"lead over {escape(baseline)}", *(
            note_cell(lead_cell(summary, significance, stratum=stratum, metric=metric, k=k,
                                unit=unit, baseline=baseline))
            for k in ks
        ), "", style="italic", end_section=False)
    return table


def delta_text(delta: float) -> str:
    """Δ% to the best: whole percents, one decimal below 1% so that a value just below (or,
    scored on other folds, above) the best never reads +0%; ``-<0.1%`` / ``+<0.1%`` below
    that; ``0%`` only for an exact tie."""
    percent = 100 * delta
    if percent == 0:
        return "0%"
    if abs(percent) >= 0.95:
        return f"{percent:+.0f}%"
    if abs(percent) >= 0.05:
        return f"{percent:+.1f}%"
    return "-<0.1%" if percent < 0 else "+<0.1%"


def value_cell(row: pd.Series, *, best: bool) -> str:
    """One algorithm's cell at one k (a summary row): its mean, green for the best, else with
    its Δ% to the best (:func:`delta_text`); below it the bootstrap interval when the row has
    one."""
    if pd.isna(row["mean"]):
        return "—"
    if pd.isna(row["delta"]):  # every algorithm scored 0 at this k: no best, no Δ%
        cell = f"{row['mean']:.4f}    "
    elif best:
        cell = f"[bold green]{row['mean']:.4f}[/]    "
    else:
        cell = f"{row['mean']:.4f} [dim]{delta_text(row['delta'])}[/]"
    if "ci_low" in row and pd.notna(row["ci_low"]):
        cell += f"\n[dim]{interval_text(row['ci_low'], row['ci_high'])}[/]"
    return cell


def folds_cell(rows: pd.DataFrame, n_failed: int) -> str:
    """An algorithm's folds used/skipped (its summary rows), with its failed units in red."""
    cell = f"{int(rows['n_folds'].max())}/{int(rows['n_skipped'].max())}"
    return cell + (f" [red]{n_failed} failed[/]" if n_failed else "")


#: More algorithms than this (e.g. --tune candidates): the overlap matrix stays in the files.
MAX_OVERLAP_ALGORITHMS = 8


def overlap_table(overlap: pd.DataFrame, k: int,
                  shown: Mapping[str, str] | None = None) -> Group | None:
    """Mean J@k between algorithms (and seeds) over folds; the diagonal is each algorithm's
    stability over consecutive folds (None when there is nothing to compare, or too much).

    The title is a line of its own above the table, not the table's title: rich wraps a title
    to its table's width, and the matrix of one or two algorithms is about 20 cells wide."""
    matrix = overlap_matrix(overlap, k)
    if matrix is None or len(matrix) > MAX_OVERLAP_ALGORITHMS:
        return None
    title = Text(f"Top-{k} overlap — mean Jaccard over folds; diagonal: the same algorithm on "
                 "consecutive folds (overlap.csv)", style="italic")
    table = Table(padding=(0, 1))
    table.add_column("", style="bold", overflow="fold")
    named = shown or {}
    for label in matrix.columns:
        table.add_column(folding_header(named.get(str(label), str(label))), justify="right")
    for label, row in matrix.iterrows():
        table.add_row(escape(named.get(str(label), str(label))),
                      *("" if pd.isna(value) else f"{value:.2f}" for value in row))
    return Group(title, table)


def optimism_table(optimism: pd.DataFrame, config: EvalConfig) -> Table:
    """Tuned against the oracle: what choosing on the test folds themselves would claim."""
    table = Table(
        title=f"Tuning ({config.tune_mode}, {plural(config.tune_windows, 'validation window')}, "
        f"{config.tune_metric}) — oracle = the candidate best on the test folds themselves",
        title_justify="left", padding=(0, 1),
    )
    for column in ("algorithm", "k", "tuned", "folds", "oracle", "oracle mean", "optimism"):
        label = column in ("algorithm", "oracle")
        table.add_column(column, justify="left" if label else "right",
                         overflow="fold" if label else "ellipsis", no_wrap=not label)
    for row in optimism.itertuples():
        table.add_row(escape(row.algorithm), str(row.k), f"{row.tuned_mean:.4f}", str(row.n_folds),
                      escape(row.oracle), f"{row.oracle_mean:.4f}",
                      "—" if pd.isna(row.optimism) else f"{100 * row.optimism:+z.1f}%")
    return table


#: The tables a run may write, in the order the "results:" line names those it wrote.
RESULT_FILES = (
    "results.csv", "folds.csv", "summary.csv", "significance.csv", "significance_strata.csv",
    "units.csv", "tuning.csv", "optimism.csv", "overlap.csv", "per_user.parquet",
    *RETRAINING_FILES, "config.json",
)


#: Skip reasons listed before "… and N more folds".
MAX_SKIP_REASONS = 5


def skip_reasons(rows: pd.DataFrame, what: str = "fold") -> list[str]:
    """The distinct skip reasons of ``rows`` (rows of ``results.csv``, ``folds.csv`` or
    ``compare.csv``), in order of appearance, each with the number of folds (``what``: the unit
    counted) it skipped when more than one: the first :data:`MAX_SKIP_REASONS`, then ``… and N
    more folds`` for the folds skipped for the others (a sixth reason is shown instead of
    "… and 1 more fold")."""
    reasons = rows["skip_reason"].fillna("").astype(str)
    units = [column for column in ("protocol", "fold") if column in rows]
    skipped = rows.loc[reasons != "", units].assign(reason=reasons[reasons != ""])
    counts = skipped.drop_duplicates().groupby("reason", sort=False).size()
    n_shown = len(counts) if len(counts) <= MAX_SKIP_REASONS + 1 else MAX_SKIP_REASONS
    shown = [reason if n == 1 else f"{reason} ({plural(int(n), what)})"
             for reason, n in counts.iloc[:n_shown].items()]
    rest = int(counts.iloc[n_shown:].sum())
    return shown + ([f"… and {plural(rest, f'more {what}')}"] if rest else [])


def check_something_scored(results: pd.DataFrame, *, u_min: int, what: str = "fold") -> None:
    """Raise a :class:`SwevalError` (exit status 2) when no ``what`` of the whole log has a
    value: every one was skipped, so the written tables hold no number to read. The files stay
    written (``folds.csv`` has each fold's eligible users)."""
    every = results[results["stratum"] == "all"] if "stratum" in results else results
    if every["value"].notna().any():
        return
    reasons = "; ".join(skip_reasons(every, what)) or "no reason"
    raise SwevalError(
        f"no {what} was scored: every {what} was skipped ({reasons}). Lower --u-min "
        f"(now {u_min}) or widen --window; the files above show each {what}'s eligible users."
    )


def stratum_fold_counts(results: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Per stratum other than ``all``: (folds used, folds skipped), a fold being skipped in a
    stratum when every row of the stratum on it is (the stratum has fewer than u_min eligible
    users there; ``folds:`` counts all users')."""
    counts = {}
    for stratum, rows in results[results["stratum"] != "all"].groupby("stratum", sort=False):
        skipped = rows.groupby("fold")["skipped"].all()
        counts[str(stratum)] = (int((~skipped).sum()), int(skipped.sum()))
    return counts


def print_summary(outputs: Outputs, config: EvalConfig, console: Console | None = None) -> None:
    """Print the per-stratum Recall tables, the fold counts and where the files are."""
    console = console or table_console()
    summary = outputs.summary
    metric = shown_metric(summary)
    n_ks = summary.loc[summary["metric"] == metric, "k"].nunique()
    shown = short_labels([str(label) for label in summary["algorithm"].unique()],
                         label_room(console.width, n_ks))
    strata = list(summary["stratum"].unique())
    largest = largest_strata(outputs.results)
    if largest is not None:  # hundreds of strata: the largest, not hundreds of tables
        console.print(f"{len(strata) - 1} strata: the tables below show the {len(largest)} "
                      "with the most eligible users; summary.csv has every one", markup=False)
        strata = [s for s in strata if s == "all" or s in largest]
    for stratum in strata:
        part = summary[summary["stratum"] == stratum]
        if part["n_folds"].max() == 0:
            # the whole log's reasons follow under `folds:`; a stratum's are listed only here
            reasons = skip_reasons(outputs.results[outputs.results["stratum"] == stratum])
            listed = "" if stratum == "all" else f" ({'; '.join(reasons)})"
            console.print(f"stratum {stratum}: every fold skipped{listed}",
                          style="yellow", markup=False)
            continue
        title = (
            f"{LABELS.get(metric, metric)}@k on {escape(config.dataset_name)}, "
            f"{escape(config.window)} windows"
            + (f", stratum {escape(str(stratum))}"
               if stratum != "all" or len(summary["stratum"].unique()) > 1 else "")
            + f" — mean over folds, Δ% to the best (green), {interval_words(part, config.ci)}"
        )
        failed = Counter(f.label for f in outputs.failed if f.stratum == stratum)
        console.print(summary_table(summary, metric=metric, stratum=stratum, title=title,
                                    significance=outputs.significance, failed=failed,
                                    unit=config.test_unit, baseline=config.baseline,
                                    shown=shown))
        for line in fallback_lines(part):
            console.print(line, style="dim", markup=False, highlight=False)
    for line in legend_lines(shown):
        console.print(line, style="dim", markup=False, highlight=False)
    for line in [*common_folds_lines(summary, metric), *same_configuration_lines(outputs.units)]:
        console.print(line, style="dim", markup=False, highlight=False)
    print_significance_notes(outputs, config, console)
    folds = outputs.folds
    used = int((~folds["skipped"]).sum())
    console.print(
        f"folds: {used} used, {len(folds) - used} skipped (u_min={config.u_min}); "
        f"devices: {', '.join(f'{a}={d}' for a, d in outputs.devices.items()) or '—'}",
        markup=False,
    )
    for reason in skip_reasons(folds):
        console.print(f"  skipped: {reason}", style="dim", markup=False)
    ceiling = ceiling_words(folds[~folds["skipped"].astype(bool)])
    if ceiling is not None:
        console.print(f"  ceiling: {ceiling}", style="dim", markup=False, highlight=False)
    strata = stratum_fold_counts(outputs.results)
    if largest is not None:
        strata = {name: counts for name, counts in strata.items() if name in largest}
    if any(skipped for _, skipped in strata.values()):
        counts = "; ".join(f"{stratum} {used_} used, {skipped} skipped"
                           for stratum, (used_, skipped) in strata.items())
        console.print(f"  folds per stratum (each skips its own by u_min): {counts}",
                      style="dim", markup=False, highlight=False)
    line = units_line(outputs.n_reused, outputs.n_computed, outputs.n_code_changed,
                      failed=len({failure.key for failure in outputs.failed}))
    console.print(f"units: {line}")
    console.print(store_usage(outputs.unit_store), style="dim", markup=False, highlight=False)
    if outputs.optimism is not None and not outputs.optimism.empty:
        console.print(optimism_table(outputs.optimism, config))
    for line in unscored_tuned_lines(outputs.results):
        console.print(line, style="yellow", markup=False, highlight=False)
    if outputs.overlap is not None and not outputs.overlap.empty:
        k = shown_k(config.k)
        overlap = overlap_table(outputs.overlap, k, shown)
        if overlap is not None:
            console.print(overlap)
    written = [name for name in RESULT_FILES if (outputs.directory / name).exists()]
    console.print(f"results: {outputs.directory}/{', '.join(written)}", markup=False)
    if (outputs.directory / "report.html").exists():
        console.print(f"report:  {outputs.directory / 'report.html'}", markup=False)
    for failure in outputs.failed:
        console.print(f"failed:  {escape(failure.describe())}", style="red", highlight=False)


def fallback_lines(part: pd.DataFrame) -> list[str]:
    """``--cold-users``: which algorithms of a stratum's table show their fallback's lists."""
    if "fallback" not in part:
        return []
    used = part[part["fallback"].notna()].drop_duplicates("algorithm")
    return [f"  {row.algorithm}: cannot score users without history; its row shows "
            f"{row.fallback}'s lists (--fallback {row.fallback})" for row in used.itertuples()]


def store_usage(directory: object) -> str:
    """The unit store's line of the summary: where it is, how many units and bytes it holds
    (``unit store ~/.cache/sweval/units: 240 units, 12.0 MiB``)."""
    from sweval.evaluators.units.store import UnitStore

    return store_line(directory, *UnitStore(directory).usage())


def interval_words(part: pd.DataFrame, level: float) -> str:
    """What the title says of the intervals below the means of ``part`` (a summary's rows):
    their level, or that one fold gives none."""
    if part["n_folds"].max() < 2:
        return f"bootstrap interval {NO_INTERVAL}"
    return f"{100 * level:g}% bootstrap interval over folds"


def same_configuration_lines(units: pd.DataFrame) -> list[str]:
    """One line per group of labels that name one configuration (the same unit on every fold:
    a tuning candidate with the algorithm's defaults, a variant spelling them out), whose rows
    are therefore equal: ``pop-n(n_recent=1000) is pop-n: one configuration, the same units``."""
    if units.empty or not {"fold", "algorithm", "unit_key"} <= set(units.columns):
        return []
    ordered = units.sort_values("fold", kind="stable")
    keys = ordered.groupby("algorithm", sort=False)["unit_key"].agg(tuple)
    groups: dict[tuple[str, ...], list[str]] = {}
    for label in units["algorithm"].drop_duplicates():  # in the run's order
        groups.setdefault(keys[label], []).append(str(label))
    return [f"{', '.join(labels[1:])} {'is' if len(labels) == 2 else 'are'} {labels[0]}: one "
            "configuration, the same units, so the same numbers"
            for labels in groups.values() if len(labels) > 1]


def common_folds_lines(summary: pd.DataFrame, metric: str) -> list[str]:
    """Where some algorithms were scored on fewer folds than the others (a tuned series lacks
    its first ones, a unit failed): one line per stratum naming them and saying what their Δ%
    compares (:func:`~evaluators.run.results.summarise`), with the best of each k when the
    best is not the same at every k."""
    part = summary[(summary["metric"] == metric) & summary["k"].notna() & (summary["n_folds"] > 0)]
    lines = []
    strata = part["stratum"].unique()
    for stratum in strata:
        here = part[part["stratum"] == stratum]
        rows = here[here["k"] == here["k"].iloc[0]]
        most = int(rows["n_folds"].max())
        fewer = rows[rows["n_folds"] < most]
        if fewer.empty:
            continue
        names = ", ".join(f"{a} ({n} of {most} folds)"
                          for a, n in zip(fewer["algorithm"], fewer["n_folds"], strict=True))
        where = f"stratum {stratum}: " if len(strata) > 1 else ""
        lines.append(
            f"{where}{names}: Δ% against the best ({best_names(here, most)}) on the folds both "
            f"have; the best is the highest mean among the algorithms scored on all {most} folds"
        )
    return lines


def best_names(rows: pd.DataFrame, most: int) -> str:
    """The best of the algorithms scored on ``most`` folds, at each k of ``rows`` (one
    stratum's summary rows): one name when it is the same at every k, else ``a at k=5, b at
    k=10 and 20``."""
    bests: dict[str, list[int]] = {}
    for k, at_k in rows.groupby("k", sort=True):
        complete = at_k[at_k["n_folds"] == most]
        if complete["mean"].notna().any():
            name = str(complete["algorithm"].iloc[int(np.nanargmax(complete["mean"].to_numpy()))])
            bests.setdefault(name, []).append(int(k))
    if len(bests) == 1:
        return next(iter(bests))
    return ", ".join(f"{name} at k={' and '.join(map(str, ks))}" for name, ks in bests.items())


def unscored_tuned_lines(results: pd.DataFrame) -> list[str]:
    """One line per tuned series that no fold scores (every fold lacks its validation windows,
    say ``--tune-windows`` ≥ ``--folds``): its column is all dashes and it has no optimism row,
    so say why."""
    tuned = results[results["algorithm"].astype(str).str.endswith(TUNED.format(""))]
    lines = []
    for algorithm, rows in tuned.groupby("algorithm", sort=False):
        if rows["skipped"].all():
            reason = str(rows["skip_reason"].iloc[-1])
            lines.append(f"{algorithm}: no fold scored: {reason}")
    return lines


