"""A migrated Prefect database, built once and copied wherever a test needs a new one.

A new Prefect database runs every Alembic migration before its server answers: 10-13 s on a
2-core machine. Without this, each xdist worker's test harness paid it, and so did the session's
``PREFECT_HOME`` and every test that gives ``sweval`` a Prefect home of its own. Instead
``prefect server database upgrade`` (Prefect's own command) builds one database per Prefect
version into pytest's cache (``.pytest_cache/d/sweval-prefect/``), and :func:`seed_database`
copies it. A copy is what the migrations would have written; a server started on it still runs
its migrations, which find nothing to do (or only what a newer Prefect added).

The controlling process starts the build when the session is configured
(:func:`start_building`), so that it overlaps the workers' start and collection; a worker that
needs the database first waits on the build's lock. A build that fails is reported once and
the tests go on without a template: each server then migrates its own database, as Prefect does.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from importlib.metadata import version
from pathlib import Path

#: Where the template lives; set by tests/conftest.py for every process of the session.
DIRECTORY_VARIABLE = "SWEVAL_TEST_PREFECT_DATABASES"
_building: list[subprocess.Popen[bytes]] = []
_failed = False


def template(directory: Path) -> Path:
    """The template's path: one per installed Prefect version."""
    return directory / f"prefect-{version('prefect')}.db"


def build(directory: Path) -> Path | None:
    """The template in ``directory``, built first if missing (under a lock shared by every
    process of the session); None if the build failed."""
    global _failed
    found = template(directory)
    if found.exists():
        return found
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found.exists() or _failed:
            return found if found.exists() else None
        with tempfile.TemporaryDirectory(dir=directory) as home:
            process = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
                env=_clean_environment() | {"PREFECT_HOME": home}, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True)
            _building.append(process)
            try:
                output, _ = process.communicate(timeout=600)
            finally:
                _building.remove(process)
            built = Path(home) / "prefect.db"
            if process.returncode != 0 or not built.exists():
                _failed = True
                warnings.warn(f"no template Prefect database (exit {process.returncode}); each "
                              f"server migrates its own: {output.decode(errors='replace')[-2000:]}",
                              stacklevel=2)
                return None
            os.replace(built, found)
    return found


def _clean_environment() -> dict[str, str]:
    """The environment without Prefect's settings: the build must not reach a database, a
    profile or an API the environment names (it could be someone's own)."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PREFECT_")
            } | {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def start_building(directory: Path) -> threading.Thread:
    """Build the template in a background thread (see :func:`stop_building`)."""
    thread = threading.Thread(target=build, args=(directory,), name="prefect-template",
                              daemon=True)
    thread.start()
    return thread


def stop_building() -> None:
    """End a build still running (a session that stops early leaves no process behind)."""
    for process in list(_building):
        process.kill()
        process.wait()


def seed_database(path: Path) -> Path:
    """Copy the template to ``path`` (a Prefect home's ``prefect.db``, or the test harness's
    database) unless something is there already; without a template, leave ``path`` for
    Prefect to create. Returns ``path``."""
    directory = os.environ.get(DIRECTORY_VARIABLE)
    try:
        found = build(Path(directory)) if directory else None
    except OSError as exc:  # an unwritable cache: Prefect migrates its own
        warnings.warn(f"no template Prefect database: {exc}", stacklevel=2)
        found = None
    if found is not None and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, path)
    return path


def prefect_home(path: Path) -> Path:
    """A new Prefect home at ``path`` with its database already migrated; returns ``path``."""
    seed_database(path / "prefect.db")
    return path
