"""A whole sliding-window evaluation, as plain functions the flows (and tests) compose.

::

    plan = make_plan(config)                 load + validate the log, cut folds, check algorithms
    for fold in plan.folds:                  (the Prefect flow fans these out as tasks)
        evaluate_fold(plan, fold, names)     one TrainData per fold, one unit per algorithm
    outputs = write_outputs(plan, store)     results.csv, folds.csv, units.csv, config.json

Units already in the :class:`~evaluators.store.UnitStore` are not recomputed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweval.algorithms.base import Algorithm
from sweval.algorithms.registry import build_algorithm
from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log
from sweval.data.log import InteractionLog
from sweval.evaluators.config import EvalConfig
from sweval.evaluators.engine import evaluate_unit
from sweval.evaluators.folds import Fold, build_folds
from sweval.evaluators.results import results_frame, skipped_rows, summarise, unit_rows
from sweval.evaluators.store import UnitStore, atomic_write_text, code_fingerprint
from sweval.evaluators.stratify import Strata, build_strata, stratum_rows
from sweval.evaluators.warm import WarmStore
from sweval.evaluators.windows import WindowSpec, parse_duration, parse_time

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """Everything fixed before the first unit runs.

    Attributes:
        config: the validated configuration.
        log: the loaded log.
        folds: every fold, skipped ones included.
        key: the run key: result-relevant config hash + data fingerprint.
        strata: the policy strata when ``config.stratify_by`` is set.
    """

    config: EvalConfig
    log: InteractionLog
    folds: list[Fold]
    key: str
    strata: Strata | None = None

    @property
    def units(self) -> list[tuple[int, str]]:
        """Every (fold, algorithm) unit that needs computing (skipped folds need none)."""
        return [
            (fold.index, name)
            for fold in self.folds
            if not fold.skipped
            for name in self.config.algorithms
        ]

    def algorithm(self, name: str) -> Algorithm:
        return build_algorithm(name, self.config.params.get(name))

    @property
    def warm_starts(self) -> bool:
        """True when some algorithm warm-starts: then folds must be evaluated in order."""
        return bool(warm_starting(self.config))

    def store(self) -> UnitStore:
        return UnitStore(self.config.output, self.key)


def load_data(config: EvalConfig) -> InteractionLog:
    """The run's log: the file or bundled dataset of ``config.data``, else a generated one."""
    if config.data is None:
        from sweval.data.synthetic import generate_log

        if config.stratify_by not in (None, "policy"):
            raise SwevalError(
                f"--stratify-by {config.stratify_by!r}: the generated log's policy column is 'policy'."
            )
        frame = generate_log(scale=config.scale, seed=config.seed)
        return InteractionLog.from_frame(
            frame, policy_col="policy", source=config.dataset_name, dedup=config.dedup
        )
    return load_log(
        config.data,
        fmt=config.format,
        user_col=config.user_col,
        item_col=config.item_col,
        time_col=config.time_col,
        policy_col=config.policy_col or config.stratify_by,
        time_unit=config.time_unit,
        dedup=config.dedup,
        on_invalid=config.on_invalid,
    )


def window_spec(config: EvalConfig) -> WindowSpec:
    """The :class:`WindowSpec` of the configuration's protocol options."""
    return WindowSpec(
        width_s=parse_duration(config.window, option="--window"),
        n_folds=config.folds,
        start=parse_time(config.start) if config.start is not None else None,
        train_window_s=(
            parse_duration(config.train_window, option="--train-window")
            if config.train_window is not None
            else None
        ),
    )


def warm_starting(config: EvalConfig) -> list[str]:
    """The configured algorithms that start each fold from the previous fold's model."""
    return [
        name for name in config.algorithms
        if build_algorithm(name, config.params.get(name)).warm_starts
    ]  # fmt: skip


def make_plan(config: EvalConfig, log: InteractionLog | None = None) -> Plan:
    """Validate everything that can be validated before computing: data, windows, algorithms.

    Raises:
        SwevalError: any problem with the data or the options.
    """
    warm = warm_starting(config)  # builds every algorithm: bad names and params fail here
    if warm and config.stratify_by is not None:
        raise SwevalError(
            f"{', '.join(warm)}: warm_start cannot be combined with --stratify-by (the strata "
            "refit their models cold)."
        )
    if warm and config.task_runner == "dask":
        raise SwevalError(
            f"{', '.join(warm)}: warm_start needs the folds in order, with their state on one "
            "disk: use --task-runner sequential or threads."
        )
    unknown = set(config.params) - set(config.algorithms)
    if unknown:
        raise SwevalError(
            f"--set names algorithm(s) not in --algorithms: {', '.join(sorted(unknown))}."
        )
    spec = window_spec(config)
    if log is None:
        log = load_data(config)
    folds = build_folds(log, spec, u_min=config.u_min)
    strata = None
    if config.stratify_by is not None:
        strata = build_strata(
            log, spec, u_min=config.u_min, mode=config.stratify_mode, column=config.stratify_by
        )
    key = f"{config.result_hash()}-{log.fingerprint()}-{code_fingerprint()}"
    return Plan(config=config, log=log, folds=folds, key=key, strata=strata)


def evaluate_fold(
    plan: Plan,
    fold: Fold,
    names: list[str],
    *,
    on_unit: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate the named algorithms on one fold, sharing the fold's training data.

    Args:
        plan: the run plan.
        fold: a non-skipped fold of the plan.
        names: the algorithms to evaluate, in order.
        on_unit: optional callable ``on_unit(algorithm, payload)``, called as soon as each
            algorithm's unit is finished (the flow persists it there, before the next one runs).

    Returns:
        ``{algorithm: payload}`` with payload keys ``rows``, ``device`` and ``timings``.
    """
    if fold.skipped:
        raise ValueError(f"fold {fold.index} is skipped: {fold.skip_reason}")
    config = plan.config
    train = fold.train_data(plan.log)
    warm = WarmStore(config.output)
    payloads = {}
    for name in names:
        algorithm = plan.algorithm(name)
        if algorithm.warm_starts:
            algorithm.warm_ = warm.load(name, fold.index)
        unit = evaluate_unit(
            plan.log, fold, algorithm, ks=config.k, relevance=config.relevance, train=train
        )
        if algorithm.warm_starts:
            warm.save(name, fold.index, algorithm.warm_state())
        rows = unit_rows(fold, unit, config_hash=plan.key)
        if plan.strata is not None:
            rows += stratum_rows(
                plan.strata, plan.log, fold, unit, lambda name=name: plan.algorithm(name),
                ks=config.k, relevance=config.relevance, u_min=config.u_min,
                config_hash=plan.key,
            )
        payloads[name] = {
            "rows": rows,
            "device": unit.device,
            "timings": unit.timings,
        }
        if on_unit is not None:
            on_unit(name, payloads[name])
    return payloads


def run_units(plan: Plan, store: UnitStore, *, progress: Any = None) -> int:
    """Compute every unit not yet in ``store``, fold by fold; returns how many were computed.

    Args:
        plan: the run plan.
        store: where finished units go (and which are already there).
        progress: optional callable ``progress(n_done_now)`` called after each unit.
    """
    computed = 0
    for fold in plan.folds:
        if fold.skipped:
            continue
        missing = [name for name in plan.config.algorithms if not store.has(fold.index, name)]
        if not missing:
            continue
        for name, payload in evaluate_fold(plan, fold, missing).items():
            store.save(fold.index, name, payload)
            computed += 1
            if progress is not None:
                progress(1)
    return computed


@dataclass(frozen=True)
class Outputs:
    """What a finished run wrote."""

    directory: Path
    results: pd.DataFrame
    summary: pd.DataFrame
    folds: pd.DataFrame
    units: pd.DataFrame
    devices: dict[str, str]


def collect(plan: Plan, store: UnitStore) -> Outputs:
    """Assemble the tables from the finished units (every unit must be there)."""
    rows: list[dict[str, Any]] = []
    unit_records = []
    devices: dict[str, str] = {}
    for fold in plan.folds:
        for name in plan.config.algorithms:
            if fold.skipped:
                labels = ["all"] + (plan.strata.labels if plan.strata is not None else [])
                for label in labels:
                    rows += skipped_rows(
                        fold, name, plan.config.k, stratum=label, config_hash=plan.key
                    )
                continue
            if not store.has(fold.index, name):
                raise RuntimeError(f"unit (fold {fold.index}, {name}) has not been computed")
            payload = store.load(fold.index, name)
            rows += payload["rows"]
            devices[name] = payload["device"]
            unit_records.append(
                {"fold": fold.index, "algorithm": name, "device": payload["device"]}
                | {f"{stage}_s": seconds for stage, seconds in payload["timings"].items()}
            )
    results = results_frame(rows, plan.config.algorithms)
    return Outputs(
        directory=Path(plan.config.output),
        results=results,
        summary=summarise(results),
        folds=pd.DataFrame([fold.summary() for fold in plan.folds]),
        units=pd.DataFrame(unit_records),
        devices=devices,
    )


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
    import json

    from sweval.algorithms.registry import default_params

    record = {
        "config": plan.config.model_dump(),
        "resolved_params": {
            name: default_params(name) | plan.config.params.get(name, {})
            for name in plan.config.algorithms
        },
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


def run_local(config: EvalConfig, *, log: InteractionLog | None = None) -> Outputs:
    """Plan, compute every missing unit and write the outputs, in this process (no Prefect)."""
    plan = make_plan(config, log)
    store = plan.store()
    run_units(plan, store)
    outputs = collect(plan, store)
    write_outputs(plan, outputs)
    return outputs
