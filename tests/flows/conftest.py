"""Flow tests: one Prefect test API for the whole session, MLflow in a session temp directory.

Only tests under ``tests/flows/`` start the Prefect harness (about 20 s); its environment
(temporary ``PREFECT_HOME`` and ``SWEVAL_HOME``, start timeout, no analytics) is set by
``tests/conftest.py``, before anything imports Prefect. One sqlite MLflow store serves every test
(creating one costs 3-10 s of migrations); each test uses its own experiment name.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd
import pytest
from flow_logs import log_frame
from prefect_database import seed_database
from sweval_testing import DAY, T0, session_directory

from sweval.evaluators.config.model import EvalConfig

_SESSION_DIR = session_directory("flow-tests-")


@pytest.fixture(scope="session", autouse=True)
def prefect_api() -> Iterator[str]:
    """A temporary Prefect API (sqlite) for every flow test; yields its URL.

    The harness makes its database in a new temporary directory; that directory receives the
    session's migrated database first (``tests/prefect_database.py``), which saves the server
    10-13 s of migrations.
    """
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    def seeded_directory() -> str:
        directory = tempfile.mkdtemp()
        seed_database(Path(directory) / "prefect-test.db")  # the name the harness gives it
        return directory

    with (mock.patch("prefect.testing.utilities.mkdtemp", seeded_directory),
          prefect_test_harness(server_startup_timeout=120)):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def mlflow_uri() -> str:
    """The session's MLflow store."""
    return f"sqlite:///{_SESSION_DIR / 'mlflow' / 'mlflow.db'}"


@pytest.fixture
def write_log(tmp_path: Path) -> Callable[..., Path]:
    """Write :func:`log_frame` (or a given frame) as CSV in tmp_path; returns the path."""

    def write(days: float = 8, *, frame: pd.DataFrame | None = None, name: str = "log.csv") -> Path:
        path = tmp_path / name
        (log_frame(days) if frame is None else frame).to_csv(path, index=False)
        return path

    return write


@pytest.fixture
def make_config(
    tmp_path: Path, mlflow_uri: str, request: pytest.FixtureRequest
) -> Callable[..., EvalConfig]:
    """An EvalConfig for the tiny log: 1-day windows from day 1, u_min 5, pop + pop-n."""

    def make(data: Path, **overrides: Any) -> EvalConfig:
        values: dict[str, Any] = {
            "data": str(data),
            "window": "1D",
            "folds": 7,
            "start": str(T0 + DAY),
            "k": [5, 10],
            "u_min": 5,
            "algorithms": ["pop", "pop-n"],
            "output": str(tmp_path / "out"),
            "tracking_uri": mlflow_uri,
            "experiment": f"test/{request.node.name}",
            "progress": False,
            "report": False,  # drawn where a test looks at it
        }
        return EvalConfig.build(**(values | overrides))

    return make


@pytest.fixture(autouse=True)
def no_task_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's tasks run once: a failing test fails at once instead of retrying with delays.

    The tasks are declared with ``retries=2`` (transient I/O errors, :func:`retry_on_io`), which
    Prefect's ``PREFECT_TASK_DEFAULT_RETRIES`` does not override; the Task objects are patched for
    the test instead (in place, so every reference to them sees it, and Dask workers get the
    patched copy with the pickled task). This covers in-process flow runs only; ``sweval``
    subprocesses keep their retries. The retry rule itself is tested directly in test_flow.py.
    """
    from prefect import Task

    import sweval.flows.sliding_window as flow_module

    for value in vars(flow_module).values():
        if isinstance(value, Task):
            monkeypatch.setattr(value, "retries", 0)
