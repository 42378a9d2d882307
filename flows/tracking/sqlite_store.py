"""MLflow's SQLite stores, built whole or not at all, and quickly.

MLflow builds a new store's schema with a long series of migrations (3–8 s on a 2-core machine)
that SQLite does not run as one transaction (MLflow's ``_upgrade_db``: "not guaranteed to be
transactional"): a command stopped during them, such as Ctrl-C in a user's first run, left a
store that every later command refused (``table _alembic_tmp_... already exists``). So:

- a missing store is a copy of a **pristine store**, built by MLflow once per MLflow version in
  the user's cache (``<cache>/mlflow/pristine-<version>.db``, see :func:`pristine_store`), with
  its default experiment's artifact location and times set for the new store; where that cache
  cannot be written, MLflow builds the store itself;
- either way the new store is made in a temporary file beside its final path
  (``.<name>.<pid>.creating``) and linked into place only once complete; if another process put
  one there meanwhile, that one is kept (it was built the same way);
- a store left half-built by an earlier version (a leftover ``_alembic_tmp_`` table) with no
  runs in it is moved aside to ``<name>.incomplete-<time>`` and built again; one that holds runs
  is left alone and raises an error saying how to repair it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

from sweval.data.errors import SwevalError

_log = logging.getLogger(__name__)

#: One store preparation at a time in this process.
_preparing = threading.Lock()


def prepare_sqlite_store(uri: str) -> None:
    """Make sure the SQLite store of ``uri`` (if it is one) is whole before MLflow opens it.

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


def sqlite_artifact_root(database: Path) -> Path:
    """Where the experiments of the SQLite store ``database`` keep their artifacts: beside it,
    in ``mlartifacts`` (never the current directory, MLflow's default)."""
    return database.parent / "mlartifacts"


def pristine_store() -> Path:
    """The path of this MLflow version's pristine store in the user's cache (it may not exist)."""
    from importlib.metadata import version

    from sweval.data.user_dirs import cache_home

    return cache_home() / "mlflow" / f"pristine-{version('mlflow')}.db"


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
    _put_in_place(path, lambda building: _copy_or_build(building, path))


def _interrupted_migration(path: Path) -> tuple[list[str], int]:
    """The leftover tables of a stopped migration in the SQLite file ``path`` and how many runs
    it holds (read-only; a file SQLite cannot read counts as whole: MLflow reports it)."""
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


def _put_in_place(path: Path, make: object) -> None:
    """Call ``make(building)`` to write a whole store into a temporary file beside ``path``,
    then link it to ``path`` (kept if another process got there first)."""
    import psutil

    for stale in path.parent.glob(f".{path.name}.*.creating"):  # from builds that were killed
        pid = stale.name.removeprefix(f".{path.name}.").removesuffix(".creating")
        if not (pid.isdigit() and psutil.pid_exists(int(pid))):
            stale.unlink(missing_ok=True)
    building = path.with_name(f".{path.name}.{os.getpid()}.creating")
    building.unlink(missing_ok=True)  # an earlier process of the same pid's
    try:
        make(building)  # type: ignore[operator]
        try:
            os.link(building, path)
        except FileExistsError:  # another process built it meanwhile: theirs is as whole
            pass
        except OSError:  # a file system without hard links: a rename (last one wins)
            if not path.exists():
                os.replace(building, path)
    finally:
        building.unlink(missing_ok=True)


def _copy_or_build(building: Path, path: Path) -> None:
    """Write the store of ``path`` into ``building``: a copy of the pristine store (built first
    if missing) with experiment 0 re-pointed at ``path``'s artifacts; MLflow's own build where
    the user's cache cannot hold the pristine store."""
    pristine = pristine_store()
    try:
        if not pristine.exists():
            pristine.parent.mkdir(parents=True, exist_ok=True)
            _put_in_place(pristine, lambda temporary: _build(temporary, pristine.parent))
        shutil.copyfile(pristine, building)
        _repoint_default_experiment(building, sqlite_artifact_root(path))
    except (OSError, sqlite3.Error) as exc:
        _log.debug("no usable pristine MLflow store %s (%s): MLflow builds this one",
                   pristine, exc)
        if isinstance(exc, sqlite3.Error):  # damaged: built again next time
            pristine.unlink(missing_ok=True)
        building.unlink(missing_ok=True)
        _build(building, sqlite_artifact_root(path))


def _build(building: Path, artifacts: Path | None) -> None:
    """MLflow's own build of a store in ``building`` (its schema migrations)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    quiet_mlflow_logging()  # `sweval up` and `sweval ui` build the store without a client
    store = SqlAlchemyStore(f"sqlite:///{building}", str(artifacts))
    store.engine.dispose()


def _repoint_default_experiment(store: Path, artifacts: Path | None) -> None:
    """Give experiment 0 of the copied ``store`` the artifact location and creation time MLflow
    would have given it in a store built there (``<artifacts>/0``, now).

    Raises:
        sqlite3.Error: ``store`` is not a store with a default experiment.
    """
    from mlflow.utils.uri import append_to_uri_path, resolve_uri_if_local

    location = append_to_uri_path(resolve_uri_if_local(str(artifacts)), "0")
    now_ms = int(time.time() * 1000)
    with contextlib.closing(sqlite3.connect(store)) as db, db:
        changed = db.execute(
            "UPDATE experiments SET artifact_location = ?, creation_time = ?, "
            "last_update_time = ? WHERE experiment_id = 0", (location, now_ms, now_ms)).rowcount
    if changed != 1:
        raise sqlite3.DatabaseError(f"{store}: no default experiment to re-point")


def quiet_mlflow_logging() -> None:
    """MLflow and alembic announce database migrations at INFO; keep the terminal for results."""
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)
        # it logs a database error with its traceback, then raises it: the command says it once
        logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
