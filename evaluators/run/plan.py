"""A sliding-window evaluation's plan: the log, the folds, the splits and every unit to compute.

::

    plan = make_plan(config)        validate the options, load the log, cut the folds and their
                                    splits (every stratum), draw --tune's candidates, key the units
    store = unit_store(config)      --cache, $SWEVAL_CACHE, else the user's cache directory

The driver (:mod:`evaluators.run.driver`) computes the units the store lacks; a unit already in
the store is never recomputed, whichever command or run computed it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from sweval.data.durations import parse_duration, parse_time
from sweval.data.errors import SwevalError
from sweval.data.items import ItemFeatures, load_items
from sweval.data.loaders import load_log
from sweval.data.log import InteractionLog
from sweval.data.user_dirs import cache_home
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.text import parse_variant, split_alias
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
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.stats.tuning_candidates import (
    Objective,
    Search,
    ordered_labels,
    searches,
    tune_metric,
    with_candidates,
)
from sweval.evaluators.units.serving import plan_served
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.units.unit import (
    AlgorithmFailed,
    AlgorithmSpec,
    Unit,
    code_version,
    plan_units,
    variant_label,
)

_log = logging.getLogger(__name__)

#: Where units go without --cache: the environment's store, else the user's (user_store).
CACHE_ENV = "SWEVAL_CACHE"


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


def user_store() -> Path:
    """The unit store every command uses unless told otherwise: ``units`` in the user's cache
    directory (:func:`data.user_dirs.cache_home`: ``~/.cache/sweval/units`` on Linux,
    ``~/Library/Caches/sweval/units`` on macOS, ``%LOCALAPPDATA%\\sweval\\Cache\\units`` on
    Windows), shared by every run, output directory and command."""
    return cache_home() / "units"


def store_directory(config: EvalConfig) -> Path:
    """The directory of the run's unit store: ``--cache``, else ``$SWEVAL_CACHE``, else
    :func:`user_store`."""
    return Path(config.cache or os.environ.get(CACHE_ENV) or user_store()).expanduser()


def unit_store(config: EvalConfig) -> UnitStore:
    """The run's unit store (:func:`store_directory`), created if need be."""
    return UnitStore(store_directory(config)).prepare()


#: The last log this process loaded, by what it was read from (:func:`load_data`).
_LOADED: dict[tuple[Any, ...], InteractionLog] = {}
#: The options that say how a log is read (the same options and files: the same log).
_READ_OPTIONS = ("data", "format", "sep", "user_col", "item_col", "time_col", "policy_col",
                 "stratify_by", "basket_col", "time_unit", "dedup", "on_invalid", "scale", "seed")


def load_data(config: EvalConfig) -> InteractionLog:
    """The run's log: the file or bundled dataset of ``config.data``, else a generated one.

    The last log loaded is kept: read again with the same options from the same files (each
    file's size and modification time), it is not read twice (``sweval run`` loads it while
    Prefect's API starts, the flow's first task takes it; a notebook's second question).

    Raises:
        SwevalError: unreadable or invalid data, or ``--policy-col`` and ``--stratify-by``
            naming different columns (the strata are the values of the one policy column).
    """
    key = _read_key(config)
    if key is not None and key in _LOADED:
        return _LOADED[key]
    log = _read_data(config)
    if key is not None:
        _LOADED.clear()
        _LOADED[key] = log
    return log


def _read_key(config: EvalConfig) -> tuple[Any, ...] | None:
    """What a log is read from: the reading options and each source file's identity; None
    for a stream (read once, never again)."""
    from sweval.data.loaders import source_files
    from sweval.data.streams import is_stream

    options = tuple(str(getattr(config, name)) for name in _READ_OPTIONS)
    if config.data is None:
        return options
    if is_stream(config.data):
        return None
    try:
        files = source_files(config.data)
        return options + tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size)
                               for path in map(Path, files))
    except (OSError, SwevalError):
        return None


def _read_data(config: EvalConfig) -> InteractionLog:
    """:func:`load_data`'s reading."""
    if config.policy_col and policy_column(config) and config.policy_col != config.stratify_by:
        raise SwevalError(
            f"--policy-col {config.policy_col!r} and --stratify-by {config.stratify_by!r} name "
            "different columns: the strata are the values of one policy column; give "
            f"--stratify-by {config.stratify_by!r} alone (or both naming the same column)."
        )
    if config.data is None:
        from sweval.data.synthetic import generate_log

        if policy_column(config) not in (None, "policy"):
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
        sep=config.sep,
        user_col=config.user_col,
        item_col=config.item_col,
        time_col=config.time_col,
        policy_col=config.policy_col or policy_column(config),
        time_unit=config.time_unit,
        dedup=config.dedup,
        on_invalid=config.on_invalid,
        basket_col=config.basket_col,
    )


def policy_column(config: EvalConfig) -> str | None:
    """The policy column ``--stratify-by`` names (None for the derived strata:
    ``user-history``, ``returning``)."""
    return None if config.stratify_by in DERIVED else config.stratify_by


def window_spec(config: EvalConfig) -> WindowSpec:
    """The :class:`WindowSpec` of the configuration's protocol options.

    Raises:
        SwevalError: ``--window`` or ``--train-window`` lists several values: only ``sweval
            run`` (:func:`sweval.widths`, :func:`sweval.history_sweep`) runs one per value.
    """
    for option, text in (("--window", config.window), ("--train-window", config.train_window)):
        if text is not None and "," in text:
            raise SwevalError(
                f"{option} {text}: several values are a comparison, which `sweval run` makes "
                "(and sweval.widths / sweval.history_sweep in Python); this command takes one.")
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


def algorithm_specs(config: EvalConfig, found: list[Search] | None = None) -> list[AlgorithmSpec]:
    """The validated algorithm configurations of ``config``, ``--tune``'s candidates included
    (``found``: the drawn candidates; without it, the whole grid stands in for ``tpe``'s).

    Raises:
        SwevalError: unknown names, bad parameters, or --set for an algorithm not in the run.
    """
    named = {parse_variant(entry)[0] for entry in config.algorithms} | {
        alias for alias, _rest in map(split_alias, config.algorithms) if alias}
    unknown = set(config.params) - named
    if unknown:
        raise SwevalError(
            f"--set names algorithm(s) not in --algorithms: {', '.join(sorted(unknown))}."
        )
    if found is None:
        grid = config.tune_sampler == "tpe"  # its draws need the data: validate the grid now
        found = searches(config.model_copy(update={"tune_sampler": "grid"}) if grid else config)
    entries = with_candidates(config, found)
    return [AlgorithmSpec.from_entry(entry, config.params) for entry in entries]


def tpe_objective(config: EvalConfig, splits: list[Split]) -> Objective:
    """``--tune-sampler tpe``'s objective: a candidate's mean ``--tune-metric`` over the first
    ``--tune-windows`` folds (skipped ones ignored), before any test fold of the tuned series;
    NaN when one of its units fails. Its units go to the run's store (through the driver),
    where the run finds them again."""
    from sweval.evaluators.run.driver import Measurer, Work, compute, fail_on

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


def unused_tuning_options(config: EvalConfig) -> list[str]:
    """The tuning options (``--tune-windows``, ``--tune-sampler``, ...) set to other than
    their defaults, as the command line spells them."""
    fields = type(config).model_fields
    return [f"--{name.replace('_', '-')}" for name in fields
            if name.startswith("tune_") and getattr(config, name) != fields[name].default]


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


def cold_specs(specs: list[AlgorithmSpec], fallback: str) -> list[AlgorithmSpec]:
    """The configurations ranked for users without history: those that can score them
    (:meth:`~algorithms.base.Algorithm.scores_cold_users`), and POP as ``--fallback pop`` for
    the others (once, unless a default POP is among them)."""
    from sweval.algorithms.registry import resolve

    able = [spec for spec in specs if resolve(spec.name)[0].scores_cold_users()]
    if fallback == "pop" and len(able) < len(specs):
        fallback_spec = AlgorithmSpec.of("pop", label="pop")
        if all(spec.label != "pop" or spec.canonical != fallback_spec.canonical for spec in able):
            able.append(fallback_spec)
    return able


def check_repeats(config: EvalConfig) -> None:
    """``--repeats`` needs the repeats in the log.

    Raises:
        SwevalError: ``--repeats`` with ``--dedup first``.
    """
    if config.repeats and config.dedup != "none":
        raise SwevalError("--repeats needs --dedup none: with --dedup first a user's second "
                          "consumption of an item is dropped when the log is read.")


def scores_seen(spec: AlgorithmSpec) -> bool:
    """Whether ``spec``'s model can rank the items a user has consumed (``--repeats``)."""
    from sweval.algorithms.registry import resolve

    return bool(resolve(spec.name)[0].scores_seen_items())


def scores_cold(spec: AlgorithmSpec) -> bool:
    """Whether ``spec``'s model can score users without history."""
    from sweval.algorithms.registry import resolve

    return bool(resolve(spec.name)[0].scores_cold_users())


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


def check_baseline(config: EvalConfig, found: list[Search]) -> None:
    """Refuse a ``--baseline`` that is none of the run's algorithms.

    Raises:
        SwevalError: naming the algorithms it may be.
    """
    if config.baseline is None:
        return
    labels = ordered_labels(config, found)
    if config.baseline not in labels:
        raise SwevalError(
            f"--baseline {config.baseline!r}: not one of the run's algorithms "
            f"({', '.join(labels)})."
        )


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


def precheck(config: EvalConfig) -> None:
    """The cheap checks of :func:`make_plan`, before any server or data load: algorithm names
    and parameters, durations and times, that the data file exists. Commands run them first, so
    a typo fails in a second, not after Prefect's temporary server started.

    Raises:
        SwevalError: the first problem found.
    """
    from sweval.data.loaders import source_files

    algorithm_specs(config)
    window_spec(config)
    check_repeats(config)
    if config.data is not None:
        source_files(config.data)
