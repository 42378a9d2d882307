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
from sweval.flows.tracking.client import open_client, prepare_sqlite_store

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


def _killed_while_building(uri: str, opener: str) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_HALF_WAY, uri, opener],
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
    _killed_while_building(uri, "sweval")
    assert not (tmp_path / "mlflow.db").exists()  # the half-built file never took its name
    _works(uri)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]  # no leftovers


def test_a_store_left_half_built_without_runs_is_moved_aside_and_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _killed_while_building(uri, "mlflow")  # MLflow's own build: the file is left half-built
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
        [sys.executable, "-c", "import sys; from sweval.flows.tracking.client import "
         "prepare_sqlite_store; prepare_sqlite_store(sys.argv[1])",
         f"sqlite:///{tmp_path / 'mlflow.db'}"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    assert (tmp_path / "mlflow.db").exists()
    assert "Creating initial MLflow database tables" not in done.stderr + done.stdout
