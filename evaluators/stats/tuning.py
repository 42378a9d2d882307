"""Honest hyper-parameter tuning on the timeline: nested choice on the windows before each fold.

A grid (``--tune item-knn.n_neighbors=10,50,200``, the product of every ``--tune`` of one
algorithm) makes candidates, each an ordinary variant whose units every fold computes. The
tuned algorithm ``item-knn[tuned]`` is then scored on test fold f with the candidate chosen on
validation windows that all end at or before t_f::

    rolling (default)   fold f: the M folds before f (f−M .. f−1; skipped ones ignored)
    once                every fold ≥ M: the M folds before the first test fold (0 .. M−1)

    choice = the candidate with the best mean ``--tune-metric`` over those windows;
             ties (equal to 12 significant digits) go to the earlier candidate in grid order

Fold f−1's window is [t_{f−1}, t_f) and its model trains on D_{t_{f−1}}: nothing at or after t_f
reaches the choice. Folds without a validation window (the first M, or M skipped ones) have no
tuned value and say why. Beside the tuned series, the *oracle* (the candidate with the best mean
over the tuned series' test folds themselves, what picking by the test results gives) and its
*optimism* = oracle mean / tuned mean − 1.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.seeds import expand_seeds
from sweval.evaluators.config.text import entry_label, parse_variant
from sweval.evaluators.metrics.names import ALL_METRICS, UNRANKED, WITHOUT_K

#: ``objective(name, params)``: a candidate's mean metric on the windows before the first test
#: fold (what ``--tune-sampler tpe`` steers by).
Objective = Callable[[str, dict[str, Any]], float]

TUNED = "{}[tuned]"
TUNING_COLUMNS = [
    "fold", "algorithm", "candidate", "params", "validation_value", "n_validation_windows",
    "chosen", "stratum",
]
OPTIMISM_COLUMNS = [
    "algorithm", "metric", "k", "tuned_mean", "n_folds", "oracle", "oracle_mean", "optimism",
]


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


def fold_values(
    results: pd.DataFrame, metric: str, k: int | None, stratum: str = "all"
) -> pd.DataFrame:
    """fold × algorithm values of one metric (NaN for skipped folds) in one stratum."""
    rows = results[(results["stratum"] == stratum) & (results["metric"] == metric)]
    rows = rows[rows["k"].isna()] if k is None else rows[rows["k"] == k]
    return rows.pivot_table(index="fold", columns="algorithm", values="value", dropna=False)


def validation_folds(folds: list[int], used: set[int], fold: int, config: EvalConfig) -> list[int]:
    """The windows the choice for test fold ``fold`` reads (all end at or before its start)."""
    m = config.tune_windows
    if config.tune_mode == "once":
        first = folds[:m]
        return [f for f in first if f in used] if fold >= m else []
    return [f for f in range(fold - m, fold) if f in used] if fold >= m else []


def tune(
    results: pd.DataFrame, config: EvalConfig, found: list[Search] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tuned series' rows (every metric, relabelled from the chosen candidate) and
    ``tuning.csv``: one row per (test fold, algorithm, candidate, stratum).

    Each stratum chooses on its own validation values (``--stratify-by``: a stratum is the
    protocol run on that policy's data, or on its users), so the tuned series of a stratum
    may use another candidate than that of all users on the same fold.

    A candidate whose unit failed on one of a choice's validation windows has no mean there
    (``validation_value`` empty, ``n_validation_windows`` counts the windows it has) and cannot
    be chosen: means over different windows do not compare. When the chosen candidate failed on
    the test fold itself, or every candidate failed on a window, the tuned series has no value
    on that fold and its ``skip_reason`` says so."""
    metric, k = tune_metric(config)
    folds = sorted(int(f) for f in results["fold"].unique())
    found = searches(config) if found is None else found
    added, choices = [], []
    for stratum in dict.fromkeys(results["stratum"]):
        mine = results[results["stratum"] == stratum]
        values = fold_values(mine, metric, k, stratum)
        used = {int(f) for f in mine.loc[~mine["skipped"].astype(bool), "fold"].unique()}
        for search in found:
            valid = values.reindex(index=folds, columns=search.candidates)
            for fold in folds:
                windows = validation_folds(folds, used, fold, config)  # not skipped by u_min
                window_values = valid.loc[windows].to_numpy()  # windows × candidates
                counts = np.isfinite(window_values).sum(axis=0)  # a failed unit has no value
                means = [float(window_values[:, i].mean())
                         if windows and counts[i] == len(windows) else np.nan
                         for i in range(len(search.candidates))]
                rounded = np.round(means, 12)
                chosen = int(np.nanargmax(rounded)) if not np.isnan(rounded).all() else None
                for i, (label, params) in enumerate(
                        zip(search.candidates, search.params, strict=True)):
                    choices.append({
                        "fold": fold, "algorithm": search.label, "candidate": label,
                        "params": json.dumps(params, sort_keys=True),
                        "validation_value": means[i], "n_validation_windows": int(counts[i]),
                        "chosen": i == chosen, "stratum": stratum,
                    })
                added.append(_tuned_rows(mine, fold, search, chosen, used, bool(windows),
                                         config))
    tuned = pd.concat(added, ignore_index=True) if added else results.iloc[:0]
    return tuned, pd.DataFrame(choices, columns=TUNING_COLUMNS)


def _tuned_rows(
    results: pd.DataFrame, fold: int, search: Search, chosen: int | None, used: set[int],
    has_windows: bool, config: EvalConfig,
) -> pd.DataFrame:
    """The tuned series' rows on one fold: the chosen candidate's, relabelled; without a value
    (and the reason) when the fold is skipped, no candidate could be chosen or the chosen one's
    unit failed here. Rows without a value copy the fold's shape (strata, metrics, users) from
    the first candidate with rows on it, else from any algorithm's."""
    on_fold = results[results["fold"] == fold]
    label = search.candidates[chosen] if chosen is not None else None
    rows = on_fold[on_fold["algorithm"] == label]
    if fold in used and label is not None and len(rows):
        return rows.assign(algorithm=search.label)
    present = [c for c in search.candidates if (on_fold["algorithm"] == c).any()]
    template = present[0] if present else (on_fold["algorithm"].iloc[0] if len(on_fold) else None)
    rows = on_fold[on_fold["algorithm"] == template].copy()
    if fold not in used:
        reason = rows["skip_reason"]  # the fold's own (u_min)
    elif not has_windows:
        reason = (f"no validation window before this fold (--tune-windows "
                  f"{config.tune_windows}, --tune-mode {config.tune_mode})")
    elif label is None:
        reason = "every candidate failed on a validation window (see the failed units)"
    else:
        reason = f"the chosen candidate {label} failed on this fold"
    return rows.assign(algorithm=search.label, value=np.nan, skipped=True, skip_reason=reason)


def optimism(
    results: pd.DataFrame, config: EvalConfig, found: list[Search] | None = None
) -> pd.DataFrame:
    """Per tuned algorithm and k: the tuned mean, the oracle candidate (best mean over the same
    test folds) and optimism = oracle mean / tuned mean − 1 (Recall@k), exactly 0 when the two
    means agree to 12 decimals (as choices are compared). It is negative when the tuned series,
    which may switch candidates from fold to fold, beats every single candidate. A candidate
    without a value on one of those folds (its unit failed) cannot be the oracle."""
    rows = []
    for search in searches(config) if found is None else found:
        for k in config.k:
            values = fold_values(results, "recall", k)
            tuned = values[search.label].dropna()
            if tuned.empty:
                continue
            # a candidate whose unit failed on one of these folds has no mean over them
            means = values.reindex(columns=search.candidates).loc[tuned.index].mean(skipna=False)
            if means.isna().all():
                continue
            best = search.candidates[int(np.nanargmax(np.round(means.to_numpy(), 12)))]
            tuned_mean, oracle_mean = float(tuned.mean()), float(means[best])
            if tuned_mean <= 0:
                ratio = np.nan
            elif round(oracle_mean, 12) == round(tuned_mean, 12):  # the same values, summed
                ratio = 0.0                                         # in another order
            else:
                ratio = oracle_mean / tuned_mean - 1
            rows.append({
                "algorithm": search.label, "metric": "recall", "k": k, "tuned_mean": tuned_mean,
                "n_folds": len(tuned), "oracle": best, "oracle_mean": oracle_mean,
                "optimism": ratio,
            })
    return pd.DataFrame(rows, columns=OPTIMISM_COLUMNS)


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
