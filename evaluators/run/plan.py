"""A sliding-window evaluation's plan: the log, the folds, the splits and every unit to compute.

::

    plan = make_plan(config)        validate the options, load the log, cut the folds and their
                                    splits (every stratum), draw --tune's candidates, key the units
    store = unit_store(config)      --cache, $SWEVAL_CACHE, else the user's cache directory

The driver (:mod:`evaluators.run.driver`) computes the units the store lacks; a unit already in
the store is never recomputed, whichever command or run computed it. The log and the store come
from :mod:`evaluators.run.sources`, the checked options from :mod:`evaluators.run.specs`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from sweval.data.errors import SwevalError
from sweval.data.items import ItemFeatures, load_items
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.protocols.folds import Fold, build_folds
from sweval.evaluators.protocols.retraining import cadence_pairs, served_pairs
from sweval.evaluators.protocols.splits import Split, cold_split, fold_splits
from sweval.evaluators.protocols.stratify import Strata, build_strata
from sweval.evaluators.protocols.user_strata import (
    DEFAULT_BINS,
    DERIVED,
    RETURNING,
    USER_HISTORY,
    UserStrata,
)
from sweval.evaluators.run.sources import load_data, policy_column, unit_store
from sweval.evaluators.run.specs import (
    algorithm_specs,
    check_baseline,
    check_repeats,
    cold_specs,
    scores_seen,
    unused_tuning_options,
    window_spec,
)
from sweval.evaluators.stats.tuning_candidates import Objective, Search, searches, tune_metric
from sweval.evaluators.units.algorithm_spec import AlgorithmSpec, variant_label
from sweval.evaluators.units.failures import AlgorithmFailed
from sweval.evaluators.units.serving import plan_served
from sweval.evaluators.units.unit import Unit, code_version, plan_units

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """Everything fixed before the first unit runs.

    Attributes:
        config: the validated configuration.
        log: the loaded log.
        folds: every fold, skipped ones included.
        key: the run key (result-relevant options + data fingerprint + evaluation code), for
            config.json, the results' ``config_hash`` column and MLflow.
        strata: the policy strata when ``config.stratify_by`` is set.
        specs: the algorithm configurations, in display order.
        splits: one split per fold (the unstratified ``all`` stratum).
        stratum_splits: per policy label, one split per fold (``--stratify-mode subset``).
        cold_splits: per fold, the cold twin of its split (``--cold-users``; else empty).
        units: every unit the run needs, fold by fold.
        searches: the tuned algorithms and their candidates (``--tune``).
        served: the served units of ``--horizon`` and ``--cadence`` (a fold's model on a later
            window, :mod:`evaluators.units.serving`), by fit fold.
    """

    config: EvalConfig
    log: InteractionLog
    folds: list[Fold]
    key: str
    strata: Strata | None = None
    specs: list[AlgorithmSpec] = field(default_factory=list)
    splits: list[Split] = field(default_factory=list)
    stratum_splits: dict[str, list[Split]] = field(default_factory=dict)
    units: list[Unit] = field(default_factory=list)
    searches: list[Search] = field(default_factory=list)
    cold_splits: list[Split] = field(default_factory=list)
    served: list[Unit] = field(default_factory=list)

    def units_of(self, fold: int, names: list[str] | None = None) -> list[Unit]:
        """The units of one fold (every stratum), optionally of some algorithms only."""
        return [
            unit for unit in self.units
            if unit.split.index == fold and (names is None or unit.spec.label in names)
        ]

    def unit(self, split: Split, name: str) -> Unit:
        """The unit of ``name`` on ``split`` (a split of this plan, not skipped)."""
        return self._unit_index[(id(split), name)]

    @cached_property
    def items(self) -> ItemFeatures | None:
        """The item features of ``--items`` (read once), None without."""
        if self.config.items is None:
            return None
        return load_items(self.config.items, self.config.item_columns)

    @cached_property
    def _unit_index(self) -> dict[tuple[int, str], Unit]:
        return {(id(unit.split), unit.spec.label): unit for unit in self.units}

    @property
    def warm_starts(self) -> bool:
        """True when some algorithm warm-starts: then folds must be evaluated in order."""
        return any(spec.warm_starts for spec in self.specs)


def tpe_objective(config: EvalConfig, splits: list[Split]) -> Objective:
    """``--tune-sampler tpe``'s objective: a candidate's mean ``--tune-metric`` over the first
    ``--tune-windows`` folds (skipped ones ignored), before any test fold of the tuned series;
    NaN when one of its units fails. Its units go to the run's store (through the driver),
    where the run finds them again."""
    from sweval.evaluators.run.driver import compute, fail_on
    from sweval.evaluators.run.work import Measurer, Work

    def objective(name: str, params: dict[str, Any]) -> float:
        spec = AlgorithmSpec.of(name, dict(config.params.get(name, {})) | params,
                                label=variant_label(name, params))
        windows = [split for split in splits[: config.tune_windows] if not split.skipped]
        if not windows:
            raise SwevalError(
                f"--tune-sampler tpe: the first {config.tune_windows} fold(s) are all skipped; "
                "no window to steer the draws by."
            )
        metric, k = tune_metric(config)
        units = plan_units(windows, [spec], config.k)
        work = Work(groups=[[unit] for unit in units], measurer=Measurer(list(config.k)),
                    log_failures=False)
        try:
            collected = fail_on(compute(work, unit_store(config)))
        except AlgorithmFailed:  # a failed trial; the run fails this unit again and logs it
            return float("nan")
        return float(np.mean([collected.results[unit.key].values[(metric, k)].mean()
                              for unit in units]))

    return objective


def make_plan(config: EvalConfig, log: InteractionLog | None = None) -> Plan:
    """Validate everything that can be validated before computing, and plan the units.

    Raises:
        SwevalError: any problem with the data or the options.
    """
    if config.stratify_mode != "subset" and config.stratify_by is None:
        raise SwevalError(
            f"--stratify-mode {config.stratify_mode} needs --stratify-by (the policy column to "
            "group the test users by)."
        )
    specs = algorithm_specs(config)
    warm = [spec.label for spec in specs if spec.warm_starts]
    if warm and policy_column(config) is not None:
        raise SwevalError(
            f"{', '.join(warm)}: warm_start cannot be combined with --stratify-by (the strata "
            "refit their models cold)."
        )
    if warm and config.task_runner == "dask":
        raise SwevalError(
            f"{', '.join(warm)}: warm_start needs the folds in order, with their state on one "
            "disk: use --task-runner sequential or threads."
        )
    check_repeats(config)
    unable = [spec.label for spec in specs if config.repeats and not scores_seen(spec)]
    if unable:
        raise SwevalError(f"--repeats: {', '.join(unable)} cannot score the items a user has "
                          "already consumed; leave it out of --algorithms.")
    spec = window_spec(config)
    if log is None:
        log = load_data(config)
    folds = build_folds(log, spec, u_min=config.u_min)
    # item-kNN reads the co-occurrences that advanced folds can carry; nothing else does
    cooccurrence = any(spec.name == "item-knn" for spec in specs)
    splits = fold_splits(log, folds, config.relevance, incremental=config.incremental,
                         cooccurrence=cooccurrence, repeats=config.repeats)
    found = searches(config, tpe_objective(config, splits))
    unused = unused_tuning_options(config) if not found else []
    if unused:
        _log.warning("%s %s no effect without --tune.", ", ".join(unused),
                     "has" if len(unused) == 1 else "have")
    if config.tune_sampler != "grid":
        specs = algorithm_specs(config, found)
    check_baseline(config, found)
    units = plan_units(splits, specs, config.k)
    strata = user_strata(config)
    stratum_splits: dict[str, list[Split]] = {}
    if policy_column(config) is not None:
        assert config.stratify_by is not None
        strata = build_strata(
            log, spec, u_min=config.u_min, mode=config.stratify_mode, column=config.stratify_by
        )
        for label in strata.logs:
            stratum_splits[label] = fold_splits(
                strata.logs[label], strata.folds[label], config.relevance,
                stratum=label, stratify_mode="subset", incremental=config.incremental,
                cooccurrence=cooccurrence, repeats=config.repeats,
            )
            units += plan_units(stratum_splits[label], specs, config.k)
    if strata is not None and (config.cold_users or config.stratify_by == RETURNING):
        strata = replace(strata, first_time=True)
    cold_splits = []
    if config.cold_users:
        cold_splits = [cold_split(split, config.u_min, config.relevance) for split in splits]
        units += plan_units(cold_splits, cold_specs(specs, config.fallback), config.k)
    key = run_key(config, log.fingerprint(), [spec.name for spec in specs])
    plan = Plan(
        config=config, log=log, folds=folds, key=key, strata=strata, specs=specs,
        splits=splits, stratum_splits=stratum_splits, units=units, searches=found,
        cold_splits=cold_splits,
        served=plan_retraining(config, splits, units),
    )
    _ = plan.items  # a bad --items file is an error before anything is computed
    return plan


def user_strata(config: EvalConfig) -> Strata | None:
    """The derived strata of ``config`` (``--stratify-by user-history | returning``), the
    ``first-time`` stratum alone with ``--cold-users``, else None.

    Raises:
        SwevalError: bad ``--user-bins``.
    """
    if config.user_bins != list(DEFAULT_BINS) and config.stratify_by != USER_HISTORY:
        _log.warning("--user-bins has no effect without --stratify-by user-history.")
    if config.stratify_by in DERIVED:
        users = UserStrata.of(config.stratify_by, config.user_bins)
        return Strata(mode="users", labels=list(users.labels), users=users)
    if config.cold_users and config.stratify_by is None:
        return Strata(mode="users", labels=[])
    return None


def plan_retraining(config: EvalConfig, splits: list[Split], units: list[Unit]) -> list[Unit]:
    """The served units ``--horizon`` and ``--cadence`` need (:mod:`evaluators.protocols.retraining`),
    on the unstratified splits.

    Raises:
        SwevalError: combined with ``--tune`` (every candidate would serve every window),
            ``--repeats`` or ``--cold-users`` (served models rank the plain way),
            ``--update`` without ``--cadence``, or an algorithm that cannot serve a later
            window (or be updated, with ``--update``).
    """
    if config.update and not config.cadence:
        raise SwevalError("--update needs --cadence: the windows between two retrains are the "
                          "ones an updated model serves (e.g. --cadence 1,7 --update).")
    if not (config.horizon or config.cadence):
        return []
    if config.tune:
        raise SwevalError("--horizon and --cadence cannot be combined with --tune yet: run the "
                          "tuned configuration as a variant (ALGORITHM(p=v)).")
    if config.repeats or config.cold_users:
        raise SwevalError("--horizon and --cadence cannot be combined with --repeats or "
                          "--cold-users yet: a served model ranks the plain way (seen items "
                          "excluded, users with history only).")
    evaluated = [split.index for split in splits if not split.skipped]
    pairs = served_pairs(evaluated, config.horizon, config.cadence)
    updated = cadence_pairs(evaluated, config.cadence) if config.update else []
    plain = [unit for unit in units if unit.split is splits[unit.split.index]]  # no strata
    return plan_served(plain, splits, pairs, config.k, updated)


def run_key(config: EvalConfig, fingerprint: str, algorithms: Sequence[str], *,
            kind: str = "", extra: Mapping[str, Any] | None = None) -> str:
    """The one key of a run, a series or an experiment: what it is (``kind``: none for a run,
    ``rolling``, a protocol's or a command's name), the options that change its numbers (and
    ``extra``: a protocol's or a design's parameters), the data (``fingerprint``; none for a
    rolling series, whose data grows) and the code of its ``algorithms`` (registry names).
    The same key, the same numbers: a rerun finds its MLflow runs and its table's
    ``config_hash`` again.

    ``<kind>-<options>-<fingerprint>-<code>``, the kind and fingerprint left out when empty.
    """
    import hashlib
    import json

    options = config.result_hash()
    if extra:
        text = json.dumps({"config": options, **extra}, sort_keys=True, default=str)
        options = hashlib.sha256(text.encode()).hexdigest()[:16]
    code = hashlib.sha256(" ".join(code_version(name) for name in algorithms).encode())
    parts = [kind, options, fingerprint, code.hexdigest()[:12]]
    return "-".join(part for part in parts if part)
