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

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.compare_plan import CompareOptions, CompareRecipe, plan_compare
from sweval.evaluators.experiments.compare_tables import (
    COMPARE_COLUMNS,
    compare_summary,
    kendall_table,
    leakage_summary,
)
from sweval.evaluators.experiments.comparison import Comparison, write_comparison
from sweval.evaluators.experiments.protocol_runs import ProtocolRun, protocol_run, protocol_users
from sweval.evaluators.protocols.holdout import Protocol as EvalProtocol
from sweval.evaluators.run.driver import Executor, Hook, compute, fail_on
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.run.outputs import needs_users, tables, write_outputs
from sweval.evaluators.run.plan import Plan
from sweval.evaluators.run.sources import load_data, unit_store
from sweval.evaluators.run.work import remember
from sweval.evaluators.stats.protocol_tuning import tune_comparison
from sweval.evaluators.stats.significance import (
    Bootstrap,
    Comparisons,
    compare_algorithms,
    compare_algorithms_per_protocol,
    compare_protocols,
)
from sweval.evaluators.stats.users import UserValues
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.units.memo import Memo
from sweval.evaluators.units.store import UnitStore


class CompareTracking(Protocol):
    """What a comparison tells its tracker (MLflow's: :class:`flows.tracking.ComparisonTracker`)."""

    parent_run_id: str | None

    def log_protocol(self, protocol: EvalProtocol, run: ProtocolRun, key: str,
                     files: list[Path]) -> None: ...

    def finish(self, comparison: Comparison) -> str | None: ...

    def fail(self, status: str) -> None: ...



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
    recipe = CompareRecipe(config, options, plan.log.fingerprint(), log=log)
    work = planned.work()
    remember(recipe, work)
    tracker = tracking(config, directory, plan.log) if tracking is not None else None
    try:
        collected = fail_on(compute(work, store, hooks=hooks,
                                    executor=executor(recipe) if executor is not None else None))
        runs: dict[str, ProtocolRun] = {}
        known: dict[str, pd.DataFrame] = {}  # sw-eval's significance.csv, as sweval run's
        for name, protocol in planned.protocols.items():
            runs[name] = _with_strata(protocol_run(planned.main[name], collected),
                                      [protocol_run(sub, collected)
                                       for sub in planned.strata.get(name, [])])
            files = _write_protocol(directory, name, runs[name], plan, collected, store, known)
            if tracker is not None:
                tracker.log_protocol(protocol, runs[name], planned.keys[name], files)
        users = ({name: protocol_users([planned.main[name], *planned.strata.get(name, [])],
                                       collected) for name in planned.protocols}
                 if needs_users(config) else {})
        if config.tune or plan.strata is not None:  # compare's sw-eval rows differ from run's
            known.clear()
        comparison = _assemble(config, options, directory, runs, plan, store, users, known)
        comparison.timings = {name: _seconds(run) for name, run in runs.items()}
        from sweval.evaluators.experiments.protocol_overlap import protocol_overlap

        units = {name: sorted(map(tuple, run.units[["fold", "algorithm", "unit_key"]]
                                  .astype(str).to_numpy().tolist()))
                 for name, run in runs.items() if not run.units.empty}
        comparison.overlap = Memo(store.directory).table(  # the lists are their units' keys
            "protocol-overlap", (plan.log.fingerprint(), units, list(config.k)),
            lambda: protocol_overlap(plan.log, list(planned.protocols.values()), runs, store,
                                     config.k))
        if tracker is not None:
            comparison.mlflow_run_id = tracker.parent_run_id
        write_comparison(comparison, printed(comparison) if printed is not None else "")
        if config.report:
            from sweval.evaluators.run.evaluate import write_report_quietly

            write_report_quietly(directory, store=store.directory)
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
                    store: UnitStore, known: dict[str, pd.DataFrame]) -> list[Path]:
    """A protocol's own files, published as one set; for ``sw-eval`` exactly those of
    ``sweval run`` (its significance table is kept in ``known``)."""
    from sweval.evaluators.run.work import Measurer

    try:
        if name == "sw-eval":
            measurer = Measurer(list(plan.config.k), list(plan.config.metrics), items=plan.items)
            outputs = tables(plan, collected, measurer,
                             directory=Path(plan.config.output), unit_store=store.directory)
            write_outputs(plan, outputs)
            if outputs.significance is not None:
                known[name] = outputs.significance
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
              runs: dict[str, ProtocolRun], plan: Plan, store: UnitStore,
              users: dict[str, UserValues], known: dict[str, pd.DataFrame]) -> Comparison:
    tuning: dict[str, pd.DataFrame] = {}
    if config.tune and "sw-eval" in runs:
        others = {name: run.results for name, run in runs.items() if name != "sw-eval"}
        results, tuning = tune_comparison(runs["sw-eval"].results, others, config, plan.searches)
        runs["sw-eval"] = replace(runs["sw-eval"], results=results)
        chosen = tuning["tuning.csv"]
        chosen = chosen[chosen["chosen"]]
        if "sw-eval" in users:
            users["sw-eval"].add_relabelled({
                (int(row.fold), row.stratum, row.candidate): row.algorithm
                for row in chosen.itertuples()})
    results = pd.concat([runs[name].results for name in options.protocols], ignore_index=True)
    results = results[COMPARE_COLUMNS]
    summary = compare_summary(results)
    settings = Bootstrap.of(config)
    order = list(dict.fromkeys(results["algorithm"]))
    comparisons = Comparisons.of(config)
    memo = Memo(store.directory)  # the tests, as a rerun of the same units finds them
    for protocol, part in results.groupby("protocol", sort=False):
        if str(protocol) not in known:
            rows, values = part.drop(columns="protocol"), users.get(str(protocol))
            known[str(protocol)] = memo.table(
                "significance", (rows, settings, order, comparisons,
                                 values.fingerprint() if values else None),
                lambda: compare_algorithms(rows, settings, order, comparisons=comparisons,
                                           users=values))
    return Comparison(
        config=config,
        options=options,
        directory=directory,
        runs=runs,
        results=results,
        summary=summary,
        kendall=memo.table(  # scipy.stats is imported to compute it only
            "kendall", (summary, list(options.protocols), options.rank_metric),
            lambda: kendall_table(summary, list(options.protocols), metric=options.rank_metric)),
        leakage=leakage_summary(pd.concat([runs[name].leakage for name in options.protocols],
                                          ignore_index=True)),
        log=plan.log,
        unit_store=store.directory,
        significance=compare_algorithms_per_protocol(
            results, settings, order, comparisons=comparisons, users=users, known=known),
        protocol_effect=memo.table("protocol-effect", (results, settings, order),
                                   lambda: compare_protocols(results, settings, order)),
        tuning_tables=tuning,
    )
