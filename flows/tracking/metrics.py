"""Result rows as MLflow metrics: the metric keys, one fold's stepped metrics, per-fold tables."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from typing import Any

import pandas as pd

#: MLflow accepts at most 1000 metrics per log_batch call.
MAX_BATCH = 900


def key_part(label: str) -> str:
    """A label as part of an MLflow key (keys allow letters, digits and ``_-. :/``): a variant's
    ``item-knn(n_neighbors=50)`` becomes ``item-knn_n_neighbors_50``."""
    return re.sub(r"_+$", "", re.sub(r"[^A-Za-z0-9_\-. :/]+", "_", label))


def metric_key(metric: str, k: Any) -> str:
    """The MLflow key of a metric at a cut-off: ``recall_at_10``; ``r_precision`` has no k."""
    if k is None or (isinstance(k, float) and math.isnan(k)) or k is pd.NA:
        return metric
    return f"{metric}_at_{int(k)}"


def fold_metrics(fold: int, rows: list[Mapping[str, Any]]) -> list[Any]:
    """One fold's stepped metrics: every non-skipped value, n_eligible and fold_t_start."""
    from mlflow.entities import Metric

    first = rows[0]
    t_start = int(first["t_start"])
    # MLflow refuses negative timestamps: windows before 1970 keep their real start in
    # fold_t_start and are stamped at the epoch.
    timestamp = max(t_start, 0) * 1000
    metrics = {
        "n_eligible": float(first["n_eligible"]),
        "fold_t_start": float(t_start),
    }
    for row in rows:
        if _truthy(row["skipped"]):
            continue
        value = row["value"]
        if value is None or pd.isna(value):
            continue  # no user in the group: nothing to plot
        metrics[metric_key(row["metric"], row["k"])] = float(value)
    return [Metric(key, value, timestamp, fold) for key, value in metrics.items()]


def summary_metrics(part: pd.DataFrame, timestamp: int) -> list[Any]:
    """A child's summary metrics at step 0 from its rows of summary.csv: ``mean_<key>``,
    ``std_<key>``, ``ci_low_<key>``, ``ci_high_<key>`` (where defined), ``n_folds``,
    ``n_skipped``."""
    from mlflow.entities import Metric

    metrics = []
    for row in part.to_dict("records"):
        key = metric_key(row["metric"], row["k"])
        for stat in ("mean", "std", "ci_low", "ci_high"):
            if row.get(stat) is not None and not pd.isna(row[stat]):
                metrics.append(Metric(f"{stat}_{key}", float(row[stat]), timestamp, 0))
    if len(part):
        metrics.append(Metric("n_folds", float(part["n_folds"].max()), timestamp, 0))
        metrics.append(Metric("n_skipped", float(part["n_skipped"].max()), timestamp, 0))
    return metrics


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return bool(value)


def per_fold_tables(results: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """Each (algorithm, stratum) slice's table: one row per fold, one column per MLflow metric
    key, in the slice's order of keys. Pivoted once for all slices: a run of 500 strata has
    1,000, and a pivot each took 17 s."""
    if results.empty:
        return {}
    frame = results.copy()
    frame["key"] = [metric_key(m, k) for m, k in zip(frame["metric"], frame["k"], strict=True)]
    ids = ["algorithm", "stratum"]
    wide = frame.groupby([*ids, "fold", "key"])["value"].first().unstack("key")
    info = frame.groupby([*ids, "fold"])[["t_start", "t_end", "n_eligible", "skipped"]].first()
    table = info.join(wide)
    tables = {}
    for ident, part in frame.groupby(ids, sort=False):
        ordered = list(dict.fromkeys(part["key"]))
        rows = table.xs(ident, level=ids)
        tables[ident] = rows[[*info.columns, *ordered]].reset_index()
    return tables


def now_ms() -> int:
    """Milliseconds since the epoch, as MLflow stamps metrics."""
    return int(time.time() * 1000)


def parent_device_tags(devices: Mapping[str, str]) -> list[tuple[str, str]]:
    """The parent run's tags of where each algorithm ran: ``sweval.device.<algorithm>``, and
    ``sweval.als_device`` for ALS."""
    tags = [(f"sweval.device.{key_part(name)}", device) for name, device in devices.items()]
    if "als" in devices:
        tags.append(("sweval.als_device", devices["als"]))
    return tags
