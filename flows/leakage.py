"""``sweval leakage``: the leakage-severity experiment of papers/000 §3–4 on any log.

::

    sweval leakage --data log.csv --window 365D --leak-test-start 2008-01-01 --leak-periods 3 \
        --algorithms pop,item-knn,svd --k 10,20

The test period P is ``[--leak-test-start, + --window)``; models train on everything before P's
end (minus the test instances) plus j = 0..``--leak-periods`` later periods of the same width
(:mod:`evaluators.experiments.leakage`). Output directory (``--output``, default ``runs/leakage``)::

    results.csv        the long table (SPEC §8), fold = j
    leakage_splits.csv per j: training end, training transactions, test users
    future_items.csv   per j, algorithm, k: recommended, future and instance-future items (Table 4)
    change.csv         min/max % change of every metric against j = 0 (Table 5)
    ranking.csv        the algorithms' rank per j, metric and k (Table 6)
    overlap.csv        mean Jaccard of each user's top-k set against j = 0 (Fig. 7), and for
                       seeded models (svd, als) the intrinsic overlap: the same model with
                       seed + 1 at j = 0
    severity.png       HR@k and NDCG@k against j (Fig. 8)
    leakage.json       the design and the configuration
    units/             the computed units (a rerun reuses them)

Runs in this process (no Prefect); not tracked in MLflow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer
from numpy.typing import NDArray
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweval.data.errors import SwevalError
from sweval.data.timestamps import minute_utc
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.leakage import (
    LeakageSeverity,
    Severity,
    SeverityDesign,
    pivot_by_j,
    reseeded_entry,
    severity_tables,
    with_intrinsic,
)
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.metrics.names import LABELS, shown_k
from sweval.evaluators.protocols.holdout import run_protocol
from sweval.evaluators.run.plan import load_data, unit_store
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.protocols.windows import parse_duration, parse_time
from sweval.flows.cli.options import command_output
from sweval.flows.cli.summary import unit_progress
from sweval.flows.cli.terminal import table_console

DEFAULT_OUTPUT = "runs/leakage"


def run_leakage(config: EvalConfig, design: SeverityDesign, *, output: Path,
                console: Console | None = None) -> Severity:
    """Run the experiment and write its tables into ``output``.

    Raises:
        SwevalError: bad options or data (test period outside the log, J too large, fewer
            test users than u_min, ...).
    """
    # one command at a time in `output`, and not into another command's output; prune keeps
    # this command's units, from its start
    with output_lock(output, command="leakage"):
        store = unit_store(config, default=output / "units")
        with store.in_use():
            return _run_leakage(config, design, output, store, console)


def _run_leakage(config: EvalConfig, design: SeverityDesign, output: Path, store: UnitStore,
                 console: Console | None) -> Severity:
    """:func:`run_leakage`'s work, registered in ``store``."""
    log = load_data(config)
    protocol = LeakageSeverity(design, u_min=config.u_min)
    design.check(log)
    with unit_progress("[bold]{task.description}[/bold]", enabled=config.progress,
                       console=console) as progress:
        task = progress.add_task("leakage severity",
                                 total=(design.periods + 1) * len(config.algorithms))
        run = run_protocol(log, protocol, list(config.algorithms), ks=config.k,
                           params=config.params, store=store,
                           progress=partial(progress.advance, task))
        reseeded = {entry: other for entry in config.algorithms
                    if (other := reseeded_entry(entry, config.params)) is not None}
        if reseeded:  # intrinsic overlap: the same model, another seed, at j = 0
            task = progress.add_task("other seeds (j = 0)", total=len(reseeded))
            seeds = run_protocol(log, LeakageSeverity(replace(design, periods=0)),
                                 list(reseeded.values()), ks=config.k, params=config.params,
                                 store=store, progress=partial(progress.advance, task))

    if run.results["skipped"].all():  # the test users are the same for every j
        reason = run.results["skip_reason"].iloc[0]
        raise SwevalError(
            f"every j is skipped ({reason}): the test period [{minute_utc(design.test_start)}, "
            f"{minute_utc(design.test_end)}) has too few test users; lower --u-min or choose a "
            "longer --window."
        )

    def lists_of(key: str) -> NDArray[np.int64]:
        return store.load(key, log).items

    severity = severity_tables(log, protocol, run.results, run.units, lists_of, config.k)
    if reseeded:
        severity.overlap = with_intrinsic(severity.overlap, seeds.units, reseeded, lists_of,
                                          run.units, config.k)
    _write(output, severity, design, config)
    return severity


def _write(output: Path, severity: Severity, design: SeverityDesign, config: EvalConfig) -> None:
    from sweval.evaluators.report.leakage_figures import severity_figure
    from sweval.evaluators.report.figures import figure_png

    tables = {"results.csv": severity.results, "leakage_splits.csv": severity.splits,
              "future_items.csv": severity.future, "change.csv": severity.change,
              "ranking.csv": severity.ranking, "overlap.csv": severity.overlap}
    files = {name: frame.to_csv(index=False).encode() for name, frame in tables.items()}
    k = shown_k(config.k)
    files["severity.png"] = figure_png(severity_figure(severity.results,
                                                       list(config.algorithms), k))
    record = {"design": {"test_start": design.test_start, "test_end": design.test_end,
                         "period_s": design.period_s, "periods": design.periods},
              "config": config.model_dump(mode="json")}
    files["leakage.json"] = (json.dumps(record, indent=2) + "\n").encode()
    publish(output, files, run=config.result_hash(), command="leakage")


def print_severity(severity: Severity, algorithms: list[str], k: int,
                   console: Console | None = None) -> None:
    """The experiment's tables: metric@k per j, future items, % change, ranking, overlap."""
    console = console or table_console()
    splits = Table(title="Training data per j (the test users are the same for every j)",
                   title_justify="left")
    for column in ("j", "training ends", "training transactions", "test users"):
        splits.add_column(column, justify="right")
    for row in severity.splits.itertuples(index=False):
        splits.add_row(str(row.j), minute_utc(row.train_end), f"{row.n_train:,}", f"{row.n_test:,}")
    console.print(splits)
    values = severity.results[(severity.results["stratum"] == "all")
                              & (severity.results["k"] == k)].rename(columns={"fold": "j"})
    for metric in ("hit_rate", "ndcg"):
        part = values[values["metric"] == metric]
        console.print(_by_j(pivot_by_j(part, "value", algorithms),
                            f"{LABELS[metric]}@{k} with j future periods in training", "{:.4f}"))
    future = severity.future[severity.future["k"] == k]
    console.print(_by_j(pivot_by_j(future, "n_future", algorithms),
                        f"Future items in the top-{k} lists (first seen after the test period)",
                        "{:,.0f}"))
    change = severity.change[(severity.change["k"] == k)
                             & severity.change["metric"].isin(["hit_rate", "ndcg"])]
    table = Table(title=f"% change against j = 0 (min / max over j ≥ 1), k = {k}",
                  title_justify="left")
    for column in ("algorithm", "metric", "value at j = 0", "min %", "max %"):
        table.add_column(column, justify="left" if column in ("algorithm", "metric") else "right")
    for row in change.itertuples(index=False):
        table.add_row(escape(row.algorithm), LABELS[row.metric], f"{row.value_j0:.4f}",
                      f"{row.min_change_pct:+z.1f}", f"{row.max_change_pct:+z.1f}")
    console.print(table)
    ranking = severity.ranking[(severity.ranking["k"] == k)
                               & (severity.ranking["metric"] == "ndcg")]
    console.print(_by_j(pivot_by_j(ranking, "rank", algorithms),
                        f"Rank by NDCG@{k} (1 = best)", "{:.0f}"))
    overlap = severity.overlap[severity.overlap["k"] == k]
    table = pivot_by_j(overlap, "jaccard_vs_j0", algorithms)
    if "intrinsic" in overlap:
        intrinsic = overlap.drop_duplicates("algorithm").set_index("algorithm")["intrinsic"]
        table["seed+1"] = intrinsic.reindex(table.index)
    console.print(_by_j(table, f"Mean Jaccard of each user's top-{k} against j = 0 (seed+1: "
                        "the same model with another seed at j = 0, the intrinsic overlap)",
                        "{:.3f}"))



def _by_j(table: pd.DataFrame, title: str, fmt: str) -> Table:
    out = Table(title=title, title_justify="left")
    out.add_column("algorithm")
    for j in table.columns:
        out.add_column(f"j={j}" if isinstance(j, int | np.integer) else str(j), justify="right")
    for algorithm, row in table.iterrows():
        out.add_row(escape(str(algorithm)),
                    *("" if pd.isna(v) else fmt.format(v) for v in row.tolist()))
    return out


def leakage_command(
    build_config: Callable[[typer.Context, dict[str, Any]], EvalConfig],
    setup_logging: Callable[[bool], None],
) -> Callable[..., None]:
    """The ``sweval leakage`` command, registered by :mod:`flows.cli.app` with every option of
    ``sweval run`` (data, --window as the period width, --k, --u-min, --algorithms, --set)."""

    def leakage(
        ctx: typer.Context,
        leak_test_start: Annotated[str, typer.Option(help="Start of the test period P (ISO date/time or epoch s); P lasts one --window.", show_default=False)],
        leak_periods: Annotated[int, typer.Option(help="J: train with 0, 1, ..., J periods of --window after P.")] = 2,
        **options: Any,
    ) -> None:
        setup_logging(options["verbose"])
        cfg = build_config(ctx, options)
        if cfg.stratify_by is not None:
            raise SwevalError("--stratify-by: sweval leakage reports unstratified results.")
        if cfg.train_window is not None or cfg.relevance != "all":
            raise SwevalError(
                "--train-window and --relevance do not apply to sweval leakage: its training "
                "sets are the whole log up to P's end plus j periods (that is the experiment), "
                "and each test user holds out one transaction."
            )
        design = SeverityDesign(
            test_start=parse_time(leak_test_start, option="--leak-test-start"),
            period_s=parse_duration(cfg.window), periods=leak_periods,
        )  # fmt: skip
        output = Path(command_output(ctx, cfg, DEFAULT_OUTPUT))
        stderr = table_console(stderr=True)
        severity = run_leakage(cfg, design, output=output, console=stderr)
        print_severity(severity, list(cfg.algorithms), shown_k(cfg.k))
        stderr.print(f"tables and severity.png: {output}", markup=False)

    leakage.__doc__ = (
        "Leakage severity (papers/000 §3-4): the same test users (their last transaction in "
        "the test period P) scored by models trained with 0, 1, ..., J later periods of future "
        "data; metrics, future items, % change, rankings and list overlap per j."
    )
    return leakage
