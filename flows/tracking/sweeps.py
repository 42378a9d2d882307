"""MLflow records of a sweep of ``sweval run`` (``--window 1D,3D,7D``, ``--train-window
30D,90D,all``): each value's run is an evaluation of its own (a parent run with a child per
algorithm, :mod:`flows.tracking.tracker`); once every value has run, each of those parent runs
gets::

    tags       sweval.sweep (window | train_window), sweval.sweep_values (the list as given),
               sweval.sweep_value (this run's value)
    artifacts  sweep/<file>: the sweep's tables (widths.csv, widths_kendall.csv, history.csv,
               history_tuning.csv)
    metrics    with --window: kendall_tau_<metric>_at_<k>_vs_<other width>, Kendall's τ between
               this width's ranking and each other width's
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from sweval.evaluators.config.model import EvalConfig
from sweval.flows.tracking.metrics import metric_key
from sweval.flows.tracking.records import STATE_FILE, read_state


def width_metrics(kendall: pd.DataFrame, width: str) -> list[tuple[str, float]]:
    """The τ metrics of ``width``'s parent run (see the module docstring), NaN left out."""
    metrics = []
    for row in kendall.itertuples():
        if width not in (row.window_a, row.window_b) or math.isnan(row.tau):
            continue
        other = row.window_b if row.window_a == width else row.window_a
        k = None if pd.isna(row.k) else int(row.k)
        metrics.append((f"kendall_tau_{metric_key(row.metric, k)}_vs_{other}", float(row.tau)))
    return metrics


def log_sweep(config: EvalConfig, dimension: str, directories: Mapping[str, Path],
              files: Sequence[Path], metrics: Mapping[str, list[tuple[str, float]]]) -> int:
    """Add the sweep's tags, tables and ``metrics`` (per value) to each value's parent run (its
    ``tracking.json``); the number of runs completed (a value without a record is passed)."""
    import time

    from mlflow.entities import Metric, RunTag

    from sweval.flows.tracking.client import open_client, resolve_tracking_uri

    client = open_client(resolve_tracking_uri(config))
    values = ",".join(directories)
    now = int(time.time() * 1000)
    logged = 0
    for value, directory in directories.items():
        run_id = read_state(Path(directory) / STATE_FILE).get("parent_run_id")
        if run_id is None:
            continue
        tags = [RunTag("sweval.sweep", dimension), RunTag("sweval.sweep_values", values),
                RunTag("sweval.sweep_value", value)]
        client.log_batch(run_id, metrics=[Metric(key, number, now, 0)
                                          for key, number in metrics.get(value, [])],
                         tags=tags)
        for path in files:
            client.log_artifact(run_id, str(path), artifact_path="sweep")
        logged += 1
    return logged
