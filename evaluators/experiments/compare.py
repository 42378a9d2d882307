"""``compare``: one log, several evaluation protocols, the paper's Table 2, the rankings and the
leakage (the library part of ``sweval compare`` and :func:`sweval.compare`).

::

    recipe = CompareRecipe(config, options)   every protocol planned on the log (each policy's
                                              sub-log too, with --stratify-by): ProtocolPlans
    runs = run_protocols(plans, store,        one driver pass: every protocol's splits side by
                         executor, hooks)     side (threads, Dask), resumable
    Comparison(...)                           per protocol its tables; Kendall's τ, rank shifts,
                                              leakage, paired tests, list overlap with SW-EVAL
    write_comparison(comparison)              published as one set (evaluators.run.output_dir)

Output directory: ``compare.csv`` (the long table of every protocol), ``compare_summary.csv``,
``table2.csv``, ``kendall.csv``, ``rank_shift.csv``, ``kendall_scatter.png``,
``significance.csv``, ``significance_protocols.csv``, ``leakage.csv``,
``leakage_per_split.csv``, ``overlap_protocols.csv``, ``compare.txt`` (the printed tables, given
by the caller), ``compare.json``; ``sw-eval/`` exactly what ``sweval run`` writes;
``<protocol>/`` its results, splits and units.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.compare_tables import (
    COMPARE_COLUMNS,
    compare_summary,
    kendall_table,
    leakage_summary,
    rank_shift,
    table2,
)
from sweval.evaluators.experiments.protocol_runs import (
    ProtocolPlan,
    ProtocolRun,
    plan_protocol,
    protocol_run,
    protocol_work,
)
from sweval.evaluators.metrics.names import shown_k
from sweval.evaluators.protocols.holdout import (
    LOOCV,
    GivenSplits,
    LeaveLastBasket,
    LeaveLastOneOut,
    RandomSplit,
    SlidingWindow,
    TemporalGlobal,
    TemporalUser,
    check_loocv_repeats,
    check_split_seed,
    for_stratum,
    parse_protocols,
)
from sweval.evaluators.protocols.holdout import Protocol as EvalProtocol
from sweval.evaluators.run.driver import Executor, Hook, Work, compute, fail_on, remember
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.run.outputs import tables, write_outputs
from sweval.evaluators.run.plan import (
    Plan,
    load_data,
    make_plan,
    run_key,
    unit_store,
    window_spec,
)
from sweval.evaluators.stats.significance import (
    Bootstrap,
    compare_algorithms_per_protocol,
    compare_protocols,
)
from sweval.evaluators.stats.tuning import tune_comparison
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.units.store import UnitStore

_log = logging.getLogger(__name__)

#: Metrics a ranking can use (one value per k).
RANK_METRICS = ("recall", "hit_rate", "ndcg")
#: The files only some comparisons write (with --tune, with two protocols or more, with users
#: paired between protocols); a comparison that does not write them removes an earlier one's.
OPTIONAL_FILES = ("tuning.csv", "tuning_protocols.csv", "optimism.csv", "overlap_protocols.csv",
                  "kendall_scatter.png", "compare.txt", "report.html")


@dataclass(frozen=True)
class CompareOptions:
    """What ``compare`` adds to ``sweval run``'s options.

    Attributes:
        protocols: the protocols, in the order given (:data:`evaluators.protocols.holdout.PROTOCOLS`).
        loocv_repeats: LOOCV repetitions (seeds 0..n−1).
        split_ratio, split_seed: ``random-split`` and ``temporal-user``'s per-user test share,
            ``random-split``'s seed.
        rank_metric: the metric of the rankings, Kendall's τ and the rank shifts.
    """

    protocols: tuple[str, ...] = ("sw-eval", "loocv", "leave-last-one-out")
    loocv_repeats: int = 10
    split_ratio: float = 0.2
    split_seed: int = 0
    rank_metric: str = "recall"

    def check(self) -> CompareOptions:
        """The options, validated (before anything is fitted).

        Raises:
            SwevalError: an unknown or repeated protocol, or an option out of its range.
        """
        protocols = tuple(parse_protocols(list(self.protocols)))
        check_loocv_repeats(self.loocv_repeats)
        check_split_seed(self.split_seed)
        if self.rank_metric not in RANK_METRICS:
            raise SwevalError(
                f"--rank-metric {self.rank_metric!r}: one of {', '.join(RANK_METRICS)}.")
        return replace(self, protocols=protocols)


@dataclass
class Comparison:
    """Everything a comparison produced (see the module docstring for the files).

    Attributes:
        config: the run's configuration (its ``output`` is the ``sw-eval`` sub-directory).
        options: the comparison's own options.
        directory: the comparison's output directory.
        runs: per protocol, its :class:`~evaluators.experiments.protocol_runs.ProtocolRun`.
        results: the long table of every protocol (``compare.csv``).
        summary: per protocol, the macro means with Δ% (``compare_summary.csv``).
        kendall: τ per protocol pair and k, on the rank metric (``kendall.csv``).
        leakage: future items pooled over splits (``leakage.csv``).
        significance: per protocol, the algorithms' paired tests (``significance.csv``).
        protocol_effect: the leads compared between protocols (``significance_protocols.csv``).
        log: the log compared on.
        timings: per protocol, the seconds its units took to compute (built, fitted, ranked,
            measured; 0 for units reused from the store).
        mlflow_run_id: the comparison's MLflow parent run, when tracked.
        overlap: J@k of each protocol's lists against SW-EVAL's (``overlap_protocols.csv``).
        unit_store: the directory of the unit store the comparison used.
    """

    config: EvalConfig
    options: CompareOptions
    directory: Path
    runs: dict[str, ProtocolRun]
    results: pd.DataFrame
    summary: pd.DataFrame
    kendall: pd.DataFrame
    leakage: pd.DataFrame
    log: InteractionLog
    unit_store: Path
    significance: pd.DataFrame = field(default_factory=pd.DataFrame)
    protocol_effect: pd.DataFrame = field(default_factory=pd.DataFrame)
    timings: dict[str, float] = field(default_factory=dict)
    mlflow_run_id: str | None = None
    overlap: pd.DataFrame = field(default_factory=pd.DataFrame)
    tuning_tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def protocols(self) -> list[str]:
        return list(self.options.protocols)

    @property
    def ks(self) -> list[int]:
        return list(self.config.k)

    @property
    def rank_metric(self) -> str:
        return self.options.rank_metric

    @property
    def loocv_repeats(self) -> int:
        return self.options.loocv_repeats

    @property
    def split_ratio(self) -> float:
        return self.options.split_ratio

    @property
    def split_seed(self) -> int:
        return self.options.split_seed

    @property
    def leakage_per_split(self) -> pd.DataFrame:
        return pd.concat([run.leakage for run in self.runs.values()], ignore_index=True)


class CompareTracking(Protocol):
    """What a comparison tells its tracker (MLflow's: :class:`flows.tracking.ComparisonTracker`)."""

    parent_run_id: str | None

    def log_protocol(self, protocol: EvalProtocol, run: ProtocolRun, key: str,
                     files: list[Path]) -> None: ...

    def finish(self, comparison: Comparison) -> str | None: ...

    def fail(self, status: str) -> None: ...


# ---------------------------------------------------------------------- the plan
@dataclass
class ComparePlan:
    """Every protocol's plan: the run's plan (``sw-eval``'s folds, the algorithms), and per
    protocol its main plan and, with ``--stratify-by``, one per policy."""

    plan: Plan
    protocols: dict[str, EvalProtocol]
    keys: dict[str, str]
    main: dict[str, ProtocolPlan]
    strata: dict[str, list[ProtocolPlan]]

    @property
    def plans(self) -> list[ProtocolPlan]:
        return [plan for name in self.main
                for plan in (self.main[name], *self.strata.get(name, []))]

    def work(self) -> Work:
        return protocol_work(self.plans, list(self.plan.config.k))


def build_protocol(name: str, config: EvalConfig, options: CompareOptions,
                   plan: Plan) -> EvalProtocol:
    """The protocol ``name`` with the options of ``config`` (u_min, relevance, start, ...)."""
    if name == "sw-eval":
        return SlidingWindow(plan.folds, config.relevance, splits=plan.splits)
    if name == "loocv":
        return LOOCV(repeats=options.loocv_repeats, u_min=config.u_min)
    if name == "leave-last-one-out":
        return LeaveLastOneOut(u_min=config.u_min)
    if name == "temporal-global":
        spec = window_spec(config)
        return TemporalGlobal(start=spec.start, train_window_s=spec.train_window_s,
                              u_min=config.u_min, relevance=config.relevance)
    if name == "random-split":
        return RandomSplit(share=options.split_ratio, seed=options.split_seed, u_min=config.u_min)
    if name == "temporal-user":
        return TemporalUser(share=options.split_ratio, u_min=config.u_min)
    if name == "leave-last-basket":
        return LeaveLastBasket(u_min=config.u_min)
    raise SwevalError(f"unknown protocol {name!r}")


def protocol_key(protocol: EvalProtocol, config: EvalConfig, fingerprint: str) -> str:
    """A protocol's ``config_hash``: its run key (:func:`~evaluators.run.plan.run_key`) with
    the protocol's parameters."""
    from sweval.evaluators.config.text import parse_variant

    names = [parse_variant(entry)[0] for entry in config.algorithms]
    return run_key(config, fingerprint, names, kind=protocol.name,
                   extra={"params": protocol.describe()})


def plan_compare(config: EvalConfig, options: CompareOptions,
                 log: InteractionLog | None = None) -> ComparePlan:
    """Plan every protocol of the comparison (see :class:`ComparePlan`).

    Raises:
        SwevalError: bad options or data (a basket protocol without baskets, ...).
    """
    plan = make_plan(config, log)
    log = plan.log
    if "leave-last-basket" in options.protocols and log.basket is None:
        raise SwevalError(
            f"{log.source}: --protocols leave-last-basket needs the basket or session of "
            "each transaction; name its column with --basket-col."
        )
    names = [spec.label for spec in plan.specs]  # --tune's candidates are variants too
    protocols = {name: build_protocol(name, config, options, plan) for name in options.protocols}
    keys = {name: plan.key if name == "sw-eval" else
            protocol_key(protocol, config, log.fingerprint())
            for name, protocol in protocols.items()}
    main, strata = {}, {}
    for name, protocol in protocols.items():
        main[name] = plan_protocol(log, protocol, names, ks=config.k, params=config.params,
                                   config_hash=keys[name])
        if plan.strata is not None:
            strata[name] = _stratum_plans(plan, protocol, names, keys[name])
    return ComparePlan(plan=plan, protocols=protocols, keys=keys, main=main, strata=strata)


def _stratum_plans(plan: Plan, protocol: EvalProtocol, names: list[str],
                   key: str) -> list[ProtocolPlan]:
    """The protocol on each policy's sub-log (SPEC §6 mode ``subset``); ``sw-eval``'s strata
    are the run's, so their units are those of ``sweval run --stratify-by``. A stratum the
    protocol cannot cut (no data of that policy after the cut-off) is left out, with a
    warning."""
    assert plan.strata is not None
    config = plan.config
    plans = []
    for label in plan.strata.labels:
        if protocol.name == "sw-eval":
            stratum: EvalProtocol = GivenSplits("sw-eval", plan.stratum_splits[label])
        else:
            stratum = for_stratum(protocol, plan.log)
        try:
            plans.append(plan_protocol(plan.strata.logs[label], stratum, names, ks=config.k,
                                       params=config.params, config_hash=key, stratum=label))
        except SwevalError as exc:
            _log.warning("%s, stratum %s: not evaluated (%s)", protocol.name, label, exc)
    return plans


@dataclass(frozen=True)
class CompareRecipe:
    """A comparison's work, made again in another process (a Dask worker)."""

    config: EvalConfig
    options: CompareOptions
    fingerprint: str

    def cache_key(self) -> str:
        text = json.dumps([self.config.model_copy(update={"progress": False}).model_dump_json(),
                           repr(self.options), self.fingerprint])
        return hashlib.sha256(text.encode()).hexdigest()

    def store(self) -> UnitStore:
        return unit_store(self.config)

    def work(self) -> Work:
        planned = plan_compare(self.config, self.options)
        if planned.plan.log.fingerprint() != self.fingerprint:
            raise SwevalError(f"{self.config.data}: the data changed while the comparison ran; "
                              "rerun to start over.")
        return planned.work()


# ---------------------------------------------------------------------- the comparison
def run_compare(
    config: EvalConfig,
    options: CompareOptions,
    *,
    output: str | Path,
    log: InteractionLog | None = None,
    executor: Callable[[CompareRecipe], Executor] | None = None,
    hooks: Sequence[Hook] = (),
    tracking: Callable[[EvalConfig, Path, InteractionLog], CompareTracking] | None = None,
    printed: Callable[[Comparison], str] | None = None,
) -> Comparison:
    """Run every protocol, write the tables, and track them when a tracker is given.

    Args:
        config: the options of ``sweval run`` (its ``output`` is ignored: the SW-EVAL part goes
            to ``<output>/sw-eval``).
        options: the protocols and their options.
        output: the comparison's output directory.
        log: an already loaded log (else ``config.data`` is read).
        executor: makes the executor of the comparison's jobs from its recipe (default: one
            after the other, in this thread).
        hooks: told of the driver's progress.
        tracking: opens the comparison's tracker (MLflow's), or None.
        printed: the comparison as printed, written to ``compare.txt``.

    Raises:
        SwevalError: bad options, data or protocol problems, tracking failures, a unit that
            failed, or another run writing to ``output``
            (:func:`evaluators.units.locks.output_lock`).
    """
    options = options.check()
    directory = Path(output)
    with output_lock(directory, command="compare"):
        config = config.model_copy(update={"output": str(directory / "sw-eval")})
        store = unit_store(config)
        with store.in_use():  # prune keeps this comparison's units, from its start
            return _compare(config, options, directory, store, log=log, executor=executor,
                            hooks=hooks, tracking=tracking, printed=printed)


def _compare(config: EvalConfig, options: CompareOptions, directory: Path, store: UnitStore, *,
             log: InteractionLog | None, executor: Callable[[CompareRecipe], Executor] | None,
             hooks: Sequence[Hook], tracking: Any, printed: Any) -> Comparison:
    """:func:`run_compare`'s work, with the output directory locked."""
    planned = plan_compare(config, options, log if log is not None else load_data(config))
    plan = planned.plan
    recipe = CompareRecipe(config, options, plan.log.fingerprint())
    work = planned.work()
    remember(recipe, work)
    tracker = tracking(config, directory, plan.log) if tracking is not None else None
    try:
        collected = fail_on(compute(work, store, hooks=hooks,
                                    executor=executor(recipe) if executor is not None else None))
        runs: dict[str, ProtocolRun] = {}
        for name, protocol in planned.protocols.items():
            runs[name] = _with_strata(protocol_run(planned.main[name], collected),
                                      [protocol_run(sub, collected)
                                       for sub in planned.strata.get(name, [])])
            files = _write_protocol(directory, name, runs[name], plan, collected, store)
            if tracker is not None:
                tracker.log_protocol(protocol, runs[name], planned.keys[name], files)
        comparison = _assemble(config, options, directory, runs, plan, store)
        comparison.timings = {name: _seconds(run) for name, run in runs.items()}
        from sweval.evaluators.experiments.protocol_overlap import protocol_overlap

        comparison.overlap = protocol_overlap(plan.log, list(planned.protocols.values()), runs,
                                              store, config.k)
        if tracker is not None:
            comparison.mlflow_run_id = tracker.parent_run_id
        write_comparison(comparison, printed(comparison) if printed is not None else "")
        if config.report:
            from sweval.evaluators.run.evaluate import write_report_quietly

            write_report_quietly(directory)
        if tracker is not None:
            tracker.finish(comparison)
    except BaseException as exc:
        if tracker is not None:
            tracker.fail("KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
        raise
    return comparison


def _with_strata(run: ProtocolRun, strata: list[ProtocolRun]) -> ProtocolRun:
    """``run`` with the rows of every policy stratum (its leakage, splits and units are the
    main run's)."""
    if not strata:
        return run
    return replace(run, results=pd.concat([run.results, *(s.results for s in strata)],
                                          ignore_index=True))


def _seconds(run: ProtocolRun) -> float:
    """The seconds a protocol's units took (the stages each unit timed)."""
    columns = [column for column in run.units.columns if column.endswith("_s")]
    return float(run.units[columns].to_numpy().sum()) if columns else 0.0


def _write_protocol(directory: Path, name: str, run: ProtocolRun, plan: Plan, collected: Any,
                    store: UnitStore) -> list[Path]:
    """A protocol's own files, published as one set; for ``sw-eval`` exactly those of
    ``sweval run``."""
    from sweval.evaluators.run.driver import Measurer

    try:
        if name == "sw-eval":
            outputs = tables(plan, collected, Measurer(list(plan.config.k), list(plan.config.metrics)),
                             directory=Path(plan.config.output), unit_store=store.directory)
            write_outputs(plan, outputs)
            return [outputs.directory / file for file in
                    ("results.csv", "summary.csv", "folds.csv", "units.csv", "config.json")]
        target = directory / name
        target.mkdir(parents=True, exist_ok=True)
        files = {
            "results.csv": run.results.drop(columns="protocol").to_csv(index=False,
                                                                       float_format="%.10g"),
            "splits.csv": run.splits.to_csv(index=False),
            "units.csv": run.units.to_csv(index=False, float_format="%.4f"),
        }
        publish(target, {file: text.encode() for file, text in files.items()},
                run=name, command="compare")
    except OSError as exc:
        raise SwevalError(f"{directory / name}: cannot write the results ({exc}).") from exc
    return [target / file for file in files]


def _assemble(config: EvalConfig, options: CompareOptions, directory: Path,
              runs: dict[str, ProtocolRun], plan: Plan, store: UnitStore) -> Comparison:
    tuning: dict[str, pd.DataFrame] = {}
    if config.tune and "sw-eval" in runs:
        others = {name: run.results for name, run in runs.items() if name != "sw-eval"}
        results, tuning = tune_comparison(runs["sw-eval"].results, others, config, plan.searches)
        runs["sw-eval"] = replace(runs["sw-eval"], results=results)
    results = pd.concat([runs[name].results for name in options.protocols], ignore_index=True)
    results = results[COMPARE_COLUMNS]
    summary = compare_summary(results)
    settings = Bootstrap.of(config)
    order = list(dict.fromkeys(results["algorithm"]))
    return Comparison(
        config=config,
        options=options,
        directory=directory,
        runs=runs,
        results=results,
        summary=summary,
        kendall=kendall_table(summary, list(options.protocols), metric=options.rank_metric),
        leakage=leakage_summary(pd.concat([runs[name].leakage for name in options.protocols],
                                          ignore_index=True)),
        log=plan.log,
        unit_store=store.directory,
        significance=compare_algorithms_per_protocol(results, settings, order),
        protocol_effect=compare_protocols(results, settings, order),
        tuning_tables=tuning,
    )


def tables_of(comparison: Comparison) -> list[str]:
    """The tables and figure the comparison publishes besides ``compare.txt`` and
    ``compare.json`` (see :func:`write_comparison`)."""
    names = [*_frames(comparison)]
    return names + (["kendall_scatter.png"] if len(comparison.protocols) >= 2 else [])


def _frames(comparison: Comparison) -> dict[str, pd.DataFrame]:
    frames = {
        "compare.csv": comparison.results,
        "compare_summary.csv": comparison.summary,
        "table2.csv": table2(comparison.summary),
        "kendall.csv": comparison.kendall,
        "rank_shift.csv": rank_shift(comparison.summary, comparison.protocols,
                                     metric=comparison.rank_metric),
        "leakage.csv": comparison.leakage,
        "leakage_per_split.csv": comparison.leakage_per_split,
        "significance.csv": comparison.significance,
        "significance_protocols.csv": comparison.protocol_effect,
        **comparison.tuning_tables,
    }
    if not comparison.overlap.empty:
        frames["overlap_protocols.csv"] = comparison.overlap
    return frames


def write_comparison(comparison: Comparison, printed: str = "") -> None:
    """Publish the comparison's tables, figure, printed text and record as one set."""
    directory = comparison.directory
    files = {name: frame.to_csv(index=False, float_format="%.10g").encode()
             for name, frame in _frames(comparison).items()}
    scatter = _scatter(comparison)
    if scatter is not None:
        files["kendall_scatter.png"] = scatter
    if printed:
        files["compare.txt"] = printed.encode()
    files["compare.json"] = _record(comparison).encode()
    try:
        publish(directory, files, run=comparison.config.result_hash(), command="compare",
                legacy=OPTIONAL_FILES)
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot write the comparison ({exc}).") from exc


def _scatter(comparison: Comparison) -> bytes | None:
    """``kendall_scatter.png`` (002 Fig. 2) when at least two protocols were compared."""
    from sweval.evaluators.report.compare_figures import protocol_scatter
    from sweval.evaluators.report.figures import figure_png

    if len(comparison.protocols) < 2:
        return None
    k = shown_k(comparison.ks)
    figure = protocol_scatter(comparison.summary, comparison.kendall, comparison.protocols, k,
                              metric=comparison.rank_metric)
    return figure_png(figure)


def _record(comparison: Comparison) -> str:
    """``compare.json``: the configuration, the protocols' parameters, the data, devices,
    seconds, the MLflow run and the unit store."""
    from sweval.evaluators.run.plan import algorithm_specs

    log = comparison.log
    options = comparison.options
    record = {
        "config": comparison.config.model_dump(),
        "protocols": {name: run.params for name, run in comparison.runs.items()},
        "loocv_repeats": options.loocv_repeats,
        "split_ratio": options.split_ratio,
        "split_seed": options.split_seed,
        "rank_metric": options.rank_metric,
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
    return json.dumps(record, indent=2,
                      default=lambda v: v.item() if hasattr(v, "item") else str(v))
