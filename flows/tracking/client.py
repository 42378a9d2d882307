"""Opening the MLflow store: the tracking URI, the experiment, an ``MlflowClient``, a run."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.flows.settings import default_tracking_uri, sweval_home

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

    _quiet_mlflow_logging()
    prepare_sqlite_store(uri)
    return MlflowClient(tracking_uri=uri)


def prepare_sqlite_store(uri: str) -> None:
    """Make sure the SQLite store of ``uri`` (if it is one) is whole before MLflow opens it.

    MLflow builds a new store's schema with a long series of migrations that SQLite does not run
    as one transaction (MLflow's ``_upgrade_db``: "not guaranteed to be transactional"): a
    command stopped during them, such as Ctrl-C in a user's first run, left a store that every
    later command refused (``table _alembic_tmp_... already exists``). So:

    - a missing store is built in a temporary file beside it (``.<name>.<pid>.creating``) and
      linked into place only once complete; if another process put one there meanwhile, that
      one is kept (it was built the same way);
    - a store left half-built by an earlier version (a leftover ``_alembic_tmp_`` table) with
      no runs in it is moved aside to ``<name>.incomplete-<time>`` and built again; one that
      holds runs is left alone and raises an error saying how to repair it.

    Raises:
        SwevalError: a half-built store that holds runs.
    """
    if not uri.startswith("sqlite:///"):
        return
    database = uri.removeprefix("sqlite:///").split("?", 1)[0]  # no query (?timeout=...)
    if database in ("", ":memory:"):
        return
    with _preparing:  # the preload thread and the flow may both open the store first
        _prepare_sqlite_file(Path(database), uri)


#: One store preparation at a time in this process.
_preparing = threading.Lock()


def _prepare_sqlite_file(path: Path, uri: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size > 0:
        leftovers, n_runs = _interrupted_migration(path)
        if not leftovers:
            return
        if n_runs:
            raise SwevalError(
                f"the MLflow store {path} holds {n_runs} runs but a schema migration was "
                f"stopped half-way (leftover table {leftovers[0]}). Back the file up, drop "
                f"the leftover table(s) ({', '.join(leftovers)}) with sqlite3, then run "
                f"`mlflow db upgrade {uri}`."
            )
        aside = path.with_name(f"{path.name}.incomplete-{time.strftime('%Y%m%dT%H%M%S')}")
        os.replace(path, aside)
        _log.warning("the MLflow store %s was left half-built by an interrupted first run "
                     "(no runs in it): moved to %s and built again", path, aside.name)
    _build_sqlite_store(path)


def _interrupted_migration(path: Path) -> tuple[list[str], int]:
    """The leftover tables of a stopped migration in the SQLite file ``path`` and how many runs
    it holds (read-only; a file SQLite cannot read counts as whole: MLflow reports it)."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            leftovers = [name for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name LIKE '\\_alembic\\_tmp\\_%' ESCAPE '\\'")]
            if not leftovers:
                return [], 0
            try:
                (n_runs,) = db.execute("SELECT COUNT(*) FROM runs").fetchone()
            except sqlite3.OperationalError:  # no runs table yet
                n_runs = 0
            return leftovers, int(n_runs)
    except sqlite3.Error:
        return [], 0


def _build_sqlite_store(path: Path) -> None:
    """Build MLflow's schema in a temporary file beside ``path`` and link it into place."""
    import psutil
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    _quiet_mlflow_logging()  # `sweval up` and `sweval ui` build the store without a client
    for stale in path.parent.glob(f".{path.name}.*.creating"):  # from builds that were killed
        pid = stale.name.removeprefix(f".{path.name}.").removesuffix(".creating")
        if not (pid.isdigit() and psutil.pid_exists(int(pid))):
            stale.unlink(missing_ok=True)
    building = path.with_name(f".{path.name}.{os.getpid()}.creating")
    building.unlink(missing_ok=True)  # an earlier process of the same pid's
    try:
        artifacts = artifact_root(f"sqlite:///{path}")  # experiment 0's, as for any other
        store = SqlAlchemyStore(f"sqlite:///{building}", str(artifacts))
        store.engine.dispose()
        try:
            os.link(building, path)
        except FileExistsError:  # another process built it meanwhile: theirs is as whole
            pass
        except OSError:  # a file system without hard links: a rename (last one wins)
            if not path.exists():
                os.replace(building, path)
    finally:
        building.unlink(missing_ok=True)


def _quiet_mlflow_logging() -> None:
    """MLflow and alembic announce database migrations at INFO; keep the terminal for results."""
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)
        # it logs a database error with its traceback, then raises it: the command says it once
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


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
