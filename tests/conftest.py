"""Test-wide settings. Shared helpers live in ``tests/sweval_testing.py``.

No test may touch the user's ``~/.sweval`` (MLflow store, Prefect home) or cache directory
(unit store, code versions, fetched datasets): they point into one temporary directory for
the session (``$XDG_CACHE_HOME``, ``$SWEVAL_CACHE`` and ``$SWEVAL_DATA_DIR`` too; each test gets
a unit store of its own, see :func:`own_unit_store`), set before anything imports Prefect or
MLflow (this file
is loaded before every other conftest.py; the other session directories are made inside it by
:func:`sweval_testing.session_directory`). A session that passes removes it; one that fails keeps it and says
where, for inspection. Then, like every entry point,
:func:`flows.settings.apply_env_defaults` (importing ``sweval.flows`` sets nothing): the Prefect
server gets the 120 s start timeout measured as necessary on 2-core machines, and no analytics.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

_HOME = Path(tempfile.mkdtemp(prefix="sweval-tests-"))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["SWEVAL_HOME"] = str(_HOME / "sweval")  # even where the shell sets them
os.environ["PREFECT_HOME"] = str(_HOME / "prefect")
os.environ["XDG_CACHE_HOME"] = str(_HOME / "cache")  # code versions; the user's otherwise
os.environ["SWEVAL_CACHE"] = str(_HOME / "units")  # the default store is the user's otherwise
os.environ["SWEVAL_DATA_DIR"] = str(_HOME / "datasets")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)

from sweval.flows.settings import apply_env_defaults  # noqa: E402

apply_env_defaults()  # the rest of SW-EVAL's Prefect defaults, as every entry point sets them

import numpy as np  # noqa: E402  (after OPENBLAS_NUM_THREADS: OpenBLAS reads it on load)
import pytest  # noqa: E402
from prefect_database import (  # noqa: E402
    DIRECTORY_VARIABLE,
    seed_database,
    start_building,
    stop_building,
)

#: Seed of the ``rng`` fixture: every test that asks for random data gets the same data each run.
RNG_SEED = 0


def pytest_configure(config: pytest.Config) -> None:
    """Where the migrated Prefect database lives (``tests/prefect_database.py``): pytest's cache,
    else the controlling process's home. The controlling process starts building it now, while
    the workers start and collect."""
    directory = _HOME / "prefect-databases"
    cache = getattr(config, "cache", None)
    if cache is not None:
        try:
            directory = cache.mkdir("sweval-prefect")
        except OSError:  # a read-only checkout: this session's home
            pass
    if hasattr(config, "workerinput"):  # an xdist worker: the controller's choice
        os.environ.setdefault(DIRECTORY_VARIABLE, str(directory))
    else:
        os.environ[DIRECTORY_VARIABLE] = str(directory)
        start_building(directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's home after a passing run (every server and fixture stopped by then);
    keep it after a failure, for its logs, stores and outputs."""
    stop_building()
    failed = getattr(config, "_sweval_failed", True)
    if failed:
        print(f"\nsweval tests: the session's files are kept in {_HOME}")
    else:
        shutil.rmtree(_HOME, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._sweval_failed = exitstatus not in (0, 5)  # 5: no tests collected


@pytest.fixture(scope="session", autouse=True)
def prefect_database() -> Path:
    """The session's ``PREFECT_HOME`` holds a migrated database before any test starts a Prefect
    server on it (``tests/prefect_database.py``); returns the database's path."""
    return seed_database(Path(os.environ["PREFECT_HOME"]) / "prefect.db")


@pytest.fixture(autouse=True)
def own_unit_store(tmp_path_factory: pytest.TempPathFactory,
                   monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own unit store (``$SWEVAL_CACHE``), so that no test reuses another's units:
    every command's default store is otherwise the user's one store, shared by every run."""
    store = tmp_path_factory.mktemp("units")
    monkeypatch.setenv("SWEVAL_CACHE", str(store))
    return store


@pytest.fixture
def user_cache(tmp_path_factory: pytest.TempPathFactory,
               monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ``$SWEVAL_CACHE``, and the user's cache directory in a temporary folder
    (``$XDG_CACHE_HOME``): every command uses its default store. Returns that store's path."""
    monkeypatch.delenv("SWEVAL_CACHE", raising=False)
    home = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "sweval" / "units"


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh generator with a fixed seed, for tests whose data only needs to be arbitrary."""
    return np.random.default_rng(RNG_SEED)


@pytest.fixture
def count_units(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Record every (fold, algorithm) unit computed in this process, in order: every command
    computes units through the driver (a job, or a unit recomputed while collecting), and
    ``read_or_recompute`` (a damaged unit) calls it too."""
    import sweval.evaluators.run.driver
    import sweval.evaluators.units.unit

    computed: list[tuple[int, str]] = []
    original = sweval.evaluators.units.unit.compute_unit

    def counting(unit, store, **kwargs):  # noqa: ANN001, ANN003, ANN202
        computed.append((unit.split.index, unit.spec.name))
        return original(unit, store, **kwargs)

    for module in (sweval.evaluators.run.driver, sweval.evaluators.units.unit):
        monkeypatch.setattr(module, "compute_unit", counting)
    return computed
