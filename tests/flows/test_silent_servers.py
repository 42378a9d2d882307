"""Servers that accept connections and never answer (hung, stopped, a proxy whose upstream is
gone): the run neither waits minutes on them nor loses its tables (flows/answers.py)."""

from __future__ import annotations

import contextlib
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


class MutingProxy:
    """A threaded TCP forwarder on 127.0.0.1 to ``upstream``'s port that forwards both ways
    until :meth:`mute`; then it forwards nothing more, on open connections as on new ones,
    which it still accepts (a proxy whose upstream hung). ``seen`` holds what clients sent."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.muted = threading.Event()
        self.seen = bytearray()
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def mute(self) -> None:
        self.muted.set()

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            if self.muted.is_set():
                continue  # accepted, never answered
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.sockets.append(server)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, from_client: bool) -> None:
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if from_client:
                self.seen += data
            if self.muted.is_set():
                continue  # swallowed: the other side waits for ever
            with contextlib.suppress(OSError):
                target.sendall(data)


@contextlib.contextmanager
def _mlflow_server(tmp_path: Path) -> Iterator[int]:
    """A real ``mlflow server`` on a SQLite store, in its own process group; its port."""
    import signal
    import urllib.request

    from sweval.flows.tracking import server_command, server_env

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with open(tmp_path / "mlflow-server.log", "wb") as log:
        process = subprocess.Popen(
            server_command(uri, host="127.0.0.1", port=port, workers=1), env=server_env(uri),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, (tmp_path / "mlflow-server.log").read_text()[-3000:]
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            assert time.monotonic() < deadline, "mlflow server did not become healthy"
            time.sleep(0.5)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.mark.slow
def test_a_tracking_server_that_goes_mute_mid_run_ends_it_within_30_s_with_its_tables(
        tmp_path: Path) -> None:
    """A tracking server that answered the run's first requests and then stopped answering
    held every later call for MLflow's 120 s read timeout, each try. Now a call gives up
    within 20 s (flows/settings.py) and the end of the run asks once, briefly, before it
    fails in one line with its tables written."""
    log_frame(8).to_csv(tmp_path / "log.csv", index=False)
    with _mlflow_server(tmp_path) as upstream:
        proxy = MutingProxy(upstream)
        try:
            base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
            process = subprocess.Popen(
                [str(SWEVAL), "run", "--data", str(tmp_path / "log.csv"), "--window", "1D",
                 "--folds", "2", "--u-min", "1", "--k", "10", "--algorithms", "pop",
                 "--no-progress", "--no-prefect", "--output", str(tmp_path / "out"),
                 "--tracking-uri", f"http://127.0.0.1:{proxy.port}"],
                env=base, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 180
            while b"runs/create" not in proxy.seen:  # the parent run is open: mid-run
                assert process.poll() is None and time.monotonic() < deadline, \
                    process.communicate()[0].decode()
                time.sleep(0.05)
            proxy.mute()
            muted = time.monotonic()
            try:
                output = process.communicate(timeout=120)[0].decode()
            except subprocess.TimeoutExpired:
                process.kill()
                pytest.fail("still waiting on the mute tracking server 120 s later")
            took = time.monotonic() - muted
        finally:
            proxy.close()
    assert process.returncode == 2, output
    assert "MLflow tracking at http://127.0.0.1" in output, output
    assert "Traceback" not in output, output
    assert (tmp_path / "out" / "results.csv").is_file(), output
    assert took < 30, f"{took:.1f} s after the server went mute:\n{output}"
