"""The end of an evaluation's MLflow runs: each child's summaries, tables and fold inputs, then
the parent's artifacts, tags and status (:meth:`flows.tracking.tracker.Tracker.finish`)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from sweval.flows.tracking.inputs import FOLD_COLUMNS, fold_inputs
from sweval.flows.tracking.metrics import (
    MAX_BATCH,
    now_ms,
    parent_device_tags,
    per_fold_tables,
    summary_metrics,
)
from sweval.flows.tracking.models import finalize_models, linked
from sweval.flows.tracking.note import NOTE_TAG, run_note
from sweval.flows.tracking.retraining import retraining_metrics, retraining_rows
from sweval.flows.tracking.view import publish_view

if TYPE_CHECKING:
    from sweval.flows.tracking.tracker import Tracker


def _slices(frame: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """A table's rows of each (algorithm, stratum), split once (not filtered once a child)."""
    if frame.empty:
        return {}
    return dict(iter(frame.groupby(["algorithm", "stratum"], sort=False)))


def log_frame(tracker: Tracker, run_id: str, frame: pd.DataFrame, name: str) -> None:
    """Log ``frame`` as the CSV artifact ``name``. A child's artifact store is known from
    its creation: ``MlflowClient.log_artifact`` would fetch the whole run to find it (14 ms
    a child on a local SQLite store)."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.utils.uri import add_databricks_profile_info_to_artifact_uri

    with tempfile.TemporaryDirectory(prefix="sweval-mlflow-") as tmp:
        path = Path(tmp) / name
        frame.to_csv(path, index=False, float_format="%.10g")
        uri = tracker.artifact_uris.get(run_id)
        if uri is None:
            tracker.client.log_artifact(run_id, str(path))
        else:
            uri = add_databricks_profile_info_to_artifact_uri(uri, tracker.uri)
            get_artifact_repository(uri, tracking_uri=tracker.uri).log_artifact(str(path))


def finish_children(tracker: Tracker, results: pd.DataFrame, summary: pd.DataFrame,
                    devices: Mapping[str, str], files: list[Path]) -> None:
    """Each child run: its summary metrics and tags (device, cold-user fallback) in one
    ``log_batch``, ``per_fold.csv``, the log and each fold's window as inputs, its
    ``tuning.csv`` and retraining tables where it has them; then FINISHED."""
    from mlflow.entities import RunTag

    client = tracker.client
    tuning = next((pd.read_csv(path) for path in files
                   if path.name == "tuning.csv" and path.exists()), None)
    now = now_ms()
    summaries = _slices(summary)
    slices = _slices(results)
    per_fold = per_fold_tables(results)
    for (algorithm, stratum), run_id in tracker.children.items():
        part = summaries.get((algorithm, stratum), summary.iloc[:0])
        metrics = summary_metrics(part, now)
        if stratum == "all":  # --horizon, --cadence: curves against age and cadence
            metrics += retraining_metrics(files, algorithm, now)
        logged = tracker.summaries.get(run_id, {})
        metrics = linked([m for m in metrics if logged.get(m.key) != m.value],
                         tracker.models.get((algorithm, stratum)),
                         (tracker.config.dataset_name, tracker.fingerprint))
        tags = [RunTag("sweval.device", devices[algorithm])] if algorithm in devices else []
        if "fallback" in part and part["fallback"].notna().any():  # --cold-users
            tags.append(RunTag("sweval.fallback", str(part["fallback"].dropna().iloc[0])))
        first, rest = metrics[:MAX_BATCH], metrics[MAX_BATCH:]
        if first or tags:  # the device tag goes with the summaries
            client.log_batch(run_id, metrics=first, tags=tags)
        for lo in range(0, len(rest), MAX_BATCH):
            client.log_batch(run_id, metrics=rest[lo : lo + MAX_BATCH])
        mine = slices.get((algorithm, stratum), results.iloc[:0])
        log_frame(tracker, run_id, per_fold.get((algorithm, stratum), pd.DataFrame()),
                  "per_fold.csv")
        inputs = [tracker.data_input]  # the log, then (SW-EVAL) each fold's window
        if tracker.mode in ("batch", "rolling") and len(mine):
            inputs += fold_inputs(
                tracker.config,
                mine[list(FOLD_COLUMNS)].drop_duplicates("fold").sort_values("fold"),
                fingerprint=tracker.fingerprint, source=tracker.source, stratum=stratum)
        client.log_inputs(run_id, datasets=inputs)
        if tuning is not None and algorithm in set(tuning["algorithm"]):
            # a tuned algorithm: which candidate each fold used, and why
            chosen = tuning[(tuning["algorithm"] == algorithm) & (tuning["stratum"] == stratum)]
            log_frame(tracker, run_id, chosen, "tuning.csv")
        if stratum == "all":
            for name, rows in retraining_rows(files, algorithm).items():
                log_frame(tracker, run_id, rows, name)
        client.set_terminated(run_id, "FINISHED")


def finish_parent(tracker: Tracker, summary: pd.DataFrame, devices: Mapping[str, str],
                  files: list[Path], late_files: Callable[[], Iterable[Path]], *,
                  n_folds: int | None, comparison_view: bool) -> None:
    """The parent run: the run's files as artifacts (``late_files`` asked last: the report
    may still be being drawn), its device, fold-count and note tags in one ``log_batch``, the
    logged models READY, FINISHED, and (``comparison_view``) the experiment's saved view
    ``sweval-latest`` pointed at it."""
    from mlflow.entities import RunTag

    client = tracker.client
    for path in [*files, *late_files()]:
        if Path(path).exists():
            client.log_artifact(tracker.parent_run_id, str(path))
    parent_tags = [RunTag(key, value) for key, value in parent_device_tags(devices)]
    if n_folds is not None:
        parent_tags.append(RunTag("sweval.n_folds", str(n_folds)))
    if tracker.mode in ("batch", "rolling"):
        parent_tags.append(RunTag(NOTE_TAG, run_note(tracker.config, summary, n_folds=n_folds)))
    if parent_tags:
        client.log_batch(tracker.parent_run_id, tags=parent_tags)
    tracker.devices_tagged.update(devices)
    finalize_models(client, tracker.models, "READY")
    tracker.stop_system_metrics()
    client.set_terminated(tracker.parent_run_id, "FINISHED")
    if comparison_view:
        publish_view(client, tracker.experiment_id, tracker.parent_run_id, tracker.run_name)
