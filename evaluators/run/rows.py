"""The results rows of a run's units: per (fold, algorithm) the unit's rows in every stratum
(:func:`algorithm_rows`: the ``all`` unit's, regrouped users of policy mode ``test`` and the
derived strata, each policy stratum's own units in mode ``subset``, the ``first-time``
stratum's) and its ``units.csv`` record, collecting the per-user values and lists the tables
need on the way (:class:`Rows`); :mod:`evaluators.run.outputs` makes the tables of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sweval.evaluators.metrics.measures import fold_level
from sweval.evaluators.protocols.folds import Fold
from sweval.evaluators.protocols.splits import cold_users
from sweval.evaluators.protocols.stratify import group_rows, groups_by_test_policy
from sweval.evaluators.protocols.user_strata import FIRST_TIME
from sweval.evaluators.run.per_user import PerUser
from sweval.evaluators.run.results import ResultRow, skipped_rows, unit_rows
from sweval.evaluators.run.work import Measurer
from sweval.evaluators.stats.overlap import Lists
from sweval.evaluators.stats.users import UserValues
from sweval.evaluators.units.engine import UnitResult
from sweval.evaluators.units.unit import Unit

if TYPE_CHECKING:
    from sweval.evaluators.run.plan import Plan


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
