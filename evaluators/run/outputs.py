"""A run's outputs: the tables measured from its collected units, and the files they go to.

::

    tables(plan, collected, measurer)
                    per (fold, algorithm): the unit's result (evaluators.run.driver) -> results
                    rows (every stratum), units.csv records; skipped folds keep empty rows;
                    summary.csv: means with bootstrap intervals; significance.csv (and
                    significance_strata.csv with strata): paired tests; tuning, overlap,
                    per-user values
    write_outputs(plan, outputs)
                    results.csv, summary.csv, folds.csv, units.csv, config.json,
                    significance*.csv, overlap.csv (evaluators.stats.overlap),
                    per_user.parquet with --per-user; published as one set

The metrics are ``--metrics`` (:mod:`evaluators.metrics.measures`); recency and the exposure
metrics read the item facts of each split's training data, computed once per split. Each unit's
rows are built in :mod:`evaluators.run.rows`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.config.seeds import seed_pairs
from sweval.evaluators.experiments.retraining import RetrainingTables, retraining_tables
from sweval.evaluators.metrics.reachable import in_catalogue, unreachable_share
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.run.per_user import FILE as PER_USER_FILE
from sweval.evaluators.run.per_user import PerUser
from sweval.evaluators.run.results import ResultRow, largest_strata, results_frame, summarise
from sweval.evaluators.run.rows import Rows, algorithm_rows
from sweval.evaluators.run.work import Collected, Measurer
from sweval.evaluators.stats.overlap import Lists, list_overlap
from sweval.evaluators.stats.significance import (
    Bootstrap,
    Comparisons,
    compare_algorithms,
    compare_strata,
    override_intervals,
    with_intervals,
)
from sweval.evaluators.stats.tuning import optimism, tune
from sweval.evaluators.stats.tuning_candidates import ordered_labels
from sweval.evaluators.stats.users import UserValues, two_level_summary
from sweval.evaluators.units.failures import UnitFailure
from sweval.evaluators.units.memo import Memo

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from sweval.evaluators.run.plan import Plan

OVERLAP_FILE = "overlap.csv"


@dataclass(frozen=True)
class Outputs:
    """What a finished run produced (and wrote, unless it was asked not to)."""

    directory: Path
    #: the directory of the unit store the run used (config.json records it for cache prune)
    unit_store: Path
    results: pd.DataFrame
    summary: pd.DataFrame
    folds: pd.DataFrame
    units: pd.DataFrame
    devices: dict[str, str]
    n_reused: int = 0
    n_computed: int = 0
    n_code_changed: int = 0  # of the computed units, those stored as computed by other code
    #: units planned as reused but computed while the tables were collected: pruned from the
    #: store beside the run, or found damaged as they were read (counted in ``n_computed``)
    n_recomputed: int = 0
    tuning: pd.DataFrame | None = None
    optimism: pd.DataFrame | None = None
    #: units whose algorithm raised: left out of every table
    failed: tuple[UnitFailure, ...] = ()
    significance: pd.DataFrame | None = None
    significance_strata: pd.DataFrame | None = None
    per_user: PerUser | None = None
    overlap: pd.DataFrame | None = None
    #: staleness and cadence tables (``--horizon``, ``--cadence``)
    retraining: RetrainingTables | None = None


def tables(plan: Plan, collected: Collected, measurer: Measurer, *,
           directory: Path, unit_store: Path) -> Outputs:
    """The run's tables from its collected units (see the module docstring); ``directory``
    and ``unit_store`` are recorded (where the tables go, the store the units are in)."""
    rows: list[ResultRow] = []
    unit_records: list[dict[str, Any]] = []
    devices: dict[str, str] = {}
    context = Rows(plan, collected.result, measurer,
                   PerUser() if plan.config.per_user else None, lists={},
                   failed=frozenset(failure.key for failure in collected.failed),
                   users=UserValues() if needs_users(plan.config) else None)
    for fold in plan.folds:
        for spec in plan.specs:
            fold_rows, record = algorithm_rows(context, fold.index, spec.label)
            rows += fold_rows
            if record is not None:
                record["reused"] = record["unit_key"] not in collected.computed
                devices[spec.label] = record["device"]
                unit_records.append(record)
    labels = ordered_labels(plan.config, plan.searches)
    results = results_frame(rows, labels)
    tuning = optimism_table = None
    if plan.config.tune:
        tuned, tuning = tune(results, plan.config, plan.searches)
        results = results_frame([*rows, *tuned.to_dict("records")], labels)
        optimism_table = optimism(results, plan.config, plan.searches)
        chosen = tuning[tuning["chosen"]]
        sources = {(int(row.fold), row.stratum, row.candidate): row.algorithm
                   for row in chosen.itertuples()}
        for collector in (context.per_user, context.users):
            if collector is not None:
                collector.add_relabelled(sources)
    settings = Bootstrap.of(plan.config)
    comparisons = Comparisons.of(plan.config)
    summary = with_intervals(summarise(results), results, settings)
    if plan.config.summary_bootstrap == "two-level" and context.users:
        summary = override_intervals(summary, two_level_summary(context.users, settings))
    memo = Memo(unit_store)  # the tests, as a rerun of the same units finds them
    users = context.users.fingerprint() if context.users else None
    strata = _compared_strata(results) if plan.strata is not None else None
    return Outputs(
        directory=directory,
        unit_store=unit_store,
        results=results,
        summary=summary,
        folds=pd.DataFrame([fold_summary(plan, fold.index) for fold in plan.folds]),
        units=pd.DataFrame(unit_records),
        devices=devices,
        n_reused=collected.n_reused,
        n_computed=collected.n_computed,
        n_code_changed=collected.n_code_changed,
        n_recomputed=collected.n_recomputed,
        tuning=tuning,
        optimism=optimism_table,
        failed=collected.failed,
        significance=memo.table(
            "significance", (results, settings, labels, comparisons, users),
            lambda: compare_algorithms(results, settings, labels, comparisons=comparisons,
                                       users=context.users)),
        significance_strata=(
            memo.table("significance_strata", (strata, settings, labels, comparisons.correction),
                       lambda: compare_strata(strata, settings, labels,
                                              correction=comparisons.correction))
            if strata is not None else None
        ),
        per_user=context.per_user,
        overlap=run_overlap(plan, context.lists or {}),
        retraining=retraining_tables(plan, collected.result, measurer),
    )


def fold_summary(plan: Plan, index: int) -> dict[str, Any]:
    """A fold's row of ``folds.csv``: its bounds, sizes and skip reason, and the window's
    ceiling ``unreachable_share``: the share of its eligible users' relevant interactions on
    items without a training interaction (:mod:`evaluators.metrics.reachable`; empty without
    an eligible user)."""
    fold = plan.folds[index]
    split = plan.splits[index]
    catalogue = in_catalogue(plan.log, fold.train_lo, fold.train_hi)
    return fold.summary() | {"unreachable_share": unreachable_share(split.relevant, catalogue)}


def needs_users(config: Any) -> bool:
    """Whether the statistics need the units' per-user values."""
    return config.test_unit == "users" or config.summary_bootstrap == "two-level"


def _compared_strata(results: pd.DataFrame) -> pd.DataFrame:
    """The rows ``significance_strata.csv`` compares: every stratum's, or with more than
    :data:`~evaluators.run.results.MAX_STRATA_SHOWN` strata, those of the largest (the pairs of
    all would grow with the square of their number), said in a warning."""
    kept = largest_strata(results)
    if kept is None:
        return results
    n_strata = results.loc[results["stratum"] != "all", "stratum"].nunique()
    _log.warning("%d strata: significance_strata.csv compares the %d with the most eligible "
                 "users pair by pair (every stratum's results are in results.csv and "
                 "summary.csv)", n_strata, len(kept))
    return results[results["stratum"].isin(["all", *kept])]


def run_overlap(plan: Plan, lists: dict[tuple[int, str], Lists]) -> pd.DataFrame:
    """``overlap.csv``: J@k between the run's algorithms, seeds and consecutive folds."""
    labels = [spec.label for spec in plan.specs]
    folds = [fold.index for fold in plan.folds if not fold.skipped]
    return list_overlap(lists, folds, labels, plan.config.k, seed_pairs(labels))


#: The files an SW-EVAL before manifests wrote into a run directory that a run may not write
#: again (the tables only some runs write, the report): deleted by the first run with a
#: manifest when it does not write them itself.
LEGACY_FILES = frozenset({
    "tuning.csv", "optimism.csv", "significance.csv", "significance_strata.csv",
    PER_USER_FILE, OVERLAP_FILE, "report.html",
})


def write_outputs(plan: Plan, outputs: Outputs) -> None:
    """Publish ``results.csv``, ``summary.csv``, ``folds.csv``, ``units.csv``, ``config.json``,
    the significance tables and the optional ones this run makes, as one set
    (:func:`evaluators.run.output_dir.publish`): an earlier run's files that this one does not
    write (``tuning.csv`` of a run with ``--tune``, its report) go, so the directory's tables,
    its report and MLflow's artifacts are this run's alone. Units are never removed.
    """
    directory = outputs.directory
    tables = {
        "results.csv": outputs.results.to_csv(index=False, float_format="%.10g"),
        "summary.csv": outputs.summary.to_csv(index=False, float_format="%.10g"),
        "folds.csv": outputs.folds.to_csv(index=False, float_format="%.10g"),
        "units.csv": outputs.units.to_csv(index=False, float_format="%.4f"),
        "config.json": run_record(plan, outputs),
    }
    if outputs.tuning is not None and outputs.optimism is not None:
        tables["tuning.csv"] = outputs.tuning.to_csv(index=False, float_format="%.10g")
        tables["optimism.csv"] = outputs.optimism.to_csv(index=False, float_format="%.10g")
    for name, table in (("significance.csv", outputs.significance),
                        ("significance_strata.csv", outputs.significance_strata)):
        if table is not None:
            tables[name] = table.to_csv(index=False, float_format="%.10g")
    if outputs.overlap is not None and not outputs.overlap.empty:
        tables[OVERLAP_FILE] = outputs.overlap.to_csv(index=False, float_format="%.10g")
    if outputs.retraining is not None:
        tables |= outputs.retraining.files()
    files = {name: text.encode("utf-8") for name, text in tables.items()}
    if outputs.per_user is not None:
        files[PER_USER_FILE] = outputs.per_user.parquet_bytes()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        publish(directory, files, run=plan.key, command="run", legacy=LEGACY_FILES)
    except OSError as exc:
        raise SwevalError(
            f"{directory}: cannot write the results ({exc}); finished units are kept, rerun the "
            "same command to write them."
        ) from exc


def run_record(plan: Plan, outputs: Outputs) -> str:
    """``config.json``: the configuration, resolved hyper-parameters, devices, data facts and
    the failed units (``failed_units``: fold, label, key, stratum, error and traceback of each;
    the report lists them)."""
    record = {
        "config": plan.config.model_dump(),
        "resolved_params": {spec.label: spec.canonical for spec in plan.specs},
        "tuning_candidates": {search.label: search.candidates for search in plan.searches},
        "devices": outputs.devices,
        "data": {
            "source": plan.log.source,
            "fingerprint": plan.log.fingerprint(),
            "n_interactions": len(plan.log),
            "n_users": plan.log.n_users,
            "n_items": plan.log.n_items,
            "t_min": plan.log.t_min,
            "t_max": plan.log.t_max,
            "n_duplicates_removed": plan.log.n_duplicates,
            "n_invalid_dropped": plan.log.n_dropped_invalid,
        },
        "run_key": plan.key,
        "unit_store": str(outputs.unit_store.resolve()),
        "folds_used": int(sum(not f.skipped for f in plan.folds)),
        "folds_skipped": int(sum(f.skipped for f in plan.folds)),
        "failed_units": [asdict(failure) for failure in outputs.failed],
    }
    return json.dumps(record, indent=2, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
