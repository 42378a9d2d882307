"""Opening the MLflow store: the tracking URI, the experiment, an ``MlflowClient``, a run."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.flows.settings import default_tracking_uri, sweval_home
from sweval.flows.tracking.sqlite_store import (
    prepare_sqlite_store,
    quiet_mlflow_logging,
    sqlite_artifact_root,
)

_log = logging.getLogger(__name__)


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
        return sqlite_artifact_root(Path(uri.removeprefix("sqlite:///")))
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
    from sweval.evaluators.state import SERVERS

    # read here, not through flows.servers (which imports this module): no import cycle
    state = SERVERS.read(sweval_home())
    server = state.get("mlflow")
    if isinstance(server, dict) and server.get("url") == uri.rstrip("/"):
        return state.get("mlflow_store") or uri
    return uri


#: Lines of an MLflow (SQLAlchemy) error that repeat its statement, parameters or a link.
_NOISE = ("[SQL:", "[parameters:", "(Background on this error",
          "(raised as a result of Query-invoked autoflush")


def said(exc: BaseException) -> str:
    """An MLflow store's error in one line: ``the disk that holds it is full`` for a full disk
    (SQLite's "database or disk is full", ENOSPC), else the error's type and message without
    the SQL statement, its parameters and SQLAlchemy's links (a full disk printed them with
    four tracebacks)."""
    text = str(exc)
    if getattr(exc, "errno", None) == 28 or any(
            sign in text for sign in ("database or disk is full", "No space left on device")):
        return ("the disk that holds it is full (no space left on the device); free some space "
                "and rerun")
    lines = [line.strip() for line in text.splitlines()
             if line.strip() and not line.strip().startswith(_NOISE)]
    return f"{type(exc).__name__}: {' '.join(lines)}"


class SilentTracker(SwevalError):
    """The tracking server accepts connections but does not answer (:mod:`flows.answers`)."""


def stopped_answering(uri: str, exc: BaseException) -> SilentTracker | None:
    """The error to say when ``exc``, an MLflow client's error, means that the server took the
    request and sent nothing back in time (every try timed out, ``MLFLOW_HTTP_REQUEST_TIMEOUT``
    each: :data:`flows.settings.PREFECT_DEFAULTS`); None for any other error. MLflow says it
    only in its message (requests' ``ReadTimeoutError`` inside its own exception)."""
    from sweval.evaluators.wording import shown_uri

    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen)
        if isinstance(seen, TimeoutError) or any(
                mark in text for mark in ("Read timed out", "ReadTimeoutError",
                                          "failed with timeout exception")):
            seconds = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")
            return SilentTracker(shown_uri(
                f"MLflow tracking at {uri}: the server stopped answering (no response within "
                f"{seconds} s, every try; it may be hung or stopped). Check it "
                "(`sweval status`), or run with --no-tracking."))
        seen = seen.__cause__ or seen.__context__
    return None


def check_answers(uri: str) -> None:
    """Make sure the tracking server at ``uri`` (an HTTP(S) URI; other stores are files or
    databases) answers within :data:`~flows.answers.ANSWER_TIMEOUT_S`.

    Raises:
        SilentTracker: it accepts connections but sends nothing back in that time.
    """
    if uri.split(":", 1)[0] not in ("http", "https"):
        return
    from sweval.evaluators.wording import shown_uri
    from sweval.flows.answers import ANSWER_TIMEOUT_S, silent

    if silent(uri.rstrip("/") + "/health"):
        raise SilentTracker(shown_uri(
            f"MLflow tracking at {uri}: the server does not answer (no response within "
            f"{ANSWER_TIMEOUT_S:g} s; it may be hung or stopped). Check it (`sweval status`), "
            "or run with --no-tracking."))


def open_client(uri: str) -> Any:
    """An ``MlflowClient`` on ``uri`` (a SQLite store's folder is created first).

    MLflow keeps one store object per URI for the process, so the first call pays for importing
    MLflow and for the store's set-up (its schema check, or its creation on the first run) and
    later calls are cheap: :mod:`flows.startup` makes that first call while Prefect's temporary
    server starts.
    """
    from mlflow import MlflowClient

    quiet_mlflow_logging()
    prepare_sqlite_store(uri)
    return MlflowClient(tracking_uri=uri)


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
