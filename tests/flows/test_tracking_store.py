"""A command stopped while MLflow builds a new SQLite store leaves nothing that breaks the next.

MLflow builds a store's schema with a series of migrations that SQLite does not run as one
transaction; ``prepare_sqlite_store`` builds it beside the final path and links it into place.
Each stop is real: a child process that SIGKILLs itself half-way through MLflow's migrations.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sweval.data.errors import SwevalError
from sweval.flows.tracking.client import open_client
from sweval.flows.tracking.sqlite_store import prepare_sqlite_store

pytestmark = pytest.mark.slow

#: Opens the store through SW-EVAL (or, with "mlflow", as the code before it did: MLflow's
#: client on the final path), killing itself (SIGKILL, as `kill -9` or a lost machine would) in
#: the middle of a migration: when SQLite copies a table into alembic's temporary one.
KILLED_HALF_WAY = """
import os, signal, sys
import mlflow.store.db.utils as db_utils
from sqlalchemy import event

real_upgrade = db_utils._upgrade_db

def upgrade_and_die_in_a_migration(engine):
    @event.listens_for(engine, "before_cursor_execute")
    def die(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("INSERT INTO _ALEMBIC_TMP_"):
            os.kill(os.getpid(), signal.SIGKILL)
    real_upgrade(engine)

db_utils._upgrade_db = upgrade_and_die_in_a_migration
if sys.argv[2] == "mlflow":
    from mlflow import MlflowClient
    MlflowClient(tracking_uri=sys.argv[1]).search_experiments()
else:
    from sweval.flows.tracking.client import open_client
    open_client(sys.argv[1]).search_experiments()
"""


def _fresh_cache(tmp_path: Path) -> dict[str, str]:
    """The environment of a process whose user cache holds no pristine store yet (so that
    opening a new store runs MLflow's migrations)."""
    return os.environ | {"XDG_CACHE_HOME": str(tmp_path.parent / f"{tmp_path.name}-cache")}


def _killed_while_building(uri: str, opener: str, env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_HALF_WAY, uri, opener], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == -9, done.stderr  # it really died half-way


def _works(uri: str) -> None:
    client = open_client(uri)
    experiment = client.create_experiment("after-the-kill")
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "recall_at_10", 0.25)
    assert client.get_run(run.info.run_id).data.metrics == {"recall_at_10": 0.25}


def test_a_store_whose_first_build_was_killed_opens_and_works(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = _fresh_cache(tmp_path)
    _killed_while_building(uri, "sweval", env)  # killed while building the pristine store
    assert not (tmp_path / "mlflow.db").exists()  # the half-built file never took its name
    pristine = Path(env["XDG_CACHE_HOME"]) / "sweval" / "mlflow"
    assert [p.name for p in pristine.iterdir() if not p.name.endswith(".creating")] == []
    _works(uri)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]  # no leftovers


def test_a_store_left_half_built_without_runs_is_moved_aside_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _killed_while_building(uri, "mlflow", _fresh_cache(tmp_path))  # MLflow's own build: the file is left half-built
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert any(name.startswith("_alembic_tmp_") for name in tables)  # what users were left with
    refused = subprocess.run(  # and MLflow refused it from then on (its own process: MLflow
        [sys.executable, "-c",  # keeps the engine of a URI for the process's lifetime)
         f"from mlflow import MlflowClient; MlflowClient(tracking_uri={uri!r}).search_experiments()"],
        capture_output=True, text=True, timeout=300, check=False)
    assert refused.returncode != 0 and "OperationalError" in refused.stderr
    with caplog.at_level(logging.WARNING):
        _works(uri)
    aside = [p.name for p in tmp_path.iterdir() if p.name.startswith("mlflow.db.incomplete-")]
    assert len(aside) == 1 and "moved to " + aside[0] in caplog.text


def test_a_half_built_store_with_runs_is_left_alone_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "mlflow.db"
    _works(f"sqlite:///{path}")
    with sqlite3.connect(path) as db:  # a migration stopped later, in a store in use
        db.execute("CREATE TABLE _alembic_tmp_runs (x INTEGER)")
    before = path.read_bytes()
    with pytest.raises(SwevalError, match=r"holds 1 runs .*_alembic_tmp_runs.*mlflow db upgrade"):
        prepare_sqlite_store(f"sqlite:///{path}")
    assert path.read_bytes() == before


def test_a_stale_temporary_file_of_a_dead_build_is_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    stale = tmp_path / f".mlflow.db.{int(dead.stdout)}.creating"
    stale.write_bytes(b"half")
    mine = tmp_path / f".mlflow.db.{os.getppid()}.creating"  # a live process's: kept
    mine.write_bytes(b"busy")
    prepare_sqlite_store(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not stale.exists() and mine.exists() and (tmp_path / "mlflow.db").exists()


def test_two_threads_opening_a_new_store_at_once_build_it_once(tmp_path: Path) -> None:
    # sweval run's start-up thread and its flow may both be first to open the store
    from concurrent.futures import ThreadPoolExecutor

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(prepare_sqlite_store, [uri, uri]))
    _works(uri)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


def test_a_query_in_the_uri_names_the_same_file_and_memory_stores_are_left_to_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}?timeout=20"
    prepare_sqlite_store(uri)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]
    _works(uri)
    monkeypatch.chdir(tmp_path)
    prepare_sqlite_store("sqlite:///:memory:")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]  # no file ":memory:"


def test_a_file_system_without_hard_links_gets_the_store_by_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_links(_source: object, _target: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    prepare_sqlite_store(uri)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]
    _works(uri)


def test_building_a_store_says_nothing_on_the_terminal(tmp_path: Path) -> None:
    """QA: the first `sweval up` (and `sweval ui`) on a fresh home printed MLflow's INFO lines
    about creating the database: they build the store without a client."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from sweval.flows.tracking.sqlite_store import "
         "prepare_sqlite_store; prepare_sqlite_store(sys.argv[1])",
         f"sqlite:///{tmp_path / 'mlflow.db'}"],
        capture_output=True, text=True, timeout=300, check=True, env=_fresh_cache(tmp_path),
    )
    assert (tmp_path / "mlflow.db").exists()
    assert "Creating initial MLflow database tables" not in done.stderr + done.stdout


def _schema(path: Path) -> tuple[list[tuple[str, list[str]]], list[tuple]]:
    """A store's tables and indexes with their SQL's lines (sorted: MLflow's migrations order
    a table's constraints differently from one build to the next), and its alembic version with
    its default experiment (without its times)."""
    with sqlite3.connect(path) as db:
        tables = sorted((name, sorted(line.strip().rstrip(",") for line in sql.splitlines()))
                        for name, sql in db.execute(
                            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
        rows = [*db.execute("SELECT * FROM alembic_version"), *db.execute(
            "SELECT experiment_id, name, artifact_location, lifecycle_stage FROM experiments")]
    return tables, rows


def test_a_new_store_is_the_pristine_copy_of_what_mlflow_builds_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new store is a copy of the pristine store in the user's cache: the same schema,
    alembic version and default experiment (its artifacts beside the store) as MLflow's own
    build in its place; building the second store runs no migration."""
    import mlflow.store.db.utils
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    from sweval.flows.tracking.client import artifact_root
    from sweval.flows.tracking.sqlite_store import pristine_store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "by-mlflow").mkdir()
    reference = tmp_path / "by-mlflow" / "mlflow.db"
    SqlAlchemyStore(f"sqlite:///{reference}",
                    str(artifact_root(f"sqlite:///{reference}"))).engine.dispose()
    first, second = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    prepare_sqlite_store(f"sqlite:///{first}")
    assert pristine_store().exists()

    def no_migrations(engine: object) -> None:
        raise AssertionError("migrations ran for a store the pristine one could give")

    monkeypatch.setattr(mlflow.store.db.utils, "_initialize_tables", no_migrations)
    prepare_sqlite_store(f"sqlite:///{second}")
    want_tables, want_rows = _schema(reference)
    for store in (first, second):
        tables, rows = _schema(store)
        assert tables == want_tables
        assert rows == [row if len(row) == 1 else
                        (0, "Default", str(store.parent / "mlartifacts" / "0"), "active")
                        for row in want_rows]
    assert want_rows[-1][2] == str(reference.parent / "mlartifacts" / "0")
    _works(f"sqlite:///{second}")


def test_a_damaged_or_unwritable_pristine_store_falls_back_to_mlflows_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sweval.flows.tracking.sqlite_store import pristine_store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pristine_store().parent.mkdir(parents=True)
    pristine_store().write_bytes(b"not a database")
    _works(f"sqlite:///{tmp_path / 'a' / 'mlflow.db'}")
    assert not pristine_store().exists()  # removed, built again by the next new store
    _works(f"sqlite:///{tmp_path / 'b' / 'mlflow.db'}")
    assert pristine_store().exists()
    monkeypatch.setenv("XDG_CACHE_HOME", "/proc/no-cache-here")  # cannot be created
    _works(f"sqlite:///{tmp_path / 'c' / 'mlflow.db'}")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["mlflow.db"]
