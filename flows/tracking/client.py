"""Opening the MLflow store: the tracking URI, the experiment, an ``MlflowClient``, a run."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.evaluators.config import EvalConfig
from sweval.flows.settings import default_tracking_uri, sweval_home


def resolve_uri(given: str | None = None) -> str:
    """``given`` (``--tracking-uri``), else ``MLFLOW_TRACKING_URI``, else the local sqlite store."""
    return given or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()


def resolve_tracking_uri(config: EvalConfig) -> str:
    """``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the local sqlite store."""
    return resolve_uri(config.tracking_uri)


def experiment_name(config: EvalConfig) -> str:
    """``--experiment``, else ``sweval/<dataset>``."""
    return config.experiment or f"sweval/{config.dataset_name}"


def artifact_root(uri: str) -> Path | None:
    """Where experiments created by SW-EVAL keep their artifacts, explicitly (never the CWD).

    A sqlite store keeps them next to the database (``<db dir>/mlartifacts``); a tracking
    server decides itself (None), but for ``sweval up``'s, which serves a local store: its
    store's; another database URI uses ``$SWEVAL_HOME/mlartifacts``.
    """
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts"
    if uri.split(":", 1)[0] in ("http", "https", "databricks"):
        store = backing_store(uri)
        return None if store == uri else artifact_root(store)
    return sweval_home() / "mlartifacts"


def backing_store(uri: str) -> str:
    """The store behind ``uri``: the backend of ``sweval up``'s MLflow server when ``uri`` is
    that server (:mod:`flows.servers`), else ``uri``. Experiments and runs created through the
    server then keep their artifacts where a plain run keeps them, and a run resumed across
    ``sweval up``/``down`` reopens its parent run."""
    if uri.split(":", 1)[0] not in ("http", "https"):
        return uri
    from sweval.flows.server_state import served_store

    return served_store(uri) or uri


def open_client(uri: str) -> Any:
    """An ``MlflowClient`` on ``uri`` (a SQLite store's folder is created first).

    MLflow keeps one store object per URI for the process, so the first call pays for importing
    MLflow and for the store's set-up (its schema check, or its creation on the first run) and
    later calls are cheap: :mod:`flows.startup` makes that first call while Prefect's temporary
    server starts.
    """
    from mlflow import MlflowClient

    _quiet_mlflow_logging()
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def _quiet_mlflow_logging() -> None:
    """MLflow and alembic announce database migrations at INFO; keep the terminal for results."""
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)


def reread_telemetry_setting() -> None:
    """Decide again whether MLflow sends telemetry, from this process's environment as it is
    now (MLflow decides once, at its import; the warm process's children take on their
    client's environment after it, :mod:`flows.warm_server`)."""
    from mlflow.telemetry import set_telemetry_client

    set_telemetry_client()


def get_run(client: Any, run_id: str) -> Any:
    """The run ``run_id`` (an ``mlflow.entities.Run``).

    Raises:
        SwevalError: no such run in the store.
    """
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException as exc:
        raise SwevalError(f"MLflow run {run_id}: not found ({exc.message}).") from exc


#: The experiment tag MLflow 3's UI reads to open an experiment on its runs ("Model training")
#: rather than on the GenAI overview (traces), and its value for model development.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_DEVELOPMENT = "custom_model_development"


def ensure_experiment(client: Any, name: str, root: Path | None) -> str:
    """The id of the experiment ``name``: restored when deleted, created (artifacts under
    ``root``) when missing; tagged as model development unless it has a kind already (one a
    user chose in the UI stays)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        if experiment.lifecycle_stage == "deleted":
            client.restore_experiment(experiment.experiment_id)
        if EXPERIMENT_KIND_TAG not in experiment.tags:
            client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG,
                                      MODEL_DEVELOPMENT)
        return str(experiment.experiment_id)
    location = (root / name.replace("/", "_")).resolve().as_uri() if root is not None else None
    try:
        return str(client.create_experiment(name, artifact_location=location,
                                            tags={EXPERIMENT_KIND_TAG: MODEL_DEVELOPMENT}))
    except Exception:  # created meanwhile by a concurrent run
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return str(experiment.experiment_id)


def active_run(client: Any, run_id: str | None) -> Any:
    """The run ``run_id`` when it exists and is not deleted, else None."""
    if not run_id:
        return None
    try:
        run = client.get_run(run_id)
    except Exception:
        return None
    return run if run.info.lifecycle_stage == "active" else None
