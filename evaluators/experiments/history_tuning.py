"""The training-window length chosen per fold like any hyper-parameter: nested, on the timeline.

A sweep of lengths L_1 … L_n (``--train-window 30D,90D,all``) is n runs on the same folds. For
each algorithm a, its n runs are the candidates ``a[train=L]`` of one search of
:mod:`evaluators.stats.tuning`, and ``a[tuned]`` is scored on test fold f with the length whose
mean ``--tune-metric`` over the validation windows before f is best (``--tune-windows`` M,
``--tune-mode``; ties to the length listed first)::

    rolling (default)   fold f: the lengths' values on folds f−M .. f−1
    once                every fold ≥ M: their values on folds 0 .. M−1

Fold f−1's window is [t_{f−1}, t_f): nothing at or after t_f reaches the choice. The tuned
series' rows join the sweep's table (:func:`evaluators.experiments.history.history_table`) as
``train_window = "tuned"``: its mean, interval and folds, ``fit_s`` the fits of *every* length
(choosing fits them all), ``n_train`` empty (it changes from fold to fold), ``loss`` against the
last length. The choices are ``history_tuning.csv``: one row per (fold, algorithm, length,
stratum), the columns of ``tuning.csv`` with the length for the candidate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.stats.resampling import Bootstrap
from sweval.evaluators.stats.significance import with_intervals
from sweval.evaluators.stats.tuning import tune
from sweval.evaluators.stats.tuning_candidates import Search, tune_metric

#: The label of the tuned series in ``history.csv``'s ``train_window`` column.
TUNED_LENGTH = "tuned"
FILE = "history_tuning.csv"
CHOICE_COLUMNS = ["fold", "algorithm", "train_window", "validation_value",
                  "n_validation_windows", "chosen", "stratum"]


def candidate(algorithm: str, length: str) -> str:
    """The label of ``algorithm`` trained on ``length`` among the candidates of its search."""
    return f"{algorithm}[train={length}]"


def tuned_history(runs: Mapping[str, Any], config: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tuned series' rows for ``history.csv`` (its columns) and the choices
    (:data:`CHOICE_COLUMNS`), from ``runs`` (length → an object with the ``results`` and
    ``units`` tables of a run) and ``config``'s ``--tune-metric``, ``--tune-windows`` and
    ``--tune-mode`` (and its interval settings).

    Raises:
        SwevalError: fewer than two lengths, or a ``--tune-metric`` the runs do not compute.
    """
    lengths = list(runs)
    if len(lengths) < 2:
        raise SwevalError("a tuned training window needs at least two lengths to choose from")
    tune_metric(config)
    combined = pd.concat([run.results.assign(algorithm=run.results["algorithm"].map(
        lambda name, length=length: candidate(name, length))) for length, run in runs.items()],
        ignore_index=True)
    algorithms = list(dict.fromkeys(runs[lengths[0]].results["algorithm"]))
    found = [Search(name=name, candidates=[candidate(name, length) for length in lengths],
                    params=[{"train_window": length} for length in lengths],
                    grid={"train_window": lengths}) for name in algorithms]
    tuned, choices = tune(combined, config, found)
    return _rows(tuned, runs, config, found), _choices(choices, found)


def _rows(tuned: pd.DataFrame, runs: Mapping[str, Any], config: Any,
          found: list[Search]) -> pd.DataFrame:
    """``history.csv``'s rows of the tuned series (stratum ``all``)."""
    from sweval.evaluators.experiments.history import HISTORY_COLUMNS
    from sweval.evaluators.run.results import summarise

    summary = with_intervals(summarise(tuned), tuned, Bootstrap.of(config))
    summary = summary[summary["stratum"] == "all"].copy()
    base = {search.label: search.name for search in found}
    summary["algorithm"] = summary["algorithm"].map(base)
    summary.insert(0, "train_window", TUNED_LENGTH)
    summary["n_train"] = float("nan")
    fits = sum(run.units.groupby("algorithm", sort=False)["fit_s"].sum() for run in runs.values())
    summary = summary.join(fits.rename("fit_s"), on="algorithm")
    last = runs[list(runs)[-1]].summary
    last = last[last["stratum"] == "all"].set_index(["algorithm", "metric", "k"])["mean"]
    reference = last.reindex(pd.MultiIndex.from_frame(summary[["algorithm", "metric", "k"]]))
    summary["loss"] = summary["mean"].to_numpy() / reference.to_numpy() - 1
    return summary[HISTORY_COLUMNS].reset_index(drop=True)


def _choices(choices: pd.DataFrame, found: list[Search]) -> pd.DataFrame:
    """``tuning.csv``'s rows with the algorithm's own name and the length for the candidate."""
    base = {search.label: search.name for search in found}
    frame = choices.assign(
        algorithm=choices["algorithm"].map(base),
        train_window=[json.loads(params)["train_window"] for params in choices["params"]])
    return frame[CHOICE_COLUMNS].reset_index(drop=True)

