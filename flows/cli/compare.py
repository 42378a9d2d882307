"""``sweval compare``: the command and its wiring (executor, progress, MLflow, printed tables)
around :func:`evaluators.experiments.compare.run_compare`.

::

    sweval compare --data u.data.gz --format movielens --protocols sw-eval,loocv,leave-last-one-out

runs every algorithm under every protocol, then prints (:mod:`flows.cli.compare_tables`)

1. the paper's Table 2 layout per protocol: mean Recall@k per algorithm, Δ% to the best;
2. the ranking of the algorithms under each protocol, and Kendall's τ between every pair of
   protocols (``scipy.stats.kendalltau`` on the mean Recall@k of the algorithms both evaluate);
3. the leakage diagnostic (papers/000 Table 4): how many recommended items first appear in the
   log after the test instance's time. Zero by construction for ``sw-eval`` and
   ``temporal-global``; it is computed anyway and a non-zero value is flagged as a bug.

The jobs of every protocol run side by side on ``--task-runner`` (sequential, threads or a Dask
cluster); MLflow (unless ``--no-tracking``): in the experiment of ``sweval run``, a parent run
``compare-<dataset>-<stamp>`` per comparison, each protocol logged under it exactly as ``sweval
run`` logs an evaluation (:class:`flows.tracking.ComparisonTracker`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sweval.data.errors import SwevalError
from sweval.evaluators.metrics.names import DEFAULT_METRICS
from sweval.flows.cli.options import command_output
from sweval.flows.cli.terminal import PRINT_WIDTH, table_console

if TYPE_CHECKING:  # the comparison's modules load when the command runs
    from rich.console import Console

    from sweval.data.log import InteractionLog
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.experiments.compare_plan import CompareRecipe
    from sweval.evaluators.experiments.comparison import Comparison

DEFAULT_PROTOCOLS = "sw-eval,loocv,leave-last-one-out"
PROTOCOLS_HELP = ("Comma-separated: sw-eval, loocv, leave-last-one-out, temporal-global, "
                  "random-split, temporal-user, leave-last-basket (needs --basket-col).")
DEFAULT_OUTPUT = "runs/compare"


def run_compare(
    config: EvalConfig,
    protocols: list[str],
    *,
    output: str | Path,
    loocv_repeats: int = 10,
    console: Console | None = None,
    log: InteractionLog | None = None,
    split_ratio: float = 0.2,
    split_seed: int = 0,
    rank_metric: str = "recall",
    printed: PrintedTables | None = None,
) -> Comparison:
    """The comparison as ``sweval compare`` runs it: jobs on ``--task-runner``, a progress bar,
    MLflow when ``config.tracking``, the printed tables (``printed``) in ``compare.txt``.

    Raises:
        SwevalError: see :func:`evaluators.experiments.compare.run_compare`.
    """
    from sweval.evaluators.experiments.compare import run_compare as compare_protocols
    from sweval.evaluators.experiments.compare_plan import CompareOptions
    from sweval.flows.cli.progress import ProgressHook
    from sweval.flows.executors import executor_for

    options = CompareOptions(tuple(protocols), loocv_repeats, split_ratio, split_seed,
                             rank_metric)
    tracking = None
    if config.tracking:
        from sweval.flows.tracking import ComparisonTracker

        def tracking(cfg: EvalConfig, directory: Path, log: InteractionLog) -> Any:
            return ComparisonTracker.open(cfg, directory, list(options.protocols),
                                          options.loocv_repeats, log)

    def executor(recipe: CompareRecipe) -> Any:
        return executor_for(config, recipe)

    progress = ProgressHook(config, label="comparing",
                            stream=console.file if console is not None else None)
    return compare_protocols(config, options, output=output, log=log, executor=executor,
                             hooks=[progress], tracking=tracking,
                             printed=(printed or PrintedTables()).text)


class PrintedTables:
    """The comparison's printed tables, made once (:func:`flows.cli.compare_tables.
    comparison_printout`): written to ``compare.txt`` at :data:`PRINT_WIDTH`, then printed at
    the terminal's width."""

    def __init__(self) -> None:
        self._printout: Any = None

    def of(self, comparison: Comparison) -> Any:
        if self._printout is None:
            from sweval.flows.cli.compare_tables import comparison_printout

            self._printout = comparison_printout(comparison)
        return self._printout

    def text(self, comparison: Comparison) -> str:
        """The tables as ``compare.txt`` holds them."""
        recorder = table_console(record=True, width=PRINT_WIDTH, file=io.StringIO())
        self.of(comparison).show(recorder)
        return recorder.export_text()


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def compare_command(
    build_config: Callable[[typer.Context, dict[str, Any]], EvalConfig],
    setup_logging: Callable[[bool], None],
) -> Callable[..., None]:
    """The ``sweval compare`` command, for :mod:`flows.cli.app` to register with every option of
    ``sweval run``: the CLI passes its own config builder and logging set-up."""

    def compare(
        ctx: typer.Context,
        protocols: Annotated[str, typer.Option(help=PROTOCOLS_HELP)] = DEFAULT_PROTOCOLS,
        loocv_repeats: Annotated[int, typer.Option(help="LOOCV repetitions (seeds 0..n-1).")] = 10,
        split_ratio: Annotated[float, typer.Option(help="random-split and temporal-user: the share of each user's transactions held out, in (0, 1).")] = 0.2,
        split_seed: Annotated[int, typer.Option(help="random-split: the seed of the draw.")] = 0,
        rank_metric: Annotated[str, typer.Option(help="The metric of the rankings, Kendall's τ and the rank shifts: recall, hit_rate or ndcg (papers/002 ranks by NDCG@10).")] = "recall",
        **options: Any,
    ) -> None:
        from sweval.flows.cli.summary import check_something_scored

        setup_logging(options["verbose"])
        cfg = build_config(ctx, options)
        if cfg.stratify_by is not None and cfg.stratify_mode != "subset":
            raise SwevalError(
                "--stratify-mode test: compare stratifies in mode subset (every protocol on "
                "each policy's sub-log); use `sweval run --stratify-mode test` for SW-EVAL alone."
            )
        if cfg.metrics != DEFAULT_METRICS or cfg.seeds:
            raise SwevalError(
                "--metrics/--seeds: compare reports the four metrics of docs/protocol.md §4 for "
                "one configuration per algorithm; run `sweval run --metrics ... --seeds ...` for "
                "the others."
            )
        output = command_output(ctx, cfg, DEFAULT_OUTPUT)
        printed = PrintedTables()
        comparison = run_compare(cfg, _split(protocols), output=output,
                                 loocv_repeats=loocv_repeats, console=table_console(stderr=True),
                                 split_ratio=split_ratio, split_seed=split_seed,
                                 rank_metric=rank_metric, printed=printed)
        printed.of(comparison).show(table_console())
        report = comparison.directory / "report.html"
        if report.exists():
            table_console().print(f"report: {report}", markup=False, highlight=False)
        check_something_scored(comparison.results, u_min=cfg.u_min, what="split")

    compare.__doc__ = COMPARE_HELP
    return compare


# Typer keeps a docstring's line breaks: the help text is built from one-line paragraphs.
COMPARE_HELP = "\n\n".join([
    "Compare evaluation protocols on one log: the paper's Table 2 per protocol, the rankings "
    "with Kendall's τ between protocols, and the future-item leakage diagnostic.",
    "Takes every option of [bold]sweval run[/bold] (data, windows, k, u_min, algorithms, --set, "
    "MLflow, ...). --start is also the temporal-global cut-off (default: the start of the last "
    "20% of the log's time span); --output defaults to runs/compare. Runs in this process (no "
    "Prefect); the protocols' splits run side by side on --task-runner (threads or dask, "
    "--workers). Rerunning the same command resumes.",
])
