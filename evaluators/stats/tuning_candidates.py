"""The candidates of ``--tune``: which parameter points each tuned algorithm is scored with.

A grid (``--tune item-knn.n_neighbors=10,50,200``, the product of every ``--tune`` of one
algorithm) makes candidates, each an ordinary variant whose units every fold computes:
:func:`searches` validates the grid and the tuning options and lists every tuned algorithm's
candidates in grid order (all of them, or the points an Optuna sampler draws, :func:`sample`);
:func:`with_candidates` and :func:`ordered_labels` add them to the run's algorithms and tables.
The choice among them on the timeline is :mod:`evaluators.stats.tuning`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.seeds import expand_seeds
from sweval.evaluators.config.text import entry_label, parse_variant
from sweval.evaluators.metrics.names import ALL_METRICS, UNRANKED, WITHOUT_K

#: ``objective(name, params)``: a candidate's mean metric on the windows before the first test
#: fold (what ``--tune-sampler tpe`` steers by).
Objective = Callable[[str, dict[str, Any]], float]

TUNED = "{}[tuned]"


@dataclass(frozen=True)
class Search:
    """One tuned algorithm: its registry name, its grid, and its candidates (labels and their
    parameters, in grid order)."""

    name: str
    candidates: list[str]
    params: list[dict[str, Any]]
    grid: dict[str, list[Any]]
    #: the parameters every candidate shares: the listed entry's own (``user-knn(weighting=
    #: "cosine")``), those it does not tune
    fixed: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return TUNED.format(self.name)


def tune_metric(config: EvalConfig) -> tuple[str, int | None]:
    """``recall@10`` → ``("recall", 10)``; ``r_precision`` has no k.

    Raises:
        SwevalError: a metric or k the run does not compute.
    """
    text = config.tune_metric.strip().lower().replace("-", "_")
    metric, _, k = text.partition("@")
    tunable = [m for m in ALL_METRICS if m not in UNRANKED]
    if metric not in tunable or (k.isdigit() if metric in WITHOUT_K else not k.isdigit()):
        spelled = ", ".join(m if m in WITHOUT_K else f"{m}@K" for m in tunable)
        raise SwevalError(
            f"--tune-metric {config.tune_metric!r}: expected one of {spelled} (a metric where "
            "higher is better, measured with --metrics)."
        )
    if metric not in config.metrics:
        raise SwevalError(
            f"--tune-metric {config.tune_metric!r}: {metric} is not measured; add it to "
            f"--metrics (now {','.join(config.metrics)})."
        )
    if not k:
        return metric, None
    if int(k) not in config.k:
        raise SwevalError(
            f"--tune-metric {config.tune_metric!r}: k={k} is not computed; add it to --k "
            f"(now {','.join(map(str, config.k))})."
        )
    return metric, int(k)


def searches(config: EvalConfig, objective: Objective | None = None) -> list[Search]:
    """The candidates of every tuned algorithm, in grid order (the first ``--tune`` of an
    algorithm varies slowest, values in the order given): the whole grid, or the points a
    sampler drew from it (``--tune-sampler random|tpe``, :func:`sample`).

    Args:
        config: the run's configuration.
        objective: ``objective(name, params)`` → the candidate's mean metric on the windows
            before the first test fold; needed by ``tpe`` only.

    Raises:
        SwevalError: ``--tune`` for an algorithm not in ``--algorithms``, an empty grid, an
            unknown parameter or a value of the wrong type.
    """
    from sweval.evaluators.units.algorithm_spec import variant_label

    listed = [parse_variant(entry) for entry in config.algorithms]
    found = []
    for name, grid in config.tune.items():
        if name not in {listed_name for listed_name, _ in listed}:
            raise SwevalError(f"--tune {name}: {name!r} is not in --algorithms.")
        empty = [param for param, values in grid.items() if not values]
        if not grid or empty:
            raise SwevalError(f"--tune {name}.{(empty or ['?'])[0]}: give at least one value.")
        distinct = {param: _distinct(name, param, values) for param, values in grid.items()}
        grid = {param: [valid for _given, valid in pairs] for param, pairs in distinct.items()}
        fixed = _fixed_params(name, grid, listed)
        params = [_candidate(name, fixed | dict(zip(grid, values, strict=True)))
                  for values in itertools.product(*grid.values())]
        # labelled as typed (days=1 stays days=1 for a float parameter)
        labels = [variant_label(name, fixed | dict(zip(grid, values, strict=True)))
                  for values in itertools.product(*([given for given, _valid in pairs]
                                                    for pairs in distinct.values()))]
        found.append(Search(name=name, candidates=labels, params=params, grid=dict(grid),
                            fixed=fixed))
    if found:
        tune_metric(config)
        if config.tune_windows < 1:
            raise SwevalError(f"--tune-windows must be at least 1, got {config.tune_windows}.")
    if config.tune_sampler != "grid":
        found = [sample(search, config, objective) for search in found]
    return found


def _candidate(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """One grid point's parameters, validated together (a model may refuse a combination).

    Raises:
        SwevalError: naming ``--tune`` and the combination.
    """
    from sweval.evaluators.units.algorithm_spec import validated_params

    try:
        return validated_params(name, params)
    except SwevalError as exc:
        raise SwevalError(f"--tune {name}: the candidate {params} is refused: {exc}") from None


def _distinct(name: str, param: str, values: list[Any]) -> list[tuple[Any, Any]]:
    """The grid's values, each as given and as the algorithm's config reads it (``10.0`` →
    ``10`` for an integer), less those equal to an earlier one: the first spelling is kept.

    Raises:
        SwevalError: an unknown parameter or a value of the wrong type.
    """
    from sweval.algorithms.registry import algorithm_class
    from sweval.evaluators.units.algorithm_spec import validated_params

    known = algorithm_class(name).Config.model_fields
    if param not in known:
        raise SwevalError(f"--tune {name}.{param}: {name} has no parameter {param!r} "
                          f"(parameters: {', '.join(known) or 'none'}).")
    seen: dict[str, Any] = {}
    for value in values:
        try:
            valid = validated_params(name, {param: value})[param]
        except SwevalError as exc:
            raise SwevalError(f"--tune {name}.{param}: the value {value!r} is refused: {exc}") \
                from None
        seen.setdefault(json.dumps(valid, sort_keys=True), (value, valid))
    return list(seen.values())


def _fixed_params(
    name: str, grid: dict[str, list[Any]], listed: list[tuple[str, dict[str, Any]]]
) -> dict[str, Any]:
    """The parameters ``name``'s entries in ``--algorithms`` fix apart from the tuned ones:
    what every candidate keeps (``user-knn(weighting="cosine")`` tunes cosine neighbours).

    Raises:
        SwevalError: entries of ``name`` that fix different values (which one is tuned?).
    """
    from sweval.evaluators.units.algorithm_spec import variant_label

    configurations = {}
    for listed_name, params in listed:
        if listed_name == name:
            own = {param: value for param, value in params.items() if param not in grid}
            configurations[json.dumps(own, sort_keys=True, default=str)] = own
    if len(configurations) > 1:
        shown = ", ".join(variant_label(name, own) for own in configurations.values())
        raise SwevalError(
            f"--tune {name}: --algorithms lists {name} with different fixed parameters "
            f"({shown}) and --tune tunes one configuration; list one of them, or set what the "
            f"candidates share with --set {name}.PARAM=VALUE."
        )
    return next(iter(configurations.values()))


def sample(search: Search, config: EvalConfig, objective: Objective | None) -> Search:
    """The candidates an Optuna sampler draws from the grid in ``--tune-trials`` trials, seeded
    by ``--tune-seed``: ``random`` draws them independently; ``tpe`` (Tree-structured Parzen
    Estimator) steers each draw by the earlier candidates' ``objective``, which only reads the
    windows before the first test fold (a point whose unit fails there is a failed trial, and
    stays a candidate that the choices pass over). Repeated draws count as trials; the distinct
    points are kept in grid order.

    Raises:
        SwevalError: ``tpe`` without an objective.
    """
    import optuna
    from optuna.distributions import CategoricalDistribution

    if config.tune_sampler == "tpe" and objective is None:
        raise SwevalError("--tune-sampler tpe needs the run's validation windows.")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = (
        optuna.samplers.RandomSampler(seed=config.tune_seed)
        if config.tune_sampler == "random"
        else optuna.samplers.TPESampler(
            seed=config.tune_seed, n_startup_trials=max(1, config.tune_trials // 3)
        )
    )
    study = optuna.create_study(direction="maximize", sampler=sampler)
    space = {param: CategoricalDistribution(values) for param, values in search.grid.items()}
    drawn: dict[str, float] = {}
    for _ in range(config.tune_trials):
        trial = study.ask(space)
        point = json.dumps(trial.params, sort_keys=True)
        if config.tune_sampler == "tpe":
            if point not in drawn:
                drawn[point] = objective(  # type: ignore[misc]
                    search.name, search.fixed | dict(trial.params))
            if np.isnan(drawn[point]):  # a unit failed: a failed trial, kept as a candidate
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, drawn[point])
        else:
            drawn.setdefault(point, np.nan)
    keep = [i for i, params in enumerate(search.params)
            if json.dumps({p: params[p] for p in search.grid}, sort_keys=True) in drawn]
    return Search(name=search.name, candidates=[search.candidates[i] for i in keep],
                  params=[search.params[i] for i in keep], grid=search.grid,
                  fixed=search.fixed)


def with_candidates(config: EvalConfig, found: list[Search] | None = None) -> list[str]:
    """The run's algorithm entries (``--seeds`` expanded) with every candidate added (once)
    after them."""
    entries = expand_seeds(config.algorithms, config.seeds, config.params)
    for search in searches(config) if found is None else found:
        entries += [label for label in search.candidates if label not in entries]
    return entries

def ordered_labels(config: EvalConfig, found: list[Search] | None = None) -> list[str]:
    """Every algorithm of the tables in display order: the configured entries, each tuned
    algorithm right after its first entry, then the candidates not listed already."""
    tuned = {parse_variant(entry)[0] for entry in config.algorithms} & set(config.tune)
    labels: list[str] = []
    for entry in expand_seeds(config.algorithms, config.seeds, config.params):
        labels.append(entry_label(entry))
        name = parse_variant(entry)[0]
        if name in tuned and TUNED.format(name) not in labels:
            labels.append(TUNED.format(name))
    return labels + [label for label in map(entry_label, with_candidates(config, found))
                     if label not in labels]
