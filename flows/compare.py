"""``sweval compare``: one log, several evaluation protocols, the paper's Table 2 and the leakage.

::

    sweval compare --data u.data.gz --format movielens --protocols sw-eval,loocv,leave-last-one-out

runs every algorithm under every protocol (:mod:`evaluators.protocols.holdout`), then prints

1. the paper's Table 2 layout per protocol: mean Recall@k per algorithm, Δ% to the best;
2. the ranking of the algorithms under each protocol, and Kendall's τ between every pair of
   protocols (``scipy.stats.kendalltau`` on the mean Recall@k of the algorithms both evaluate);
3. the leakage diagnostic (papers/000 Table 4): how many recommended items first appear in the
   log after the test instance's time. Zero by construction for ``sw-eval`` and
   ``temporal-global``; it is computed anyway and a non-zero value is flagged as a bug.

Output directory (``--output``, default ``runs/compare``)::

    compare.csv            the long table (SPEC §8) of every protocol, ``protocol`` first
    compare_summary.csv    mean ± std over splits per protocol, algorithm, metric and k, Δ%
    table2.csv             the Recall rows of the summary (what Table 2 prints)
    kendall.csv            τ and p-value per protocol pair and k (on --rank-metric)
    rank_shift.csv         each algorithm's rank per protocol and k, and its shift against
                           the first protocol (papers/002 Table 3)
    kendall_scatter.png    metric@k of every algorithm configuration, one panel per protocol
                           pair, with τ (papers/002 Fig. 2; --algorithms variants add points)
    significance.csv       per protocol, paired tests between algorithms over its splits
                           (evaluators/stats/significance.py: interval, Wilcoxon, t-test, Holm)
    significance_protocols.csv  is a's lead over b different under one protocol than under
                           another? (unpaired: Mann-Whitney, Welch)
    leakage.csv            future items per protocol, algorithm and k, pooled over splits
    leakage_per_split.csv  the same per split (fold / repetition seed)
    overlap_protocols.csv  Jaccard of each protocol's top-k lists against SW-EVAL's for the same
                           user and test instance (evaluators.experiments.protocol_overlap)
    compare.txt            the printed tables
    compare.json           configuration, protocol parameters, data facts, timings
    sw-eval/               exactly what ``sweval run`` writes (results.csv, summary.csv, ...)
    <protocol>/            results.csv, splits.csv, units.csv; units/ for resuming

Finished (split, algorithm) units are stored per protocol, so an interrupted comparison resumes.

MLflow (unless ``--no-tracking``): in the experiment of ``sweval run`` (``sweval/<dataset>``), a
parent run ``compare-<dataset>-<stamp>`` per comparison holds the Kendall τ values, the leakage
shares and every file above as artifacts. Each protocol is logged by :class:`flows.tracking.Tracker`
exactly as ``sweval run`` logs an evaluation (a run with one child per algorithm, metrics stepped
by fold or LOOCV seed), re-parented under the comparison run and tagged ``sweval.protocol``; each
algorithm child also gets ``future_items_at_k`` and ``future_share_at_k``
(:class:`flows.tracking.ComparisonTracker`).

This module runs, assembles and writes the comparison and holds the typer command;
:mod:`flows.cli.compare_tables` prints it.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer
from rich.console import Console

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.experiments.compare import (
    COMPARE_COLUMNS,
    compare_summary,
    kendall_table,
    leakage_summary,
    rank_shift,
    table2,
)
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.metrics.names import DEFAULT_METRICS, shown_k
from sweval.evaluators.run.outputs import collect, write_outputs
from sweval.evaluators.experiments.protocol_overlap import protocol_overlap
from sweval.evaluators.protocols.holdout import (
    LOOCV,
    GivenSplits,
    LeaveLastBasket,
    LeaveLastOneOut,
    Protocol,
    ProtocolRun,
    RandomSplit,
    SlidingWindow,
    TemporalGlobal,
    TemporalUser,
    check_loocv_repeats,
    check_split_seed,
    count_units,
    for_stratum,
    parse_protocols,
    run_protocol,
)
from sweval.evaluators.run.plan import Plan, make_plan, unit_store, window_spec
from sweval.evaluators.stats.significance import (
    Bootstrap,
    compare_algorithms_per_protocol,
    compare_protocols,
)
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.stats.tuning import Search, tune_comparison
from sweval.flows.cli.compare_tables import print_comparison
from sweval.flows.cli.options import command_output
from sweval.flows.pipeline import write_report_quietly
from sweval.flows.processes import is_stop
from sweval.flows.cli.summary import check_something_scored, unit_progress
from sweval.flows.cli.terminal import PRINT_WIDTH, table_console
from sweval.flows.tracking import ComparisonTracker

_log = logging.getLogger(__name__)

DEFAULT_PROTOCOLS = "sw-eval,loocv,leave-last-one-out"
PROTOCOLS_HELP = ("Comma-separated: sw-eval, loocv, leave-last-one-out, temporal-global, "
                  "random-split, temporal-user, leave-last-basket (needs --basket-col).")
#: Metrics a ranking can use (one value per k).
RANK_METRICS = ("recall", "hit_rate", "ndcg")
DEFAULT_OUTPUT = "runs/compare"


# ---------------------------------------------------------------------- the comparison
@dataclass
class Comparison:
    """Everything a comparison produced.

    Attributes:
        config: the run's configuration (its ``output`` is the ``sw-eval`` sub-directory).
        directory: the comparison's output directory.
        protocols: the protocol names, in the order given.
        runs: per protocol, its :class:`~evaluators.protocols.holdout.ProtocolRun`.
        results: the long table of every protocol (``compare.csv``).
        summary: per protocol, the macro means with Δ% (``compare_summary.csv``).
        kendall: τ per protocol pair and k, on ``rank_metric`` (``kendall.csv``).
        leakage: future items pooled over splits (``leakage.csv``).
        significance: per protocol, the algorithms' paired tests (``significance.csv``).
        protocol_effect: the leads compared between protocols (``significance_protocols.csv``).
        log: the log compared on.
        timings: seconds per protocol.
        mlflow_run_id: the comparison's MLflow parent run, when tracked.
        rank_metric: the metric the rankings, τ and rank shifts use.
        split_ratio, split_seed: the per-user test share of ``random-split`` and
            ``temporal-user``, and the seed of ``random-split``.
        overlap: J@k of each protocol's lists against SW-EVAL's (``overlap_protocols.csv``).
        unit_store: the directory of the unit store the comparison used.
    """

    config: EvalConfig
    directory: Path
    protocols: list[str]
    runs: dict[str, ProtocolRun]
    results: pd.DataFrame
    summary: pd.DataFrame
    kendall: pd.DataFrame
    leakage: pd.DataFrame
    log: InteractionLog
    loocv_repeats: int
    unit_store: Path
    significance: pd.DataFrame = field(default_factory=pd.DataFrame)
    protocol_effect: pd.DataFrame = field(default_factory=pd.DataFrame)
    timings: dict[str, float] = field(default_factory=dict)
    mlflow_run_id: str | None = None
    rank_metric: str = "recall"
    split_ratio: float = 0.2
    split_seed: int = 0
    overlap: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def ks(self) -> list[int]:
        return list(self.config.k)

    @property
    def leakage_per_split(self) -> pd.DataFrame:
        return pd.concat([run.leakage for run in self.runs.values()], ignore_index=True)


def build_protocol(
    name: str, config: EvalConfig, *, loocv_repeats: int, plan: Plan | None = None,
    split_ratio: float = 0.2, split_seed: int = 0,
) -> Protocol:
    """The protocol ``name`` with the options of ``config`` (u_min, relevance, start, ...)."""
    if name == "sw-eval":
        if plan is None:
            raise ValueError("sw-eval needs the plan's folds")
        return SlidingWindow(plan.folds, relevance=config.relevance)
    if name == "loocv":
        return LOOCV(repeats=loocv_repeats, u_min=config.u_min)
    if name == "leave-last-one-out":
        return LeaveLastOneOut(u_min=config.u_min)
    if name == "temporal-global":
        spec = window_spec(config)
        return TemporalGlobal(start=spec.start, train_window_s=spec.train_window_s,
                              u_min=config.u_min, relevance=config.relevance)
    if name == "random-split":
        return RandomSplit(share=split_ratio, seed=split_seed, u_min=config.u_min)
    if name == "temporal-user":
        return TemporalUser(share=split_ratio, u_min=config.u_min)
    if name == "leave-last-basket":
        return LeaveLastBasket(u_min=config.u_min)
    raise SwevalError(f"unknown protocol {name!r}")


def _protocol_key(protocol: Protocol, config: EvalConfig, fingerprint: str) -> str:
    import hashlib

    text = json.dumps(
        {"protocol": protocol.name, "params": protocol.describe(), "config": config.result_hash()},
        sort_keys=True, default=str,
    )
    return f"{protocol.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}-{fingerprint}"


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
) -> Comparison:
    """Run every protocol, write the tables, and track them in MLflow when ``config.tracking``.

    Args:
        config: the options of ``sweval run`` (its ``output`` is ignored: the SW-EVAL part goes
            to ``<output>/sw-eval``).
        protocols: protocol names (:data:`evaluators.protocols.holdout.PROTOCOLS`).
        output: the comparison's output directory.
        loocv_repeats: LOOCV repetitions (seeds 0..n−1).
        console: where the progress bar goes (none when ``config.progress`` is false).
        log: an already loaded log (tests); default: load ``config.data``.
        split_ratio, split_seed: ``random-split`` and ``temporal-user``'s per-user test share,
            ``random-split``'s seed.
        rank_metric: the metric of the rankings, Kendall's τ and the rank shifts.

    Raises:
        SwevalError: bad options, data or protocol problems, tracking failures, or another
            run writing to ``output`` (:func:`evaluators.units.locks.output_lock`).
    """
    protocols = parse_protocols(protocols)
    check_loocv_repeats(loocv_repeats)  # before anything is fitted
    check_split_seed(split_seed)
    if rank_metric not in RANK_METRICS:
        raise SwevalError(f"--rank-metric {rank_metric!r}: one of {', '.join(RANK_METRICS)}.")
    directory = Path(output)
    with output_lock(directory, command="compare"):
        return _compare(config, protocols, directory, loocv_repeats=loocv_repeats, log=log,
                        console=console, split_ratio=split_ratio, split_seed=split_seed,
                        rank_metric=rank_metric)


def _compare(
    config: EvalConfig,
    protocols: list[str],
    directory: Path,
    *,
    loocv_repeats: int,
    console: Console | None,
    log: InteractionLog | None,
    split_ratio: float,
    split_seed: int,
    rank_metric: str,
) -> Comparison:
    """:func:`run_compare`'s work, with the output directory locked."""
    config = config.model_copy(update={"output": str(directory / "sw-eval")})
    store = unit_store(config, default=directory / "units")
    with store.in_use():  # sweval cache prune keeps what this comparison uses, from its start
        plan = make_plan(config, log)  # validates algorithms, --set, windows; loads the data
        log = plan.log
        if "leave-last-basket" in protocols and log.basket is None:
            raise SwevalError(
                f"{log.source}: --protocols leave-last-basket needs the basket or session of "
                "each transaction; name its column with --basket-col."
            )

        built = [build_protocol(name, config, loocv_repeats=loocv_repeats, plan=plan,
                                split_ratio=split_ratio, split_seed=split_seed)
                 for name in protocols]
        names = [spec.label for spec in plan.specs]  # --tune's candidates are variants too
        tracker_group = ComparisonTracker.open(config, directory, protocols, loocv_repeats, log) \
            if config.tracking else None
        runs: dict[str, ProtocolRun] = {}
        timings: dict[str, float] = {}
        try:
            with unit_progress(
                "[bold]{task.description}[/bold]", enabled=config.progress, console=console
            ) as progress:
                for protocol in built:
                    task = progress.add_task(protocol.name, total=count_units(log, protocol, names))
                    clock = time.perf_counter()
                    key = plan.key if protocol.name == "sw-eval" else \
                        _protocol_key(protocol, config, log.fingerprint())
                    run = run_protocol(
                        log, protocol, names, ks=config.k, params=config.params, config_hash=key,
                        store=store, progress=lambda n, task=task: progress.advance(task, n),
                    )
                    if plan.strata is not None:
                        run = _with_strata(run, protocol, plan, names, config, key, store)
                    timings[protocol.name] = time.perf_counter() - clock
                    runs[protocol.name] = run
                    files = _write_protocol(directory, protocol, run, plan, store)
                    if tracker_group is not None:
                        tracker_group.log_protocol(protocol, run, key, files)
            for name in OPTIONAL_TABLES:  # an earlier comparison's (--tune, ...): not this one's
                (directory / name).unlink(missing_ok=True)
            if config.tune and "sw-eval" in runs:
                runs["sw-eval"] = _with_tuned(runs, config, directory, plan.searches)
            comparison = _assemble(config, directory, protocols, runs, log, loocv_repeats, timings,
                                   rank_metric=rank_metric, unit_store=store.directory)
            comparison.split_ratio, comparison.split_seed = split_ratio, split_seed
            comparison.overlap = protocol_overlap(log, built, runs, store, config.k)
            if tracker_group is not None:
                comparison.mlflow_run_id = tracker_group.parent_run_id
            write_comparison(comparison)
            write_report_quietly(directory)
            if tracker_group is not None:
                tracker_group.finish(comparison)
        except BaseException as exc:
            if tracker_group is not None:
                tracker_group.fail("KILLED" if is_stop(exc) else "FAILED")
            raise
        return comparison


def _with_strata(run: ProtocolRun, protocol: Protocol, plan: Plan, names: list[str],
                 config: EvalConfig, key: str, store: UnitStore) -> ProtocolRun:
    """``run`` with the rows of every policy stratum (SPEC §6 mode ``subset``): the protocol
    run on each policy's sub-log, u_min applying per stratum split. ``sw-eval``'s strata are
    the plan's, so their units are those of ``sweval run --stratify-by``."""
    assert plan.strata is not None
    parts = [run.results]
    for label in plan.strata.labels:
        if protocol.name == "sw-eval":
            stratum: Protocol = GivenSplits("sw-eval", plan.stratum_splits[label])
        else:
            stratum = for_stratum(protocol, plan.log)
        try:
            sub = run_protocol(plan.strata.logs[label], stratum, names, ks=config.k,
                               params=config.params, config_hash=key, store=store)
        except SwevalError as exc:  # e.g. no data of this policy after the cut-off
            _log.warning("%s, stratum %s: not evaluated (%s)", protocol.name, label, exc)
            continue
        results = sub.results.copy()
        results["stratum"] = label
        parts.append(results)
    return replace(run, results=pd.concat(parts, ignore_index=True))


#: The tables and figure only some comparisons write (with --tune, with two protocols or
#: more, with users paired between protocols): removed before a comparison writes its own.
OPTIONAL_TABLES = ("tuning.csv", "tuning_protocols.csv", "optimism.csv", "overlap_protocols.csv",
                   "kendall_scatter.png")


def _with_tuned(
    runs: dict[str, ProtocolRun], config: EvalConfig, directory: Path, searches: list[Search]
) -> ProtocolRun:
    """SW-EVAL's run with the tuned series (:func:`evaluators.stats.tuning.tune_comparison`); the
    choices go to ``tuning.csv`` and ``tuning_protocols.csv``, tuned against oracle to
    ``optimism.csv``."""
    others = {name: run.results for name, run in runs.items() if name != "sw-eval"}
    results, tables = tune_comparison(runs["sw-eval"].results, others, config, searches)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, table in tables.items():
            table.to_csv(directory / name, index=False, float_format="%.10g")
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot write the tuning tables ({exc}).") from exc
    return replace(runs["sw-eval"], results=results)


def _write_protocol(
    directory: Path, protocol: Protocol, run: ProtocolRun, plan: Plan, store: UnitStore
) -> list[Path]:
    """A protocol's own files; for ``sw-eval`` exactly those of ``sweval run``."""
    if protocol.name == "sw-eval":
        outputs = collect(plan, store)
        write_outputs(plan, outputs)
        return [outputs.directory / name for name in
                ("results.csv", "summary.csv", "folds.csv", "units.csv", "config.json")]
    target = directory / protocol.name
    try:
        target.mkdir(parents=True, exist_ok=True)
        run.results.drop(columns="protocol").to_csv(target / "results.csv", index=False,
                                                    float_format="%.10g")
        run.splits.to_csv(target / "splits.csv", index=False)
        run.units.to_csv(target / "units.csv", index=False, float_format="%.4f")
    except OSError as exc:
        raise SwevalError(f"{target}: cannot write the results ({exc}).") from exc
    return [target / name for name in ("results.csv", "splits.csv", "units.csv")]


def _assemble(
    config: EvalConfig,
    directory: Path,
    protocols: list[str],
    runs: dict[str, ProtocolRun],
    log: InteractionLog,
    loocv_repeats: int,
    timings: dict[str, float],
    *,
    rank_metric: str = "recall",
    unit_store: Path,
) -> Comparison:
    results = pd.concat([runs[name].results for name in protocols], ignore_index=True)
    results = results[COMPARE_COLUMNS]
    summary = compare_summary(results)
    settings = Bootstrap.of(config)
    order = list(dict.fromkeys(results["algorithm"]))
    leakage = leakage_summary(
        pd.concat([runs[name].leakage for name in protocols], ignore_index=True)
    )
    return Comparison(
        config=config,
        directory=directory,
        protocols=protocols,
        runs=runs,
        results=results,
        summary=summary,
        kendall=kendall_table(summary, protocols, metric=rank_metric),
        leakage=leakage,
        log=log,
        loocv_repeats=loocv_repeats,
        unit_store=unit_store,
        significance=compare_algorithms_per_protocol(results, settings, order),
        protocol_effect=compare_protocols(results, settings, order),
        timings=timings,
        rank_metric=rank_metric,
    )


def write_comparison(comparison: Comparison) -> None:
    """Write the comparison's tables and the printed text (see the module docstring)."""
    directory = comparison.directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
        kw: dict[str, Any] = {"index": False, "float_format": "%.10g"}
        comparison.results.to_csv(directory / "compare.csv", **kw)
        comparison.summary.to_csv(directory / "compare_summary.csv", **kw)
        table2(comparison.summary).to_csv(directory / "table2.csv", **kw)
        comparison.kendall.to_csv(directory / "kendall.csv", **kw)
        rank_shift(comparison.summary, comparison.protocols,
                   metric=comparison.rank_metric).to_csv(directory / "rank_shift.csv", **kw)
        _write_scatter(comparison)
        comparison.leakage.to_csv(directory / "leakage.csv", **kw)
        comparison.leakage_per_split.to_csv(directory / "leakage_per_split.csv", **kw)
        comparison.significance.to_csv(directory / "significance.csv", **kw)
        comparison.protocol_effect.to_csv(directory / "significance_protocols.csv", **kw)
        if not comparison.overlap.empty:
            comparison.overlap.to_csv(directory / "overlap_protocols.csv", **kw)
        recorder = table_console(record=True, width=PRINT_WIDTH, file=io.StringIO())
        print_comparison(comparison, recorder)
        (directory / "compare.txt").write_text(recorder.export_text())
        _write_record(comparison)
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot write the comparison ({exc}).") from exc


def _write_scatter(comparison: Comparison) -> None:
    """``kendall_scatter.png`` (002 Fig. 2) when at least two protocols were compared."""
    from sweval.evaluators.report.compare_figures import protocol_scatter
    from sweval.evaluators.report.figures import figure_png

    if len(comparison.protocols) < 2:
        return
    k = shown_k(comparison.ks)
    figure = protocol_scatter(comparison.summary, comparison.kendall, comparison.protocols, k,
                              metric=comparison.rank_metric)
    (comparison.directory / "kendall_scatter.png").write_bytes(figure_png(figure))


def _write_record(comparison: Comparison) -> None:
    from sweval.evaluators.run.plan import algorithm_specs

    log = comparison.log
    record = {
        "config": comparison.config.model_dump(),
        "protocols": {name: run.params for name, run in comparison.runs.items()},
        "loocv_repeats": comparison.loocv_repeats,
        "split_ratio": comparison.split_ratio,
        "split_seed": comparison.split_seed,
        "rank_metric": comparison.rank_metric,
        "data": {
            "source": log.source, "fingerprint": log.fingerprint(), "n_interactions": len(log),
            "n_users": log.n_users, "n_items": log.n_items, "t_min": log.t_min,
            "t_max": log.t_max,
        },
        "resolved_params": {
            spec.label: spec.canonical for spec in algorithm_specs(comparison.config)
        },
        "devices": {name: device for run in comparison.runs.values()
                    for name, device in run.devices.items()},
        "devices_per_protocol": {name: run.devices for name, run in comparison.runs.items()},
        "seconds": comparison.timings,
        "mlflow_run_id": comparison.mlflow_run_id,
        "unit_store": str(comparison.unit_store.resolve()),
    }
    (comparison.directory / "compare.json").write_text(
        json.dumps(record, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    )


# ---------------------------------------------------------------------- the command
def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def compare_command(
    build_config: Callable[[typer.Context, dict[str, Any]], EvalConfig],
    setup_logging: Callable[[bool], None],
) -> Callable[..., None]:
    """The ``sweval compare`` command, for :mod:`flows.cli.app` to register with every option of
    ``sweval run``: the CLI passes its own config builder and logging set-up, so this module
    does not import the CLI."""

    def compare(
        ctx: typer.Context,
        protocols: Annotated[str, typer.Option(help=PROTOCOLS_HELP)] = DEFAULT_PROTOCOLS,
        loocv_repeats: Annotated[int, typer.Option(help="LOOCV repetitions (seeds 0..n-1).")] = 10,
        split_ratio: Annotated[float, typer.Option(help="random-split and temporal-user: the share of each user's transactions held out, in (0, 1).")] = 0.2,
        split_seed: Annotated[int, typer.Option(help="random-split: the seed of the draw.")] = 0,
        rank_metric: Annotated[str, typer.Option(help="The metric of the rankings, Kendall's τ and the rank shifts: recall, hit_rate or ndcg (papers/002 ranks by NDCG@10).")] = "recall",
        **options: Any,
    ) -> None:
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
        comparison = run_compare(cfg, _split(protocols), output=output,
                                 loocv_repeats=loocv_repeats, console=table_console(stderr=True),
                                 split_ratio=split_ratio, split_seed=split_seed,
                                 rank_metric=rank_metric)
        print_comparison(comparison)
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
    "Prefect; --task-runner and --workers are ignored). Rerunning the same command resumes.",
])
