"""Test-wide settings. Shared helpers live in ``tests/sweval_testing.py``.

No test may touch the user's ``~/.sweval`` (MLflow store, Prefect home): both point into one
temporary directory for the session, set before anything imports Prefect or MLflow. Then, like
every entry point, :func:`flows.settings.apply_env_defaults` (importing ``sweval.flows`` sets
nothing).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_HOME = Path(tempfile.mkdtemp(prefix="sweval-tests-"))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("SWEVAL_HOME", str(_HOME / "sweval"))
os.environ.setdefault("PREFECT_HOME", str(_HOME / "prefect"))
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)

from sweval.flows.settings import apply_env_defaults  # noqa: E402

apply_env_defaults()  # the rest of SW-EVAL's Prefect defaults, as every entry point sets them
