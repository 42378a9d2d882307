"""A protocol's units and tables: what ``compare``, ``leakage`` and ``gap`` evaluate, through the
one driver (:mod:`evaluators.run.driver`).

::

    planned = plan_protocol(log, protocol, algorithms, ks=..., params=...)
                          the protocol's splits, one unit per (split, algorithm) it supports
                          (a warm-starting configuration chained over window splits); skipped
                          splits and unsupported algorithms keep rows with their reason
    work = protocol_work(plans, ks)         one group per split, of every plan
    collected = compute(work, store, ...)   the missing units computed, every unit collected
    run = protocol_run(planned, collected)  the long table (SPEC §8) with a protocol column,
                          the leakage diagnostic, one row per split and per unit

Each protocol's rows are the same whichever command plans it: ``compare``'s ``sw-eval`` rows
are ``sweval run``'s, its other protocols' rows those of the protocol run alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.log import InteractionLog
from sweval.evaluators.experiments.compare_tables import LEAKAGE_COLUMNS, leakage_rows
from sweval.evaluators.protocols.holdout import Protocol
from sweval.evaluators.protocols.splits import Split, item_first_seen
from sweval.evaluators.protocols.stratify import group_rows
from sweval.evaluators.protocols.user_strata import UserStrata
from sweval.evaluators.run.driver import Executor, Hook, compute, fail_on
from sweval.evaluators.run.results import ResultRow, results_frame, skipped_rows, unit_rows
from sweval.evaluators.run.work import Collected, Job, Measurer, Outcome, Work
from sweval.evaluators.stats.users import UserValues
from sweval.evaluators.units.algorithm_spec import AlgorithmSpec
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.units.unit import Unit, plan_units


@dataclass
class ProtocolPlan:
    """A protocol's splits on one log, and the unit of every (split, algorithm) it evaluates.

    Attributes:
        protocol: the protocol.
        log: the log it cuts (a stratum's sub-log, a validation's prefix, ...).
        specs: the algorithm configurations, in display order.
        splits: the protocol's splits, in order.
        units: per (split position, label), the unit (none for a skipped split or an
            algorithm the protocol does not define).
        ks: the metrics' cut-offs.
        config_hash: written to the tables' ``config_hash`` column.
        stratum: written to the ``stratum`` column.
        user_strata: the derived strata the evaluated users are also grouped by
            (``--stratify-by user-history``: their history in each split's training data),
            u_min applying per group; None without.
        u_min: the fewest users a group of ``user_strata`` is measured on.
    """

    protocol: Protocol
    log: InteractionLog
    specs: list[AlgorithmSpec]
    splits: list[Split]
    units: dict[tuple[int, str], Unit]
    ks: list[int]
    config_hash: str = ""
    stratum: str = "all"
    user_strata: UserStrata | None = None
    u_min: int = 0

    @property
    def labels(self) -> list[str]:
        return [spec.label for spec in self.specs]


@dataclass
class ProtocolRun:
    """What one protocol produced.

    Attributes:
        protocol: the protocol's name.
        results: the long table (SPEC §8) with a leading ``protocol`` column.
        leakage: one row per (split, algorithm, k), :data:`LEAKAGE_COLUMNS`.
        splits: one row per split (label, span, users, skip reason).
        units: one row per evaluated (split, algorithm): device and timings.
        devices: the device each algorithm ran on.
        params: the protocol's parameters.
    """

    protocol: str
    results: pd.DataFrame
    leakage: pd.DataFrame
    splits: pd.DataFrame
    units: pd.DataFrame
    devices: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)


def plan_protocol(
    log: InteractionLog,
    protocol: Protocol,
    algorithms: Sequence[str],
    *,
    ks: list[int],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    config_hash: str = "",
    stratum: str = "all",
    user_strata: UserStrata | None = None,
    u_min: int = 0,
) -> ProtocolPlan:
    """The units ``protocol`` needs on ``log`` (see the module docstring); ``user_strata``
    and ``u_min`` as :class:`ProtocolPlan`'s.

    Raises:
        SwevalError: unknown algorithms or parameters, or a protocol the log cannot be cut by.
    """
    specs = [AlgorithmSpec.from_entry(entry, dict(params or {})) for entry in algorithms]
    splits = list(protocol.splits(log))
    chains: dict[str, str | None] = {}
    units: dict[tuple[int, str], Unit] = {}
    for position, split in enumerate(splits):
        supported = [spec for spec in specs if protocol.unsupported(spec.name) is None]
        for unit in plan_units([split], supported, ks, previous=chains):
            units[(position, unit.spec.label)] = unit
    return ProtocolPlan(protocol=protocol, log=log, specs=specs,
                        splits=splits, units=units, ks=list(ks), config_hash=config_hash,
                        stratum=stratum, user_strata=user_strata, u_min=u_min)


def protocol_work(plans: Sequence[ProtocolPlan], ks: list[int]) -> Work:
    """The units of ``plans`` as one :class:`~evaluators.run.work.Work`: a group per split."""
    groups = []
    for plan in plans:
        for position in range(len(plan.splits)):
            group = [plan.units[(position, label)] for label in plan.labels
                     if (position, label) in plan.units]
            if group:
                groups.append(group)
    return Work(groups=groups, measurer=Measurer(list(ks)))


def protocol_run(plan: ProtocolPlan, collected: Collected) -> ProtocolRun:
    """The tables of one protocol from its collected units (every unit must be there)."""
    name = plan.protocol.name
    first_seen = item_first_seen(plan.log)
    rows: list[ResultRow] = []
    leaks: list[dict[str, object]] = []
    units: list[dict[str, object]] = []
    devices: dict[str, str] = {}
    grouped: dict[int, dict[str, NDArray[np.bool_]]] = {}  # per split: its users' strata
    for position, split in enumerate(plan.splits):
        for spec in plan.specs:
            label = spec.label
            unit = plan.units.get((position, label))
            if unit is None:
                reason = split.skip_reason or plan.protocol.unsupported(spec.name)
                for stratum in [plan.stratum, *(plan.user_strata.labels
                                                if plan.user_strata is not None else [])]:
                    rows += skipped_rows(split, label, plan.ks, reason=reason,
                                         n_users=split.n_eligible,
                                         config_hash=plan.config_hash, stratum=stratum)
                continue
            result = collected.result(unit)
            if result is None:  # failed: fail_on raised before any table is made
                continue
            rows += unit_rows(split, result, config_hash=plan.config_hash,
                              stratum=plan.stratum)
            if plan.user_strata is not None:
                if position not in grouped:
                    grouped[position] = plan.user_strata.groups(split, result.users)
                rows += group_rows(grouped[position], split, result,  # type: ignore[arg-type]
                                   ks=plan.ks, u_min=plan.u_min, config_hash=plan.config_hash)
            leaks += leakage_rows(name, split, result, plan.ks, first_seen)
            devices[label] = result.device
            units.append(
                {"protocol": name, "fold": split.index, "algorithm": label,
                 "device": result.device}
                | {f"{stage}_s": seconds for stage, seconds in result.timings.items()}
                | {"unit_key": unit.key}
            )
    results = results_frame(rows, plan.labels)
    results.insert(0, "protocol", name)
    return ProtocolRun(
        protocol=name,
        results=results,
        leakage=pd.DataFrame(leaks, columns=LEAKAGE_COLUMNS),
        splits=pd.DataFrame([split.summary() for split in plan.splits]),
        units=pd.DataFrame(units),
        devices=devices,
        params=plan.protocol.describe(),
    )


def protocol_users(plans: Sequence[ProtocolPlan], collected: Collected) -> UserValues:
    """The per-user values of the units of ``plans`` (a protocol and its strata), by the
    plan's stratum, split and label: the users-level statistics' input."""
    users = UserValues()
    for plan in plans:
        for unit in plan.units.values():
            result = collected.result(unit)
            if result is not None:
                users.add(result, stratum=plan.stratum)
    return users


def run_protocols(
    plans: Sequence[ProtocolPlan],
    store: UnitStore,
    *,
    executor: Executor | None = None,
    hooks: Sequence[Hook] = (),
) -> list[ProtocolRun]:
    """Compute the units of every plan (one driver pass: jobs of every protocol side by side)
    and make each protocol's tables.

    Raises:
        AlgorithmFailed: a unit's algorithm raised (the command stops, naming the unit).
    """
    if not plans:
        return []
    collected = fail_on(compute(protocol_work(plans, plans[0].ks), store, executor=executor,
                                hooks=hooks))
    return [protocol_run(plan, collected) for plan in plans]


def run_protocol(
    log: InteractionLog,
    protocol: Protocol,
    algorithms: list[str],
    *,
    ks: list[int],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    config_hash: str = "",
    store: UnitStore | None = None,
    progress: Callable[[int], None] | None = None,
) -> ProtocolRun:
    """One protocol, planned and run (:func:`run_protocols`); ``store`` defaults to a
    temporary store (nothing kept); ``progress`` is called with the units of each finished
    split."""
    if store is None:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="sweval-units-") as directory:
            return run_protocol(log, protocol, algorithms, ks=ks, params=params,
                                config_hash=config_hash, store=UnitStore(directory).prepare(),
                                progress=progress)
    plan = plan_protocol(log, protocol, algorithms, ks=ks, params=params,
                         config_hash=config_hash)
    hooks = [ProgressOf(progress)] if progress is not None else []
    return run_protocols([plan], store, hooks=hooks)[0]


class ProgressOf(Hook):
    """A hook that calls ``advance(n)`` with the units of each finished job."""

    def __init__(self, advance: Callable[[int], None]) -> None:
        self.advance = advance

    def job_done(self, driver: Any, job: Job, outcome: Outcome) -> None:
        self.advance(len(job.labels))
