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
    gap.json           T, the window, the share, the configuration, the data's fingerprint
    report.html        the Recall and NDCG tables at one k, a figure each
                       (report-gap-<metric>-at-<k>.png) and whether each validation ranks the
                       algorithms as deployment does (:mod:`evaluators.report.gap_page`)

The sets' splits run side by side on ``--task-runner`` (threads, dask); MLflow (unless
``--no-tracking``) gets one run with each set's metrics and the files
(:mod:`flows.tracking.experiment_runs`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sweval.data.errors import SwevalError
from sweval.flows.cli.options import command_output
from sweval.flows.cli.terminal import table_console

if TYPE_CHECKING:  # the experiment's modules load when the command runs
    import pandas as pd
    from rich.console import Console

    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.experiments.gap import GapDesign

DEFAULT_OUTPUT = "runs/gap"


def run_gap(config: EvalConfig, design: GapDesign, *, output: Path,
            console: Console | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The experiment as ``sweval gap`` runs it: jobs on ``--task-runner``, a progress bar, its
    tables, then MLflow when ``config.tracking``; (gap table, long results).

    Raises:
        SwevalError: see :func:`evaluators.experiments.gap.run_gap`; MLflow's errors come after
            the tables are written.
    """
    from sweval.evaluators.experiments.gap import run_gap as run_experiment
    from sweval.flows.cli.progress import ProgressHook
    from sweval.flows.executors import executor_for

    progress = ProgressHook(config, label="validation and deployment",
                            stream=console.file if console is not None else None)
    gap, results = run_experiment(config, design, output=output, hooks=[progress],
                                  executor=lambda recipe: executor_for(config, recipe))
    if config.tracking:
        track(config, design, output, gap)
    return gap, results


def track(config: EvalConfig, design: GapDesign, output: Path, gap: pd.DataFrame) -> None:
    """Log the experiment to MLflow: each set's value per algorithm, metric and k; the files."""
    import pandas as pd

    from sweval.flows.tracking.experiment_runs import ExperimentTracker
    from sweval.flows.tracking.metrics import key_part, metric_key

    metrics = []
    for row in gap.itertuples():
        base = f"{key_part(row.algorithm)}.{{}}.{metric_key(row.metric, row.k)}"
        if not pd.isna(row.validation_value):
            metrics.append((base.format(key_part(row.validation)), row.validation_value, 0))
        if not pd.isna(row.test_value):
            metrics.append((base.format("test"), row.test_value, 0))
    fingerprint = json.loads((output / "gap.json").read_text()).get("data_fingerprint", "")
    tracker = ExperimentTracker(config, "gap", output, vars(design), fingerprint)
    tracker.start().finish(list(dict.fromkeys(metrics)),
                           [output / name for name in ("gap.csv", "results.csv", "gap.json")])


def print_gap(gap: pd.DataFrame, algorithms: list[str], k: int, metric: str = "recall",
              console: Console | None = None) -> None:
    """003 Table 2: per algorithm, each validation value with its change to the test value
    (``drop_pct`` in gap.csv: negative when the score shrinks after deployment)."""
    import pandas as pd
    from rich.markup import escape
    from rich.table import Table

    from sweval.evaluators.experiments.gap import VALIDATIONS
    from sweval.evaluators.metrics.names import LABELS

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
        from sweval.data.durations import parse_duration, parse_time
        from sweval.evaluators.experiments.gap import GapDesign, gap_notes, skipped_sets
        from sweval.evaluators.metrics.names import shown_k
        from sweval.evaluators.protocols.windows import WindowSpec
        from sweval.evaluators.report.gap_page import write_gap_report
        from sweval.evaluators.run.sources import load_data
        from sweval.evaluators.run.specs import window_spec

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
            print_gap(gap_frame, cfg.labels, k, metric)
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
