"""`sweval run`'s start-up side by side (flows.startup) and the real default command end to end."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from flow_helpers import check_mlflow_matches_results
from sweval_testing import REPO, group_members

from sweval.data.errors import SwevalError
from sweval.flows.startup import TemporaryApi, finish_preloading, preload


@pytest.mark.slow
def test_without_an_api_url_prefects_server_starts_first_and_is_the_runs_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The temporary server is spawned before anything else, PREFECT_API_URL points at it,
    it answers its health check, and it stops when asked (and at exit)."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    api = TemporaryApi.start()
    try:
        assert api is not None and os.environ["PREFECT_API_URL"] == api.url
        api.wait(120)
        import urllib.request

        with urllib.request.urlopen(f"{api.url}/health", timeout=5) as response:
            assert response.status == 200
        # a request addressed to another host (a web page's, by DNS rebinding) is refused
        import urllib.error

        rebound = urllib.request.Request(f"{api.url}/health",
                                         headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(rebound, timeout=5)
        assert refused.value.code == 400
        local = urllib.request.Request(f"{api.url}/health",
                                       headers={"Host": f"localhost:{api.port}"})
        with urllib.request.urlopen(local, timeout=5) as response:
            assert response.status == 200
    finally:
        if api is not None:
            api.stop()
    assert api.process.poll() is not None


def test_with_an_api_url_no_server_is_started(
        prefect_api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)  # the harness's
    assert TemporaryApi.start() is None


def test_a_server_that_fails_to_start_is_one_clear_error(tmp_path: Path) -> None:
    import tempfile

    output = tempfile.TemporaryFile()
    process = subprocess.Popen([sys.executable, "-c", "import sys; print('address already "
                                "in use', file=sys.stderr); sys.exit(3)"],
                               stdout=output, stderr=output)
    api = TemporaryApi(process, 1, output)
    with pytest.raises(SwevalError, match="exited with status 3: address already in use"):
        api.wait(30)


def test_mlflow_and_the_late_imports_are_set_up_in_a_background_thread(
    make_config, write_log, tmp_path: Path
) -> None:
    import sweval.flows.startup as startup

    store = tmp_path / "preloaded" / "mlflow.db"
    preload(make_config(write_log(3), tracking_uri=f"sqlite:///{store}"))
    thread = startup._preloading
    assert thread is not None and thread.name == "sweval-preload"
    finish_preloading()
    assert not thread.is_alive()
    assert store.exists()  # the MLflow client was opened there
    assert "scipy.stats" in sys.modules and "sweval.evaluators.report.page" in sys.modules
    assert "matplotlib" in sys.modules


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
