"""How much history to train on: the training-window length as a swept dimension.

Each length L is the same run with ``--train-window L`` (the model of fold f is fitted on the
transactions in [t_f − L, t_f); ``None``: all history before t_f, the default), on the same
folds, windows and eligible users: only the training data change, so the rows are paired by
fold. :func:`history_table` joins the runs' tables, per (train window, algorithm, metric, k)::

    mean, ci_low, ci_high, n_folds   the run's summary.csv row (all users)
    n_train                          mean training transactions per used fold (folds.csv)
    fit_s                            total fit seconds over the folds (units.csv; stored units
                                     keep the seconds of their fit)
    loss                             mean / mean of the longest history − 1
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

#: The label of the default training window: all history before each window.
ALL_HISTORY = "all"
HISTORY_COLUMNS = ["train_window", "algorithm", "metric", "k", "mean", "ci_low", "ci_high",
                   "n_folds", "n_train", "fit_s", "loss"]


def history_table(runs: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (train window, algorithm, metric, k) of ``runs`` (label → an object with
    the ``summary``, ``units`` and ``folds`` tables of a run, e.g. :class:`sweval.Evaluation`),
    in the order of ``runs``; ``loss`` is against the last label's run (the longest history
    when the labels run from short to long, ``all`` last)."""
    parts = []
    for label, run in runs.items():
        summary = run.summary[run.summary["stratum"] == "all"]
        used = run.folds[~run.folds["skipped"].astype(bool)]
        costs = run.units.groupby("algorithm", sort=False)[["fit_s"]].sum()
        part = summary[["algorithm", "metric", "k", "mean", "ci_low", "ci_high",
                        "n_folds"]].copy()
        part.insert(0, "train_window", label)
        part["n_train"] = float(used["n_train"].mean()) if len(used) else float("nan")
        part = part.join(costs, on="algorithm")
        parts.append(part)
    table = pd.concat(parts, ignore_index=True)
    longest = table[table["train_window"] == list(runs)[-1]].set_index(
        ["algorithm", "metric", "k"])["mean"]
    reference = longest.reindex(pd.MultiIndex.from_frame(table[["algorithm", "metric", "k"]]))
    table["loss"] = table["mean"].to_numpy() / reference.to_numpy() - 1
    return table[HISTORY_COLUMNS]
