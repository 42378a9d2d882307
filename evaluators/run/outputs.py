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
metrics read the item facts of each split's training data, computed once per split.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.config.seeds import seed_pairs
from sweval.evaluators.experiments.retraining import RetrainingTables, retraining_tables
from sweval.evaluators.metrics.measures import fold_level
from sweval.evaluators.metrics.reachable import in_catalogue, unreachable_share
from sweval.evaluators.protocols.folds import Fold
from sweval.evaluators.protocols.splits import cold_users
from sweval.evaluators.protocols.stratify import group_rows, groups_by_test_policy
from sweval.evaluators.protocols.user_strata import FIRST_TIME
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.run.per_user import FILE as PER_USER_FILE
from sweval.evaluators.run.per_user import PerUser
from sweval.evaluators.run.results import (
    ResultRow,
    largest_strata,
    results_frame,
    skipped_rows,
    summarise,
    unit_rows,
)
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
from sweval.evaluators.stats.tuning import optimism, ordered_labels, tune
from sweval.evaluators.stats.users import UserValues, two_level_summary
from sweval.evaluators.units.engine import UnitResult
from sweval.evaluators.units.failures import UnitFailure
from sweval.evaluators.units.unit import Unit

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


@dataclass
class Rows:
    """What building a run's rows shares: where each unit's result comes from, the measurer
    (its splits' item facts), and, with ``--per-user``, the collected per-user values and,
    for the overlap, the unstratified units' top-max(k) lists."""

    plan: Plan
    result_of: Callable[[Unit], UnitResult | None]
    measurer: Measurer
    per_user: PerUser | None = None
    #: ``{(fold, label): (users, top-max(k) lists)}`` of the unstratified units, for overlap
    lists: dict[tuple[int, str], Lists] | None = None
    failed: frozenset[str] = field(default_factory=frozenset)
    #: per fold, the strata groups of its evaluated users (the same for every algorithm)
    grouped: dict[int, dict[str, Any]] = field(default_factory=dict)

    def groups(self, fold: Fold, result: UnitResult) -> dict[str, Any]:
        """``{label: mask over result.users}``: the users' policy groups (mode ``test``) or
        derived strata (mode ``users``) on ``fold``, computed once per fold."""
        strata = self.plan.strata
        assert strata is not None
        if fold.index not in self.grouped:
            if strata.users is not None:
                found = strata.users.groups(self.plan.splits[fold.index], result.users)
            else:
                found = groups_by_test_policy(self.plan.log, fold, result.users, strata.labels)
            self.grouped[fold.index] = found
        return self.grouped[fold.index]
    #: the per-user values the users-level statistics need (--test-unit users,
    #: --summary-bootstrap two-level)
    users: UserValues | None = None

    def add(self, result: UnitResult, log: Any, *, stratum: str,
            mask: Any = None) -> None:
        """Collect a unit's per-user values (for per_user.parquet, for the statistics)."""
        if self.per_user is not None:
            self.per_user.add(result, log, stratum=stratum, mask=mask)
        if self.users is not None:
            self.users.add(result, stratum=stratum, mask=mask)


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
        significance=compare_algorithms(results, settings, labels, comparisons=comparisons,
                                        users=context.users),
        significance_strata=(
            compare_strata(_compared_strata(results), settings, labels,
                           correction=comparisons.correction)
            if plan.strata is not None else None
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


def algorithm_rows(
    context: Rows, fold_index: int, name: str
) -> tuple[list[ResultRow], dict[str, Any] | None]:
    """The results rows of one (fold, algorithm), every stratum, and its ``units.csv`` record
    (None for a skipped fold); none for a failed unit, nor for the strata of a
    (fold, algorithm) with one."""
    plan = context.plan
    config = plan.config
    fold = plan.folds[fold_index]
    if fold.skipped:
        labels = ["all", *(plan.strata.reported if plan.strata is not None else [])]
        return [
            row for label in labels
            for row in skipped_rows(fold, name, config.k, stratum=label, config_hash=plan.key,
                                    metrics=config.metrics)
        ], None
    split = plan.splits[fold_index]
    unit = plan.unit(split, name)
    if context.failed and any(other.key in context.failed
                              for other in plan.units_of(fold_index, [name])):
        return [], None
    result = context.result_of(unit)
    if result is None:
        return [], None
    facts = context.measurer.facts_of(split)
    rows = unit_rows(fold, result, config_hash=plan.key,
                     fold_level=fold_level(result, facts, config.k, config.metrics))
    context.add(result, split.log, stratum="all")
    if context.lists is not None and result.recommended is not None:
        context.lists[(fold.index, name)] = (result.users,
                                             result.recommended[:, : max(config.k)])
    if plan.strata is not None:
        rows += stratum_rows(context, fold, result, name, facts)
    record = (
        {"fold": fold.index, "algorithm": name, "device": result.device}
        | {f"{stage}_s": seconds for stage, seconds in result.timings.items()}
        | {"unit_key": unit.key, "reused": True}
    )
    return rows, record


def stratum_rows(
    context: Rows, fold: Fold, result: UnitResult, name: str, facts: Any
) -> list[ResultRow]:
    """The strata's rows of one (fold, algorithm): regrouped users of the ``all`` unit (policy
    mode ``test`` and the derived strata of mode ``users``, exposure from the ``all`` fold's
    facts) or the policy strata's own units (mode ``subset``); then the ``first-time``
    stratum's, when reported."""
    plan = context.plan
    assert plan.strata is not None
    config = plan.config
    rows: list[ResultRow] = []
    if plan.strata.mode in ("test", "users") and plan.strata.labels:
        groups = context.groups(fold, result)
        if context.per_user is not None or context.users is not None:
            for label, mask in groups.items():
                if int(mask.sum()) >= config.u_min:
                    context.add(result, plan.log, stratum=label, mask=mask)
        rows += group_rows(
            groups, fold, result, ks=config.k, u_min=config.u_min,
            config_hash=plan.key, metrics=config.metrics,
            fold_level=fold_level(result, facts, config.k, config.metrics),
        )
    elif plan.strata.mode == "subset":
        rows += subset_rows(context, fold, name)
    if plan.strata.first_time:
        rows += first_time_rows(context, fold, name)
    return rows


def subset_rows(context: Rows, fold: Fold, name: str) -> list[ResultRow]:
    """Mode ``subset``: every policy stratum's rows of one (fold, algorithm), from the
    stratum's own units."""
    plan = context.plan
    assert plan.strata is not None
    config = plan.config
    rows: list[ResultRow] = []
    for label in plan.strata.labels:
        split = plan.stratum_splits[label][fold.index]
        sub_fold = plan.strata.folds[label][fold.index]
        if split.skipped:
            rows += skipped_rows(sub_fold, name, config.k, stratum=label, config_hash=plan.key,
                                 metrics=config.metrics)
            continue
        sub_result = context.result_of(plan.unit(split, name))
        if sub_result is None:
            continue
        sub_facts = context.measurer.facts_of(split)
        rows += unit_rows(sub_fold, sub_result, stratum=label, config_hash=plan.key,
                          fold_level=fold_level(sub_result, sub_facts, config.k, config.metrics))
        context.add(sub_result, split.log, stratum=label)
    return rows


def first_time_rows(context: Rows, fold: Fold, name: str) -> list[dict[str, Any]]:
    """The ``first-time`` stratum's rows of one (fold, algorithm): the window's users without
    history, from the cold split's unit of the algorithm, or of POP (``--fallback pop``, said
    in the rows' ``fallback`` column) when the algorithm cannot score them; skipped rows
    without ``--cold-users`` (counting them), with ``--fallback none``, or when there are
    too few."""
    plan = context.plan
    config = plan.config
    if not plan.cold_splits:
        n = len(cold_users(plan.log, fold))
        return skipped_rows(fold, name, config.k, stratum=FIRST_TIME, n_users=n,
                            reason=f"{n} first-time user(s): evaluated with --cold-users",
                            config_hash=plan.key, metrics=config.metrics)
    split = plan.cold_splits[fold.index]
    if split.skipped:
        return skipped_rows(split, name, config.k, stratum=FIRST_TIME,  # type: ignore[arg-type]
                            config_hash=plan.key, metrics=config.metrics)
    from sweval.evaluators.run.specs import scores_cold

    spec = next(spec for spec in plan.specs if spec.label == name)
    source = name if scores_cold(spec) else ("pop" if config.fallback == "pop" else None)
    if source is None:
        return skipped_rows(split, name, config.k, stratum=FIRST_TIME,  # type: ignore[arg-type]
                            reason=f"{name} cannot score users without history (--fallback "
                            "none)", config_hash=plan.key, metrics=config.metrics)
    result = context.result_of(plan.unit(split, source))
    if result is None:
        return []
    if source != name:
        result = replace(result, algorithm=name)
    facts = context.measurer.facts_of(split)
    rows = unit_rows(split, result, stratum=FIRST_TIME, config_hash=plan.key,  # type: ignore[arg-type]
                     fold_level=fold_level(result, facts, config.k, config.metrics))
    for row in rows:
        row["fallback"] = "" if source == name else source
    context.add(result, plan.log, stratum=FIRST_TIME)
    return rows


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
