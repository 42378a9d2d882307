"""``sweval leakage``: the leakage-severity experiment of papers/000 §3–4 on any log.

::

    sweval leakage --data log.csv --window 365D --leak-test-start 2008-01-01 --leak-periods 3 \
        --algorithms pop,item-knn,svd --k 10,20

The test period P is ``[--leak-test-start, + --window)``; models train on everything before P's
end (minus the test instances) plus j = 0..``--leak-periods`` later periods of the same width
(:mod:`evaluators.experiments.leakage`, run by :mod:`evaluators.experiments.leakage_run`).
Output directory (``--output``, default ``runs/leakage``)::

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

The splits run side by side on ``--task-runner`` (threads, dask); MLflow (unless
``--no-tracking``) gets one run with every metric at step j and the files
(:mod:`flows.tracking.experiment_runs`).
"""

from __future__ import annotations

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
    from rich.table import Table

    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.experiments.leakage import Severity, SeverityDesign

DEFAULT_OUTPUT = "runs/leakage"


def run_leakage(config: EvalConfig, design: SeverityDesign, *, output: Path,
                console: Console | None = None) -> Severity:
    """The experiment as ``sweval leakage`` runs it: jobs on ``--task-runner``, a progress
    bar, its tables, then MLflow when ``config.tracking``.

    Raises:
        SwevalError: see :func:`evaluators.experiments.leakage_run.run_leakage`; MLflow's
            errors come after the tables are written.
    """
    from sweval.evaluators.experiments.leakage_run import run_leakage as run_experiment
    from sweval.flows.cli.progress import ProgressHook
    from sweval.flows.executors import executor_for

    progress = ProgressHook(config, label="leakage severity",
                            stream=console.file if console is not None else None)
    severity = run_experiment(config, design, output=output, hooks=[progress],
                              executor=lambda recipe: executor_for(config, recipe))
    if config.tracking:
        track(config, design, output, severity)
    return severity


def track(config: EvalConfig, design: SeverityDesign, output: Path, severity: Severity) -> None:
    """Log the experiment to MLflow: every metric per algorithm and k at step j, the files."""
    import pandas as pd

    from sweval.evaluators.experiments.leakage_run import FILES
    from sweval.flows.tracking.experiment_runs import ExperimentTracker
    from sweval.flows.tracking.metrics import key_part, metric_key

    rows = severity.results[(severity.results["stratum"] == "all") & ~severity.results["skipped"]]
    metrics = [(f"{key_part(row.algorithm)}.{metric_key(row.metric, row.k)}", row.value,
                int(row.fold)) for row in rows.itertuples() if not pd.isna(row.value)]
    tracker = ExperimentTracker(config, "leakage", output, vars(design),
                                severity.fingerprint)
    tracker.start().finish(metrics, [output / name for name in FILES])


def print_severity(severity: Severity, algorithms: list[str], k: int,
                   console: Console | None = None) -> None:
    """The experiment's tables: metric@k per j, future items, % change, ranking, overlap."""
    from rich.markup import escape
    from rich.table import Table

    from sweval.data.timestamps import minute_utc
    from sweval.evaluators.experiments.leakage import pivot_by_j
    from sweval.evaluators.metrics.names import LABELS

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
    import numpy as np
    import pandas as pd
    from rich.markup import escape
    from rich.table import Table

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
        from sweval.data.durations import parse_duration, parse_time
        from sweval.evaluators.experiments.leakage import SeverityDesign
        from sweval.evaluators.metrics.names import shown_k

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
        print_severity(severity, cfg.labels, shown_k(cfg.k))
        stderr.print(f"tables and severity.png: {output}", markup=False)

    leakage.__doc__ = (
        "Leakage severity (papers/000 §3-4): the same test users (their last transaction in "
        "the test period P) scored by models trained with 0, 1, ..., J later periods of future "
        "data; metrics, future items, % change, rankings and list overlap per j."
    )
    return leakage
