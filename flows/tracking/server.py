"""The ``mlflow server`` that shows a store in a browser (``sweval ui``), its environment, and
the address ``sweval ui`` opens: the run comparison chart of the latest evaluation."""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.request
import webbrowser
from collections.abc import Callable
from typing import Any

from sweval.evaluators.wording import shown_uri
from sweval.flows.tracking.client import artifact_root, open_client
from sweval.flows.tracking.view import comparison_url, viewed_run


def server_command(
    uri: str, *, host: str = "127.0.0.1", port: int = 5000, workers: int = 1
) -> list[str]:
    """The ``mlflow server`` command line that shows the store ``uri`` in a browser. The store
    itself is given in the environment (:func:`server_env`): a command line is visible to
    every local user (``ps``), and a database URI may hold a password."""
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--host", host, "--port", str(port), "--workers", str(workers),
    ]
    root = artifact_root(uri)
    if root is not None:
        command += ["--artifacts-destination", str(root)]
    return command


def server_env(uri: str) -> dict[str, str]:
    """The environment of :func:`server_command`: the store ``uri`` (``mlflow server`` reads
    ``MLFLOW_BACKEND_STORE_URI``), no background job consumers."""
    return os.environ | {"MLFLOW_BACKEND_STORE_URI": uri,
                         "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def latest_evaluation(client: Any) -> Any:
    """The evaluation that finished last in the store (a ``sweval run`` parent run: the tag
    ``sweval.config_hash`` and no parent run), or None."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return None
    runs = client.search_runs(
        experiments,
        filter_string="tags.`sweval.config_hash` != '' and attributes.status = 'FINISHED'",
        order_by=["attributes.end_time DESC"], max_results=50,
    )
    return next((run for run in runs if "mlflow.parentRunId" not in run.data.tags), None)


def latest_comparison_url(uri: str, base: str) -> str | None:
    """The address of the comparison charts of the latest evaluation in the store ``uri`` on
    the UI at ``base`` (see :mod:`flows.tracking.view`), or None when there is none."""
    client = open_client(uri)
    run = latest_evaluation(client)
    if run is None:
        return None
    experiment_id = str(run.info.experiment_id)
    tags = client.get_experiment(experiment_id).tags
    shown = viewed_run(tags) == run.info.run_id
    return comparison_url(base, experiment_id, run.info.run_id, view=shown)


def wait_until_healthy(base: str, *, timeout: float = 180.0) -> bool:
    """Poll ``<base>/health`` until it answers 200 (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def announce_when_ready(
    uri: str, base: str, *, browser: bool, say: Callable[[str], None]
) -> threading.Thread:
    """In a daemon thread: once the server at ``base`` answers (or is given up on), find the
    latest evaluation in ``uri``, say the address of its comparison charts and open it in the
    default browser (``$BROWSER``; only when ``browser`` and the server answers)."""

    def run() -> None:
        # the store is read once the server answers: a new store's tables are created (migrated)
        # by the server alone, never by two processes at once
        ready = wait_until_healthy(base)
        try:
            found = latest_comparison_url(uri, base)
        except Exception as exc:  # the UI is still useful without the shortcut
            say(shown_uri(f"(could not find the latest evaluation in {uri}: {exc})"))
            found = None
        url = found or f"{base}/"
        say(shown_uri(f"latest evaluation: {url}" if found
                      else f"no finished evaluation in {uri} yet: {url}"))
        if ready and browser:
            webbrowser.open(url)

    thread = threading.Thread(target=run, name="sweval-ui-announce", daemon=True)
    thread.start()
    return thread
