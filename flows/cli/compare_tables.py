"""The printed tables of ``sweval compare`` (rich): Table 2 per protocol, the rankings, Kendall's
τ, the leakage diagnostic and the lists' overlap with SW-EVAL's; :func:`print_comparison` prints
them all, made once by :func:`comparison_printout` (see :mod:`flows.cli.compare`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweval.evaluators.experiments.compare_tables import rank_shift, rankings, table2, tied_ranks
from sweval.evaluators.experiments.compare_views import (
    LEAKAGE_BUG,
    kendall_view,
    leakage_view,
    overlap_view,
    rank_shift_view,
)
from sweval.evaluators.experiments.comparison import tables_of
from sweval.evaluators.metrics.names import LABELS, shown_k
from sweval.evaluators.run.results import is_best
from sweval.evaluators.stats.power import CORRECTION_NAMES
from sweval.evaluators.stats.significance import ALPHA, NO_POWER_UNPAIRED
from sweval.evaluators.wording import plural
from sweval.flows.cli.significance import lead_cell, power_lines
from sweval.flows.cli.summary import delta_text
from sweval.flows.cli.terminal import folding_header, table_console

if TYPE_CHECKING:
    from sweval.evaluators.experiments.comparison import Comparison

COMPARE_TABLES = (
    "compare.csv", "compare_summary.csv", "table2.csv", "kendall.csv", "rank_shift.csv",
    "kendall_scatter.png", "leakage.csv", "leakage_per_split.csv", "significance.csv",
    "significance_protocols.csv", "overlap_protocols.csv", "tuning.csv",
    "tuning_protocols.csv", "optimism.csv",
)
"""The tables and figure ``sweval compare`` may write at the top of its directory, in the order
the files line names them; ``compare.txt`` and ``compare.json`` follow, always written
(``report.html`` is on a line of its own)."""


def _protocol_title(comparison: Comparison, name: str) -> str:
    run = comparison.runs[name]
    used = int((~run.splits["skipped"]).sum()) if len(run.splits) else 0
    skipped = len(run.splits) - used
    what = {
        "sw-eval": f"{len(run.splits)}-fold SW-EVAL ({comparison.config.window} windows"
                   + (f", {skipped} skipped" if skipped else "") + ")",
        "loocv": f"{len(run.splits)}-repetition LOOCV (seeds 0..{comparison.loocv_repeats - 1}"
                 + (f", {skipped} skipped" if skipped else "") + ")",
        "leave-last-one-out": "leave-last-one-out",
        "temporal-global": "temporal-global (one cut-off)",
        "random-split": f"random split ({comparison.split_ratio:.0%} of each user's "
                        f"transactions, seed {comparison.split_seed})",
        "temporal-user": f"temporal-user (each user's last {comparison.split_ratio:.0%})",
        "leave-last-basket": "leave-last-basket (each user's last basket)",
    }[name]
    return what


def table2_table(comparison: Comparison, name: str, *, metric: str | None = None) -> Table:
    """The paper's Table 2 block of one protocol: rows k, per algorithm the mean and Δ%, on
    ``metric`` (default: the comparison's rank metric)."""
    metric = metric or comparison.rank_metric
    part = table2(comparison.summary, metric=metric)
    part = part[part["protocol"] == name]
    label = LABELS.get(metric, metric)
    table = Table(title=f"Mean {label}@k — {_protocol_title(comparison, name)}",
                  title_justify="left")
    table.add_column("k", justify="right", style="bold", no_wrap=True)
    algorithms = list(dict.fromkeys(part["algorithm"]))
    for algorithm in algorithms:  # a long label folds over its numbers, which never do
        table.add_column(folding_header(algorithm), justify="right")
        table.add_column("Δ%", justify="right", style="dim", no_wrap=True)
    baseline = comparison.config.baseline
    table.add_column("best's lead" if baseline is None else f"lead over {escape(baseline)}",
                     justify="right", overflow="fold")
    summary = comparison.summary[comparison.summary["protocol"] == name]
    at = summary[(summary["metric"] == metric) & (summary["stratum"] == "all")]
    bests = {(str(a), int(k)) for a, k in at.loc[is_best(at), ["algorithm", "k"]].itertuples(
        index=False) if not pd.isna(k)}
    significance = comparison.significance
    if len(significance):
        significance = significance[significance["protocol"] == name]
    for k in comparison.ks:
        cells = [str(k)]
        for algorithm in algorithms:
            row = part[(part["algorithm"] == algorithm) & (part["k"] == k)]
            if row.empty or pd.isna(row["mean"].iloc[0]):
                cells += ["—", ""]
                continue
            mean, delta = float(row["mean"].iloc[0]), float(row["delta"].iloc[0])
            best = (algorithm, k) in bests
            cells += [f"[bold]{mean:.4f}[/bold]" if best else f"{mean:.4f}",
                      "best" if best else (delta_text(delta) if not np.isnan(delta) else "")]
        cells.append(lead_cell(summary, significance, stratum="all", metric=metric, k=k,
                               unit=comparison.config.test_unit, baseline=baseline)
                     if len(significance) else "—")
        table.add_row(*cells)
    return table


def protocol_effect_lines(comparison: Comparison, *, metric: str | None = None) -> list[str]:
    """Per k, how many algorithm leads differ between protocols (significance_protocols.csv),
    on ``metric`` (default: the comparison's rank metric)."""
    metric = metric or comparison.rank_metric
    frame = comparison.protocol_effect
    if frame.empty:
        return []
    lines = []
    for k in comparison.ks:
        at = frame[(frame["metric"] == metric) & (frame["k"] == k) & (frame["test"] == "welch")]
        if at.empty:
            continue
        tested = at[at["note"] != NO_POWER_UNPAIRED]
        n_significant = int((tested["p_holm"] < ALPHA).sum())
        lines.append(
            f"{LABELS.get(metric, metric)}@{k}: {n_significant} of {len(tested)} tested "
            f"(algorithm pair, protocol pair) leads differ between protocols (Welch, Holm, "
            f"p < {ALPHA:g}); {len(at) - len(tested)} untested: fewer than 5 splits on a side"
        )
    return lines


def skip_notes(comparison: Comparison, name: str) -> list[str]:
    """Why algorithms or splits of protocol ``name`` were not evaluated (one line per reason)."""
    results = comparison.runs[name].results
    skipped = results.loc[results["skipped"], ["fold", "algorithm", "skip_reason"]]
    notes = []
    for reason, rows in skipped.groupby("skip_reason", sort=False):
        algorithms = ", ".join(dict.fromkeys(rows["algorithm"]))
        n_splits = rows["fold"].nunique()
        notes.append(f"skipped ({algorithms}; {plural(n_splits, 'split')}): {reason}")
    return notes


def ranking_table(comparison: Comparison, *, metric: str | None = None) -> Table:
    """The ranking of the algorithms under every protocol, per k (best first), by ``metric``
    (default: the comparison's rank metric)."""
    metric = metric or comparison.rank_metric
    table = Table(title=f"Ranking by mean {LABELS.get(metric, metric)}@k (best first)",
                  title_justify="left")
    table.add_column("protocol", style="bold", overflow="fold")
    for k in comparison.ks:
        table.add_column(f"k={k}", overflow="fold")
    per_k = {k: rankings(comparison.summary, k, metric=metric) for k in comparison.ks}
    ranks = {k: tied_ranks(comparison.summary, k, metric=metric) for k in comparison.ks}
    for name in comparison.protocols:
        table.add_row(name, *(escape(_ranking_text(per_k[k].get(name, []),
                                                   ranks[k].get(name, {})))
                              for k in comparison.ks))
    return table


def _ranking_text(order: list[str], ranks: dict[str, int]) -> str:
    """``a > b = c > d``: ``=`` between algorithms that share a rank."""
    text = ""
    for i, name in enumerate(order):
        if i:
            text += " = " if ranks.get(name) == ranks.get(order[i - 1]) else " > "
        text += name
    return text


def rank_shift_rich(comparison: Comparison, k: int | None = None) -> Table:
    """002 Table 3: ranks per protocol in the first protocol's order, ↑n / ↓n its shift."""
    k = k if k is not None else shown_k(comparison.ks)
    frame = rank_shift(comparison.summary, comparison.protocols, metric=comparison.rank_metric)
    label = LABELS.get(comparison.rank_metric, comparison.rank_metric)
    table = Table(title=f"Rank by mean {label}@{k} per protocol; ↑n / ↓n: places gained or lost "
                  f"against {comparison.protocols[0]}", title_justify="left")
    table.add_column("algorithm", style="bold", overflow="fold")
    for name in comparison.protocols:
        table.add_column(folding_header(name), justify="right")
    _add_rows(table, rank_shift_view(frame, comparison.protocols, k))
    return table


def _add_rows(table: Table, view: pd.DataFrame) -> None:
    """The cells of ``view`` (display text, :mod:`evaluators.experiments.compare_views`) as rows of
    ``table``, escaped: names are text, never markup."""
    for row in view.itertuples(index=False):
        table.add_row(*(escape(str(cell)) for cell in row))


def strata_table(comparison: Comparison, k: int | None = None) -> Table | None:
    """papers/001 Table 3: mean metric@k per protocol and policy stratum (rows), algorithm
    (columns); None when the comparison is not stratified."""
    summary = comparison.summary
    if set(summary["stratum"].unique()) <= {"all"}:
        return None
    k = k if k is not None else shown_k(comparison.ks)
    metric = comparison.rank_metric
    part = summary[(summary["metric"] == metric) & (summary["k"] == k)]
    algorithms = list(dict.fromkeys(part["algorithm"]))
    table = Table(title=f"Mean {LABELS.get(metric, metric)}@{k} per protocol and policy stratum "
                  "(each stratum: the protocol on that policy's transactions alone; u_min per "
                  "stratum split)", title_justify="left")
    table.add_column("protocol", style="bold", overflow="fold")
    table.add_column("stratum", overflow="fold")
    for algorithm in algorithms:
        table.add_column(folding_header(algorithm), justify="right")
    for protocol in comparison.protocols:
        rows = part[part["protocol"] == protocol]
        for stratum in dict.fromkeys(rows["stratum"]):
            cells = rows[rows["stratum"] == stratum].set_index("algorithm")["mean"]
            table.add_row(protocol, escape(str(stratum)), *(
                "—" if a not in cells or pd.isna(cells[a]) else f"{cells[a]:.4f}"
                for a in algorithms))
    return table


def kendall_rich(comparison: Comparison) -> Table:
    """Kendall's τ (p-value) between the rankings of every pair of protocols, per k."""
    label = LABELS.get(comparison.rank_metric, comparison.rank_metric)
    table = Table(title=f"Kendall's τ between the protocols' rankings by {label}@k (p-value; "
                  "n = algorithms both protocols rank)",
                  title_justify="left")
    table.add_column("protocols", style="bold", overflow="fold")
    table.add_column("n", justify="right", no_wrap=True)
    for k in comparison.ks:
        table.add_column(f"k={k}", justify="right")
    _add_rows(table, kendall_view(comparison.kendall, comparison.ks))
    return table


def leakage_rich(comparison: Comparison, k: int | None = None) -> Table:
    """Future items among the top-k lists (papers/000 Table 4), pooled over splits."""
    k = k if k is not None else max(comparison.ks)
    table = Table(
        title=f"Leakage: recommended items (top-{k}) that first appear in the log after the test "
        "instance's time",
        title_justify="left",
    )
    for column, justify in (("protocol", "left"), ("algorithm", "left"), ("lists", "right"),
                            ("recommended", "right"), ("future items", "right"),
                            ("share", "right"), ("lists with one", "right"),
                            ("note", "left")):
        table.add_column(folding_header(column), justify=justify,  # type: ignore[arg-type]
                         overflow="fold" if column in ("protocol", "algorithm", "note") else "ellipsis")
    for row in leakage_view(comparison.leakage, k).itertuples(index=False):
        cells = [escape(str(cell)) for cell in row]
        if row.note == LEAKAGE_BUG:
            cells[-1] = f"[bold red]{cells[-1]}[/]"
        table.add_row(*cells)
    return table


def overlap_rich(comparison: Comparison) -> Table | None:
    """Mean Jaccard@k (k = 10, else the largest) of each protocol's lists against SW-EVAL's,
    pooled over the paired users of all splits (None without pairs)."""
    k = shown_k(comparison.ks)
    view = overlap_view(comparison.overlap, k)
    if view is None:
        return None
    table = Table(title=f"Top-{k} overlap with SW-EVAL's lists for the same user and test "
                  "instance (mean Jaccard; users paired)", title_justify="left",
                  padding=(0, 1))
    table.add_column("protocol", overflow="fold")
    for algorithm in view.columns[1:]:
        table.add_column(folding_header(algorithm), justify="right")
    _add_rows(table, view)
    return table


def print_lead_notes(comparison: Comparison, console: Any) -> None:
    """What the "best's lead" column means, and per protocol what its designs can show at the
    rank metric @ k = 10 (else the middle k)."""
    config = comparison.config
    against = "runner-up" if config.baseline is None else config.baseline
    over = ("users (each user's mean over the splits where it is eligible)"
            if config.test_unit == "users" else "the protocol's splits")
    console.print(
        f"  best's lead: best vs {against}, paired over {over}, Wilcoxon, "
        f"{CORRECTION_NAMES[config.correction]} (✓: p < {ALPHA:g}; no power: fewer than 5 "
        "units); significance.csv", style="dim", highlight=False,
    )
    significance = comparison.significance
    if significance.empty or "unit" not in significance.columns:
        return
    metric, k = comparison.rank_metric, shown_k(comparison.ks)
    for name in comparison.protocols:
        rows = significance[significance["protocol"] == name]
        for line, style in power_lines(rows, metric, k, config.test_unit):
            console.print(f"  {name}, {line}", style=style, highlight=False)


class Printout(list[tuple[tuple[Any, ...], dict[str, Any]]]):
    """What :func:`print_comparison` prints, made once: each ``console.print`` call's arguments
    (rich tables lay themselves out at each console's width), to print at the terminal and
    again into ``compare.txt`` without computing the tables twice."""

    def print(self, *objects: Any, **options: Any) -> None:
        self.append((objects, options))

    def show(self, console: Console) -> None:
        for objects, options in self:
            console.print(*objects, **options)


def comparison_printout(comparison: Comparison) -> Printout:
    """Table 2 per protocol, the rankings, Kendall's τ, the leakage diagnostic and the lists'
    overlap with SW-EVAL's, ready to print (:class:`Printout`)."""
    printout = Printout()
    _print(comparison, printout)
    return printout


def print_comparison(comparison: Comparison, console: Console | None = None) -> None:
    """Print :func:`comparison_printout` (at the terminal by default)."""
    comparison_printout(comparison).show(console if console is not None else table_console())


def _print(comparison: Comparison, console: Any) -> None:
    log = comparison.log
    console.print(
        f"[bold]compare[/bold] on {comparison.config.dataset_name}: {len(log):,} interactions, "
        f"{log.n_users:,} users, {log.n_items:,} items; protocols: "
        f"{', '.join(comparison.protocols)}"
    )
    for name in comparison.protocols:
        console.print(table2_table(comparison, name))
        for note in skip_notes(comparison, name)[:4]:
            console.print(f"  {escape(note)}", style="dim", highlight=False)
    print_lead_notes(comparison, console)
    strata = strata_table(comparison)
    if strata is not None:
        console.print(strata)
    console.print(ranking_table(comparison, metric=comparison.rank_metric))
    if len(comparison.protocols) > 1:
        console.print(rank_shift_rich(comparison))
        console.print(kendall_rich(comparison))
        for line in protocol_effect_lines(comparison):
            console.print(f"  {line}", highlight=False)
        console.print("  leads compared between protocols, unpaired: "
                      "significance_protocols.csv", style="dim", highlight=False)
    console.print(leakage_rich(comparison))
    console.print(
        "  first appearance = an item's first timestamp in the whole log; test instance = the "
        "held-out transaction (hold-out protocols) or the user's first test transaction; counts "
        "are summed over splits (LOOCV: over all repetitions)", style="dim", highlight=False,
    )
    overlap = overlap_rich(comparison)
    if overlap is not None:
        console.print(overlap)
    published = set(tables_of(comparison))
    written = [name for name in COMPARE_TABLES if name in published]
    written += ["compare.txt", "compare.json"]
    run = f"; MLflow run {comparison.mlflow_run_id}" if comparison.mlflow_run_id else ""
    console.print(f"files: {comparison.directory}/{', '.join(written)}{run}", markup=False,
                  soft_wrap=True)
