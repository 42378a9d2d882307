"""A run's outputs: the tables measured from the finished units, and the files they go to.

::

    collect(plan, store)         per (fold, algorithm): load the unit's lists, measure them at the
                                 run's k against the fold's relevant sets -> results rows (every
                                 stratum), units.csv records; skipped folds keep empty rows
    write_outputs(plan, outputs) results.csv, summary.csv, folds.csv, units.csv, config.json,
                                 each written whole or not at all
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.engine import UnitResult, measure
from sweval.evaluators.folds import Fold
from sweval.evaluators.results import results_frame, skipped_rows, summarise, unit_rows
from sweval.evaluators.store import UnitStore, atomic_write_text
from sweval.evaluators.stratify import group_rows
from sweval.evaluators.tuning import optimism, ordered_labels, tune
from sweval.evaluators.units import Unit, UnitFailure

if TYPE_CHECKING:
    from sweval.evaluators.run import Plan


@dataclass(frozen=True)
class Outputs:
    """What a finished run wrote."""

    directory: Path
    results: pd.DataFrame
    summary: pd.DataFrame
    folds: pd.DataFrame
    units: pd.DataFrame
    devices: dict[str, str]
    n_reused: int = 0
    n_computed: int = 0
    tuning: pd.DataFrame | None = None
    optimism: pd.DataFrame | None = None
    #: units whose algorithm raised: left out of every table
    failed: tuple[UnitFailure, ...] = ()


def collect(plan: Plan, store: UnitStore, *, failed: Sequence[UnitFailure] = ()) -> Outputs:
    """Assemble the tables from the finished units, measured at the run's k (every unit must
    be in the store, except the ``failed`` ones, which have no rows)."""
    rows: list[dict[str, Any]] = []
    unit_records: list[dict[str, Any]] = []
    devices: dict[str, str] = {}
    skip = frozenset(failure.key for failure in failed)
    for fold in plan.folds:
        for spec in plan.specs:
            fold_rows, record = algorithm_rows(plan, fold.index, spec.label, store, skip=skip)
            rows += fold_rows
            if record is not None:
                devices[spec.label] = record["device"]
                unit_records.append(record)
    labels = ordered_labels(plan.config, plan.searches)
    results = results_frame(rows, labels)
    tuning = optimism_table = None
    if plan.config.tune:
        tuned, tuning = tune(results, plan.config, plan.searches)
        results = results_frame([*rows, *tuned.to_dict("records")], labels)
        optimism_table = optimism(results, plan.config, plan.searches)
    return Outputs(
        directory=Path(plan.config.output),
        results=results,
        summary=summarise(results),
        folds=pd.DataFrame([fold.summary() for fold in plan.folds]),
        units=pd.DataFrame(unit_records),
        devices=devices,
        tuning=tuning,
        optimism=optimism_table,
        failed=tuple(failed),
    )


def algorithm_rows(
    plan: Plan, fold_index: int, name: str, store: UnitStore, *, skip: frozenset[str] = frozenset()
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The results rows of one (fold, algorithm), every stratum, and its ``units.csv`` record
    (None for a skipped fold); none for a unit whose key is in ``skip`` (a failed unit), nor
    for the strata of a (fold, algorithm) with one."""
    config = plan.config
    fold = plan.folds[fold_index]
    if fold.skipped:
        labels = ["all", *(plan.strata.labels if plan.strata is not None else [])]
        return [
            row for label in labels
            for row in skipped_rows(fold, name, config.k, stratum=label, config_hash=plan.key)
        ], None
    unit = plan.unit(plan.splits[fold_index], name)
    if skip and (unit.key in skip or any(
        other.key in skip for other in plan.units_of(fold_index, [name])
    )):
        return [], None
    result = measure_unit(plan, unit, store)
    rows = unit_rows(fold, result, config_hash=plan.key)
    if plan.strata is not None:
        rows += stratum_rows(plan, fold, result, name, store)
    record = (
        {"fold": fold.index, "algorithm": name, "device": result.device}
        | {f"{stage}_s": seconds for stage, seconds in result.timings.items()}
        | {"unit_key": unit.key}
    )
    return rows, record


def measure_unit(plan: Plan, unit: Unit, store: UnitStore) -> UnitResult:
    """A stored unit's per-user metrics at the run's k.

    Raises:
        RuntimeError: the unit has not been computed.
    """
    if not store.has(unit.key, depth=unit.depth):
        raise RuntimeError(
            f"unit (fold {unit.split.index}, {unit.spec.label}) has not been computed"
        )
    lists = store.load(unit.key, unit.split.log)
    return measure(
        lists, unit.split.relevant, plan.config.k, n_items=unit.split.log.n_items,
        index=unit.split.index, algorithm=unit.spec.label,
    )


def stratum_rows(
    plan: Plan, fold: Fold, result: UnitResult, name: str, store: UnitStore
) -> list[dict[str, Any]]:
    """The policy strata's rows of one (fold, algorithm): regrouped users of the ``all`` unit
    (mode ``test``) or the stratum's own units (mode ``subset``)."""
    assert plan.strata is not None
    config = plan.config
    if plan.strata.mode == "test":
        return group_rows(
            plan.strata, plan.log, fold, result, ks=config.k, u_min=config.u_min,
            config_hash=plan.key,
        )
    rows: list[dict[str, Any]] = []
    for label in plan.strata.labels:
        split = plan.stratum_splits[label][fold.index]
        sub_fold = plan.strata.folds[label][fold.index]
        if split.skipped:
            rows += skipped_rows(sub_fold, name, config.k, stratum=label, config_hash=plan.key)
            continue
        sub_result = measure_unit(plan, plan.unit(split, name), store)
        rows += unit_rows(sub_fold, sub_result, stratum=label, config_hash=plan.key)
    return rows


def write_outputs(plan: Plan, outputs: Outputs) -> None:
    """Write ``results.csv``, ``summary.csv``, ``folds.csv``, ``units.csv`` and ``config.json``.

    Each file is written whole or not at all (temporary name, then rename).
    """
    directory = outputs.directory
    tables = {
        "results.csv": outputs.results.to_csv(index=False, float_format="%.10g"),
        "summary.csv": outputs.summary.to_csv(index=False, float_format="%.10g"),
        "folds.csv": outputs.folds.to_csv(index=False),
        "units.csv": outputs.units.to_csv(index=False, float_format="%.4f"),
        "config.json": run_record(plan, outputs),
    }
    if outputs.tuning is not None and outputs.optimism is not None:
        tables["tuning.csv"] = outputs.tuning.to_csv(index=False, float_format="%.10g")
        tables["optimism.csv"] = outputs.optimism.to_csv(index=False, float_format="%.10g")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in tables.items():
            atomic_write_text(directory / name, text)
    except OSError as exc:
        raise SwevalError(
            f"{directory}: cannot write the results ({exc}); finished units are kept, rerun the "
            "same command to write them."
        ) from exc


def run_record(plan: Plan, outputs: Outputs) -> str:
    """``config.json``: the configuration, resolved hyper-parameters, devices and data facts."""
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
        "folds_used": int(sum(not f.skipped for f in plan.folds)),
        "folds_skipped": int(sum(f.skipped for f in plan.folds)),
    }
    return json.dumps(record, indent=2, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)
