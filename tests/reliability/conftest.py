"""Reliability tests: every subprocess inherits the temporary SWEVAL_HOME of tests/conftest.py.

When tests that need the loopback MLflow server are selected, the server is started as soon as
collection ends, so that its start (10-20 s, mostly imports) overlaps the catalogue's tests; the
``mlflow`` fixture of test_faults.py waits for it, and the session's end stops it by process group.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sweval_testing import session_directory

_SESSION_DIR = session_directory("reliability-")


def pytest_collection_finish(session: pytest.Session) -> None:
    here = Path(__file__).parent
    wanted = any(
        "mlflow" in getattr(item, "fixturenames", ()) and here in Path(item.path).parents
        for item in session.items
    )
    if wanted:
        from fault_helpers import EARLY_MLFLOW, start_mlflow_server

        session.config.stash[EARLY_MLFLOW] = start_mlflow_server(_SESSION_DIR / "mlflow")


def pytest_sessionfinish(session: pytest.Session) -> None:
    from fault_helpers import EARLY_MLFLOW, stop_group

    server = session.config.stash.get(EARLY_MLFLOW, None)
    if server is not None:
        stop_group(server.process)
