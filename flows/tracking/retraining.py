"""MLflow records of a run's staleness and cadence tables (``--horizon``, ``--cadence``).

Each algorithm's child run gets its curves as stepped metrics, so MLflow's charts draw them:

    stale_<metric>_at_<k>        step = model age in windows: the stale models' mean
    stale_loss_<metric>_at_<k>   step = age: mean / mean of models retrained before the window − 1
    cadence_<metric>_at_<k>      step = cadence in windows: the series' mean
    cadence_fit_s                step = cadence: the fit seconds it costs
    cadence_update_<metric>_at_<k>, cadence_update_s
                                 the same for the update policy (``--update``): the series'
                                 mean, and its fit + update seconds

and its rows of ``staleness.csv`` and ``cadence.csv`` as artifacts (the parent run has the whole
tables, with the run's other files).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.flows.tracking.metrics import metric_key


def _table(files: Iterable[Path], name: str) -> pd.DataFrame | None:
    path = next((Path(p) for p in files if Path(p).name == name), None)
    return pd.read_csv(path) if path is not None and path.exists() else None


def retraining_metrics(files: Iterable[Path], algorithm: str, now: int) -> list[Any]:
    """The stepped metrics of ``algorithm`` from the run's summary files (none without them)."""
    from mlflow.entities import Metric

    files = list(files)
    metrics: list[Any] = []
    staleness = _table(files, "staleness_summary.csv")
    if staleness is not None:
        for row in staleness[staleness["algorithm"] == algorithm].to_dict("records"):
            key = metric_key(row["metric"], None if pd.isna(row["k"]) else int(row["k"]))
            step = int(row["age"])
            metrics.append(Metric(f"stale_{key}", float(row["mean"]), now, step))
            if not pd.isna(row["loss"]):
                metrics.append(Metric(f"stale_loss_{key}", float(row["loss"]), now, step))
    cadence = _table(files, "cadence_summary.csv")
    if cadence is not None:
        mine = cadence[cadence["algorithm"] == algorithm]
        policy = mine["policy"] if "policy" in mine else pd.Series("retrain", index=mine.index)
        for name, part in mine.groupby(policy, sort=False):
            prefix = "cadence" if name == "retrain" else f"cadence_{name}"
            for row in part.to_dict("records"):
                key = metric_key(row["metric"], None if pd.isna(row["k"]) else int(row["k"]))
                metrics.append(Metric(f"{prefix}_{key}", float(row["mean"]), now,
                                      int(row["cadence"])))
            for row in part.drop_duplicates("cadence").to_dict("records"):
                cost = float(row["fit_s"]) + float(row.get("update_s", 0.0))
                metrics.append(Metric("cadence_fit_s" if name == "retrain" else
                                      f"cadence_{name}_s", cost, now, int(row["cadence"])))
    return metrics


def retraining_rows(files: Iterable[Path], algorithm: str) -> dict[str, pd.DataFrame]:
    """``algorithm``'s rows of ``staleness.csv`` and ``cadence.csv``, by file name."""
    files = list(files)
    found = {}
    for name in ("staleness.csv", "cadence.csv"):
        table = _table(files, name)
        if table is not None:
            found[name] = table[table["algorithm"] == algorithm]
    return found
