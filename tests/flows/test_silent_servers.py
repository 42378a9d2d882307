"""Servers that accept connections and never answer (hung, stopped, a proxy whose upstream is
gone): the run neither waits minutes on them nor loses its tables (flows/answers.py)."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sweval_testing import log_frame

from sweval.flows.answers import silent

SWEVAL = Path(sys.executable).parent / "sweval"
SECRET = "s3cr3t-Pa55"


@pytest.fixture
def mute_server() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections (the kernel's backlog) and never answers."""
    with socket.create_server(("127.0.0.1", 0), backlog=128) as server:
        yield server.getsockname()[1]


def test_silent_tells_a_mute_server_from_one_that_answers_or_refuses(mute_server: int) -> None:
    started = time.monotonic()
    assert silent(f"http://u:{SECRET}@127.0.0.1:{mute_server}/health", timeout_s=0.5)
    assert time.monotonic() - started < 10
    with socket.create_server(("127.0.0.1", 0)) as closed:
        refused = closed.getsockname()[1]
    assert not silent(f"http://127.0.0.1:{refused}/health", timeout_s=0.5)  # refused: no wait
    answering = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=answering.serve_forever, daemon=True).start()
    try:  # any answer is one, an error status included
        assert not silent(f"http://127.0.0.1:{answering.server_port}/health", timeout_s=5)
    finally:
        answering.shutdown()


def _run(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    log_frame(8).to_csv(tmp_path / "log.csv", index=False)
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(SWEVAL), "run", "--data", str(tmp_path / "log.csv"), "--window", "1D",
             "--folds", "2", "--u-min", "1", "--k", "10", "--algorithms", "pop",
             "--no-progress", "--output", str(tmp_path / "out"), *args],
            env=base | env, cwd=tmp_path, capture_output=True, text=True, timeout=150,
            stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:  # MLflow's client alone waited 8 minutes
        pytest.fail(f"still waiting on the mute server after {exc.timeout} s")
    return done, time.monotonic() - started


@pytest.mark.slow
def test_a_mute_tracking_server_costs_seconds_and_the_tables_are_written(
        tmp_path: Path, mute_server: int) -> None:
    """MLflow's client waited 120 s a request, four times (8 minutes), then the run failed with
    nothing evaluated. Now the run evaluates without it and then fails, in one line."""
    done, took = _run(tmp_path, "--no-prefect", "--tracking-uri",
                      f"http://sweval:{SECRET}@127.0.0.1:{mute_server}")
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "the server does not answer (no response within 5 s" in output
    assert "The tables are written in" in output and "Traceback" not in output
    assert SECRET not in output
    assert (tmp_path / "out" / "results.csv").stat().st_size > 0
    assert not any(SECRET in path.read_text(errors="replace")
                   for path in (tmp_path / "out").rglob("*") if path.is_file())
    assert took < 60, output


@pytest.mark.slow
def test_a_mute_prefect_api_costs_seconds_and_the_run_is_evaluated_in_process(
        tmp_path: Path, mute_server: int) -> None:
    """Prefect's client waited 60 s a request, four times, before the flow failed."""
    done, took = _run(tmp_path, "--no-tracking",
                      PREFECT_API_URL=f"http://127.0.0.1:{mute_server}/api")
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert f"the Prefect API at http://127.0.0.1:{mute_server}/api does not answer" in output
    assert "evaluating in this process (as --no-prefect)" in output
    assert "Traceback" not in output
    assert (tmp_path / "out" / "results.csv").stat().st_size > 0
    assert took < 60, output
