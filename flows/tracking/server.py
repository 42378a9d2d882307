"""The ``mlflow server`` that shows a store in a browser (``sweval ui``) and its environment."""

from __future__ import annotations

import os
import sys

from sweval.flows.tracking.client import artifact_root


def server_command(
    uri: str, *, host: str = "127.0.0.1", port: int = 5000, workers: int = 1
) -> list[str]:
    """The ``mlflow server`` command line that shows the store ``uri`` (sqlite) in a browser."""
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", uri,
        "--host", host, "--port", str(port), "--workers", str(workers),
    ]
    root = artifact_root(uri)
    if root is not None:
        command += ["--artifacts-destination", str(root)]
    return command


def server_env() -> dict[str, str]:
    """The environment for :func:`server_command`: no background job consumers."""
    return os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
