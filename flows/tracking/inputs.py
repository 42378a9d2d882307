"""The runs' inputs as MLflow datasets (``mlflow.data``): metadata only, never the data itself.

Every run of an evaluation (the parent and each algorithm's child) has the interaction log as an
input: a dataset named after the data (``config.dataset_name``) whose digest is the log's data
fingerprint (:meth:`InteractionLog.fingerprint`), whose source is where it came from (the file,
a URL, or the generator with its scale and seed) and whose profile holds its size and time span;
its context is ``evaluation``. A child also has one dataset per fold, named
``<data> fold <f>`` (``<data> fold <f> [<stratum>]`` for a stratum), context
``<t_f> – <t_f + tΔ>`` (UTC), whose digest identifies the fold's data: the log's fingerprint with
the window, the training window and the stratum (the fold's training and test transactions are a
function of these). MLflow keeps one dataset per (experiment, name, digest) and one input per
(dataset, run), so logging them again on a resumed run changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig

#: The context of the whole log on every run of an evaluation.
LOG_CONTEXT = "evaluation"


def utc(seconds: int) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM`` (UTC)."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%d %H:%M")


def log_profile(log: InteractionLog) -> dict[str, Any]:
    """The log's size and time span (the dataset's profile in the MLflow UI)."""
    return {
        "interactions": len(log),
        "users": log.n_users,
        "items": log.n_items,
        "first": utc(log.t_min) if len(log) else None,
        "last": utc(log.t_max) if len(log) else None,
    }


def _source(config: EvalConfig, source: str) -> Any:
    """Where the log came from, as an MLflow dataset source."""
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.sources import LocalArtifactDatasetSource

    if config.data is None:  # the generated log
        return CodeDatasetSource({
            "generator": "sweval.data.synthetic.generate_log",
            "scale": f"{config.scale:g}", "seed": str(config.seed),
        })
    if "://" in config.data:
        return resolve_dataset_source(config.data)
    from sweval.data.loaders import resolve_source
    from sweval.data.streams import is_stream, stream_name

    if is_stream(config.data):  # read once from a pipe: no path to name
        return CodeDatasetSource({"stream": stream_name(config.data)})

    return LocalArtifactDatasetSource(str(Path(resolve_source(config.data)[0]).resolve()))


def _dataset(name: str, digest: str, source: Any, profile: Mapping[str, Any] | None) -> Any:
    """A metadata-only MLflow dataset entity."""
    from mlflow.entities import Dataset

    return Dataset(
        name=name, digest=digest, source_type=source._get_source_type(),
        source=source.to_json(),
        profile=json.dumps(dict(profile)) if profile is not None else None,
    )


def _input(dataset: Any, context: str) -> Any:
    from mlflow.entities import DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    return DatasetInput(dataset, tags=[InputTag(MLFLOW_DATASET_CONTEXT, context)])


def log_input(
    config: EvalConfig, *, fingerprint: str, source: str, profile: Mapping[str, Any] | None
) -> Any:
    """The whole log as a run input (a ``DatasetInput``, context ``evaluation``)."""
    dataset = _dataset(config.dataset_name, fingerprint, _source(config, source), profile)
    return _input(dataset, LOG_CONTEXT)


def fold_digest(fingerprint: str, t_start: int, t_end: int, train_window: str | None,
                stratum: str) -> str:
    """A fold's digest: sha256 of the log's fingerprint, the window, the training window and
    the stratum, first 16 hex digits."""
    text = f"{fingerprint}|{t_start}|{t_end}|{train_window or ''}|{stratum}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fold_dataset(config: EvalConfig, fingerprint: str, fold: int, t_start: int, t_end: int,
                 stratum: str) -> tuple[str, str]:
    """A fold's dataset as MLflow names it: ``(<data> fold <f>[ [<stratum>]], digest)``, the
    same for its run input and for the metrics linked to it."""
    name = f"{config.dataset_name} fold {fold}" + ("" if stratum == "all" else f" [{stratum}]")
    return name, fold_digest(fingerprint, t_start, t_end, config.train_window, stratum)


#: The columns :func:`fold_inputs` reads.
FOLD_COLUMNS = ("fold", "t_start", "t_end", "n_eligible", "skipped")


def fold_inputs(
    config: EvalConfig,
    folds: Any,
    *,
    fingerprint: str,
    source: str,
    stratum: str,
) -> list[Any]:
    """One ``DatasetInput`` per fold, from rows with ``fold, t_start, t_end, n_eligible,
    skipped`` (an algorithm's slice of ``results.csv``, one row per fold)."""
    origin = _source(config, source)
    inputs = []
    for row in folds.itertuples(index=False):
        fold, t_start, t_end = int(row.fold), int(row.t_start), int(row.t_end)
        name, digest = fold_dataset(config, fingerprint, fold, t_start, t_end, stratum)
        profile = {
            "fold": fold, "window_start": utc(t_start), "window_end": utc(t_end),
            "train_window": config.train_window or "all history", "stratum": stratum,
            "eligible_users": int(row.n_eligible), "skipped": bool(row.skipped),
        }
        inputs.append(_input(_dataset(name, digest, origin, profile),
                             f"{utc(t_start)} – {utc(t_end)}"))
    return inputs
