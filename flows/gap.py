"""``sweval gap``: the validation-to-deployment gap of papers/003 on any log.

::

    sweval gap --data log.csv --window 30D --start 2014-06-01 --algorithms pop,item-knn,svd

Validates every algorithm three ways on the data before T = ``--start`` (traditional random
hold-out, proportional per-user temporal hold-out, a cut-off window [T − tΔ, T)), then deploys it:
trains on everything before T and tests on [T, T + tΔ) (:mod:`evaluators.experiments.gap`).
Without ``--start``, T is the start of the last ``--window`` window (aligned as ``sweval run``
aligns its windows). Output directory (``--output``, default ``runs/gap``)::

    gap.csv            per algorithm, metric, k and validation set: validation value, test value,
                       drop in % (papers/003 Table 2)
    results.csv        the long tables of the four sets, with a ``set`` column
    gap.json           T, the window, the share, the configuration
    report.html        the Recall and NDCG tables at one k, a figure each
                       (report-gap-<metric>-at-<k>.png) and whether each validation ranks the
                       algorithms as deployment does (:mod:`evaluators.report.gap_page`)
    units/             the computed units (a rerun reuses them)

Runs in this process (no Prefect); not tracked in MLflow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.gap import (
    VALIDATIONS,
    GapDesign,
    deployment_protocol,
    gap_notes,
    gap_table,
    skipped_sets,
    validation_log,
    validation_protocols,
)
from sweval.evaluators.report.gap_page import write_gap_report
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.metrics.names import LABELS, shown_k
from sweval.evaluators.protocols.holdout import run_protocol
from sweval.evaluators.run.plan import load_data, unit_store, window_spec
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.protocols.windows import WindowSpec, parse_duration, parse_time
from sweval.flows.cli.options import command_output
from sweval.flows.cli.summary import unit_progress
from sweval.flows.cli.terminal import table_console

DEFAULT_OUTPUT = "runs/gap"


def run_gap(config: EvalConfig, design: GapDesign, *, output: Path,
            console: Console | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validate, deploy and write the tables; returns (gap table, long results).

    Raises:
        SwevalError: bad options or data (windows outside the log, ratio outside (0, 1), ...).
    """
    # one command at a time in `output`, and not into another command's output; prune keeps
    # this command's units, from its start
    with output_lock(output, command="gap"):
        store = unit_store(config, default=output / "units")
        with store.in_use():
            return _run_gap(config, design, output, store, console)


def _run_gap(config: EvalConfig, design: GapDesign, output: Path, store: UnitStore,
             console: Console | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`run_gap`'s work, registered in ``store``."""
    log = load_data(config)
    design.check(log)
    validations = validation_protocols(design, u_min=config.u_min)
    sets: dict[str, pd.DataFrame] = {}
    with unit_progress("[bold]{task.description}[/bold]", enabled=config.progress,
                       console=console) as progress:
        task = progress.add_task("validation and deployment", total=4 * len(config.algorithms))
        advance = partial(progress.advance, task)
        for name, protocol in validations.items():
            sets[name] = run_protocol(validation_log(log, design, name), protocol,
                                      list(config.algorithms), ks=config.k,
                                      params=config.params, store=store, progress=advance).results
        deploy = deployment_protocol(log, design, u_min=config.u_min)
        sets["test"] = run_protocol(log, deploy, list(config.algorithms), ks=config.k,
                                    params=config.params, store=store, progress=advance).results
    gap = gap_table({name: sets[name] for name in VALIDATIONS}, sets["test"])
    results = pd.concat([frame.assign(set=name) for name, frame in sets.items()],
                        ignore_index=True)
    record = {"deploy_start": design.deploy_start, "window_s": design.width_s,
              "share": design.share, "seed": design.seed,
              "train_window_s": design.train_window_s, "relevance": design.relevance,
              "validations": VALIDATIONS, "config": config.model_dump(mode="json")}
    publish(output, {
        "gap.csv": gap.to_csv(index=False, float_format="%.10g").encode(),
        "results.csv": results.to_csv(index=False, float_format="%.10g").encode(),
        "gap.json": (json.dumps(record, indent=2) + "\n").encode(),
    }, run=config.result_hash(), command="gap")
    return gap, results


def print_gap(gap: pd.DataFrame, algorithms: list[str], k: int, metric: str = "recall",
              console: Console | None = None) -> None:
    """003 Table 2: per algorithm, each validation value with its change to the test value
    (``drop_pct`` in gap.csv: negative when the score shrinks after deployment)."""
    console = console or table_console()
    part = gap[(gap["metric"] == metric) & (gap["k"] == k)]
    table = Table(title=f"{LABELS[metric]}@{k}: validated before T, then deployed on [T, T+tΔ) "
                  "(change = test / validation − 1)", title_justify="left")
    table.add_column("algorithm", style="bold")
    for name in VALIDATIONS:
        table.add_column(f"val {name}", justify="right")
        table.add_column("change", justify="right", style="dim")
    table.add_column("test", justify="right")
    for algorithm in algorithms:
        rows = part[part["algorithm"] == algorithm].set_index("validation")
        if rows.empty:
            continue
        cells = []
        for name in VALIDATIONS:
            if name in rows.index:
                row = rows.loc[name]
                cells += [f"{row['validation_value']:.4f}",
                          "" if pd.isna(row["drop_pct"]) else f"{row['drop_pct']:+z.1f}%"]
            else:
                cells += ["—", ""]
        test = rows["test_value"].dropna()
        cells.append(f"{test.iloc[0]:.4f}" if len(test) else "—")
        table.add_row(escape(algorithm), *cells)
    console.print(table)


def gap_command(
    build_config: Callable[[typer.Context, dict[str, Any]], EvalConfig],
    setup_logging: Callable[[bool], None],
) -> Callable[..., None]:
    """The ``sweval gap`` command, registered by :mod:`flows.cli.app` with every option of
    ``sweval run`` (--start is T, --window the width of the deployment and cut-off windows)."""

    def gap(
        ctx: typer.Context,
        split_ratio: Annotated[float, typer.Option(help="Traditional and proportional validation: the share of each user's transactions held out, in (0, 1).")] = 0.2,
        split_seed: Annotated[int, typer.Option(help="Traditional validation: the seed of the random hold-out.")] = 0,
        **options: Any,
    ) -> None:
        setup_logging(options["verbose"])
        cfg = build_config(ctx, options)
        if cfg.stratify_by is not None:
            raise SwevalError("--stratify-by: sweval gap reports unstratified results.")
        width = parse_duration(cfg.window)
        if cfg.start is not None:
            start = parse_time(cfg.start, option="--start")
        else:
            start = WindowSpec(width_s=width, n_folds=1).first_start(load_data(cfg).t_max)
        design = GapDesign(deploy_start=start, width_s=width, share=split_ratio,
                           seed=split_seed, train_window_s=window_spec(cfg).train_window_s,
                           relevance=cfg.relevance)
        output = Path(command_output(ctx, cfg, DEFAULT_OUTPUT))
        stderr = table_console(stderr=True)
        gap_frame, results = run_gap(cfg, design, output=output, console=stderr)
        skipped = skipped_sets(results)
        if "test" in skipped:
            raise SwevalError(
                f"the deployment window is skipped ({skipped['test']}): there is no deployed "
                f"score to compare the validations with; lower --u-min. Tables: {output}"
            )
        k = shown_k(cfg.k)
        for metric in ("recall", "ndcg"):
            print_gap(gap_frame, list(cfg.algorithms), k, metric)
        for note in gap_notes(results):
            stderr.print(note, style="yellow", markup=False, highlight=False)
        stderr.print(f"tables: {output}", markup=False)
        page = write_gap_report(output, metrics=["recall", "ndcg"], k=k)[0]
        stderr.print(f"report: {page}", markup=False)

    gap.__doc__ = (
        "The validation-to-deployment gap (papers/003): each algorithm validated three ways "
        "before T (random, per-user temporal, cut-off window), then deployed on [T, T+tΔ); "
        "prints the % drop from each validation score to the deployment score."
    )
    return gap
