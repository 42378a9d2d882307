"""`sweval run`'s start-up side by side (flows.startup) and the real default command end to end."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from flow_helpers import check_mlflow_matches_results
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import PREFECT_API_URL, temporary_settings
from sweval_testing import REPO, group_members

from sweval.flows.startup import prepare_side_by_side


@pytest.fixture
def fake_server_start(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the temporary server's start by a slow fake; returns the record of its calls.

    The servers Prefect keeps (one per port) are emptied for the test and restored after it.
    """
    calls: list[dict[str, Any]] = []

    def start(self: SubprocessASGIServer, timeout: int | None = None) -> None:
        call = {"server": self, "thread": threading.current_thread().name, "finished": False}
        calls.append(call)
        time.sleep(0.3)
        self.running = True
        call["finished"] = True

    monkeypatch.setattr(SubprocessASGIServer, "_instances", {})
    monkeypatch.setattr(SubprocessASGIServer, "start", start)
    return calls


def test_without_an_api_url_the_server_starts_beside_mlflow_and_the_flow_finds_it_running(
    fake_server_start: list[dict[str, Any]], make_config, write_log, mlflow_uri: str
) -> None:
    config = make_config(write_log(3))
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        prepare_side_by_side(config)
    assert len(fake_server_start) == 1
    call = fake_server_start[0]
    assert call["thread"] == "sweval-prefect-server"
    assert call["finished"], "prepare_side_by_side returned before the server was up"
    # Prefect's client asks for the same object (one per port) and sees it running: no second start.
    assert SubprocessASGIServer() is call["server"] and call["server"].running
    assert Path(mlflow_uri.removeprefix("sqlite:///")).exists()


def test_with_an_api_url_no_server_is_started(
    fake_server_start: list[dict[str, Any]], make_config, write_log
) -> None:
    prepare_side_by_side(make_config(write_log(3)))  # the harness's PREFECT_API_URL is set
    assert fake_server_start == []


def test_with_an_api_url_the_set_up_runs_in_a_background_thread_joined_at_exit(
    fake_server_start: list[dict[str, Any]], make_config, write_log, tmp_path: Path
) -> None:
    import sweval.flows.startup as startup

    store = tmp_path / "preloaded" / "mlflow.db"
    prepare_side_by_side(make_config(write_log(3), tracking_uri=f"sqlite:///{store}"))
    thread = startup._preloading
    assert fake_server_start == [] and thread is not None and thread.name == "sweval-preload"
    startup.finish_preloading()
    assert not thread.is_alive()
    assert store.exists()  # the MLflow client was opened there
    assert "scipy.stats" in sys.modules and "sweval.evaluators.report.page" in sys.modules


def test_a_failed_early_start_or_store_is_left_for_the_flow_to_report(
    monkeypatch: pytest.MonkeyPatch, make_config, write_log, tmp_path: Path
) -> None:
    def failing_start(self: SubprocessASGIServer, timeout: int | None = None) -> None:
        raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")

    monkeypatch.setattr(SubprocessASGIServer, "_instances", {})
    monkeypatch.setattr(SubprocessASGIServer, "start", failing_start)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    config = make_config(write_log(3), tracking_uri=f"sqlite:///{blocked}/mlflow.db")
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        prepare_side_by_side(config)  # neither error escapes here


@pytest.mark.slow
def test_the_default_command_runs_on_the_ephemeral_api_and_leaves_nothing_running(
    write_log, tmp_path: Path, mlflow_uri: str
) -> None:
    """`sweval run` as a user types it: no PREFECT_API_URL, so Prefect's temporary server."""
    data = write_log(8)
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(home), "COLUMNS": "200"}
    output = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "sweval.flows.cli.app", "run", "--data", str(data), "--window", "1D",
         "--folds", "7", "--k", "5,10", "--u-min", "5", "--algorithms", "pop,pop-n",
         "--output", str(output), "--tracking-uri", mlflow_uri,
         "--experiment", "test/default-command", "--no-progress"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, stderr[-4000:]
    assert "Traceback" not in stderr
    assert "Recall@k on log" in stdout and "MLflow: experiment" in stdout
    check_mlflow_matches_results(mlflow_uri, "test/default-command", output)
    with sqlite3.connect(home / "prefect.db") as db:
        flow_runs = db.execute("SELECT state_type FROM flow_run").fetchall()
        fold_tasks = db.execute(
            "SELECT count(*) FROM task_run WHERE name LIKE 'fold-%' AND state_type = 'COMPLETED'"
        ).fetchone()[0]
    assert flow_runs == [("COMPLETED",)]
    assert fold_tasks == 6  # fold 2 of the tiny log has too few users and is skipped
    assert group_members(process.pid) == [], "the temporary server outlived the command"
