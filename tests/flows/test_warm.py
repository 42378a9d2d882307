"""The warm process (flows.warm_server, flows.warm_client, flows.warm_process): real processes.

A warm process is started as ``sweval up`` starts it (:func:`flows.warm_process.start` in a
fresh interpreter) under a temporary ``SWEVAL_HOME``, without the two servers (each run starts
Prefect's temporary server, as a plain run does); commands go through the ``sweval`` console
script of this environment, exactly as a user types them. Every process started carries a
marker variable, so that :func:`_leftovers` finds whatever is left.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from flow_helpers import marked_processes
from sweval_testing import REPO

from sweval.flows import warm_client

MARKER = "SWEVAL_WARM_TEST_ID"
SWEVAL = str(Path(sys.executable).parent / "sweval")
RUN = ["run", "--window", "1D", "--folds", "7", "--k", "5,10", "--u-min", "5",
       "--algorithms", "pop,pop-n", "--no-progress"]


def _leftovers(marker: str, but: tuple[int, ...] = ()) -> list[str]:
    """Live processes whose environment carries ``MARKER=marker`` (except ``but``)."""
    return marked_processes(MARKER, marker, but)


class Warm:
    """A SWEVAL_HOME with a warm process, and the environment of the commands run in it."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.marker = uuid.uuid4().hex
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "SWEVAL_WARM")}
        self.env |= {"SWEVAL_HOME": str(self.home), "PREFECT_HOME": str(self.home / "prefect"),
                     MARKER: self.marker, "COLUMNS": "200"}
        self.pid = 0

    def start(self) -> None:
        started = subprocess.run(
            [sys.executable, "-c", "from sweval.flows import warm_process as w; "
             "server, process = w.start(); print(w.wait_ready(server, process, 120))"],
            env=self.env, cwd=REPO, capture_output=True, text=True, timeout=180)
        assert started.stdout.strip() == "None", started.stdout + started.stderr
        self.pid = json.loads((self.home / "warm.json").read_text())["pid"]

    def sweval(self, *args: str, timeout: float = 300, **env: str
               ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SWEVAL, *args], cwd=REPO, env=self.env | env,
                              capture_output=True, text=True, timeout=timeout)

    def popen(self, *args: str, **env: str) -> subprocess.Popen[str]:
        return subprocess.Popen([SWEVAL, *args], cwd=REPO, env=self.env | env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def children(self) -> list[tuple[int, str]]:
        """(pid, what) of every line the warm process logged about its children."""
        log = (self.home / "logs" / "warm-server.log").read_text()
        found = []
        for line in log.splitlines():
            parts = line.split(" ", 3)
            if len(parts) == 4 and parts[1] == "child":
                found.append((int(parts[2].rstrip(":")), parts[3]))
        return found

    def wait_for_child(self, n_before: int, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            started = [pid for pid, what in self.children() if what.startswith("sweval ")]
            if len(started) > n_before:
                return started[-1]
            time.sleep(0.05)
        raise AssertionError("the warm process started no child")


@pytest.fixture
def warm(tmp_path: Path) -> Iterator[Warm]:
    """A started warm process, stopped (with `sweval down`) at the end whatever the test did."""
    warm = Warm(tmp_path)
    warm.start()
    yield warm
    if (warm.home / "warm.json").exists():
        warm.sweval("down", timeout=60)
    for line in _leftovers(warm.marker):  # the test fails on them; never leave them running
        os.kill(int(line.split()[0]), signal.SIGKILL)


def test_the_identity_compares_what_a_fork_cannot_change() -> None:
    mine = warm_client.identity()
    assert warm_client.mismatch(mine) is None
    assert warm_client.mismatch(mine | {"fingerprint": "0"}) == "fingerprint"
    assert warm_client.mismatch(mine | {"sys_path": ["/elsewhere"]}) == "sys_path"
    changed = dict(mine["baked_env"]) | {"OMP_NUM_THREADS": "7"}  # type: ignore[call-overload]
    assert warm_client.mismatch(mine | {"baked_env": changed}) == "baked_env"
    assert warm_client.baked_env({"OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0",
                                  "MLFLOW_TRACKING_URI": "x", "PREFECT_API_URL": "y",
                                  "SWEVAL_HOME": "z", "LANG": "C"}) == {
        "OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0", "LANG": "C"}


def test_without_a_warm_process_nothing_is_tried(tmp_path: Path) -> None:
    env = os.environ | {"SWEVAL_HOME": str(tmp_path)}
    probe = ("import sys; from sweval.flows.warm_client import run_in_warm_process; "
             "print(run_in_warm_process(['sweval', 'run']), 'socket' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["None", "False"], done.stderr  # not even `socket` imported


@pytest.mark.slow
def test_a_run_in_the_warm_process_equals_the_in_process_run(
    warm: Warm, write_log, tmp_path: Path
) -> None:
    socket_mode = os.stat(warm.home / "warm.sock").st_mode
    assert stat.S_ISSOCK(socket_mode) and stat.S_IMODE(socket_mode) == 0o600
    data = write_log(8)
    # the client's environment is the child's: its own MLflow store
    store = {name: f"sqlite:///{tmp_path / name / 'mlflow.db'}" for name in ("warm", "here")}
    there = warm.sweval(*RUN, "--data", str(data), "--output", str(tmp_path / "out-warm"),
                        MLFLOW_TRACKING_URI=store["warm"])
    here = warm.sweval(*RUN, "--data", str(data), "--output", str(tmp_path / "out-here"),
                       MLFLOW_TRACKING_URI=store["here"], SWEVAL_WARM="0")
    assert there.returncode == here.returncode == 0, there.stderr[-3000:] + here.stderr[-3000:]
    assert [what for _, what in warm.children()] == ["sweval run", "exit status 0"]
    assert ((tmp_path / "out-warm" / "results.csv").read_bytes()
            == (tmp_path / "out-here" / "results.csv").read_bytes())
    assert f"in {store['warm']}" in there.stdout and f"in {store['here']}" in here.stdout
    assert (tmp_path / "warm" / "mlflow.db").exists()
    # the same lines on the terminal, but for the paths and ids
    def lines(out: str) -> list[str]:
        return [line for line in out.splitlines() if "out-" not in line and "MLflow:" not in line]

    assert lines(there.stdout) == lines(here.stdout)
    # a user error: its message and exit status 2 come through
    wrong = warm.sweval("run", "--data", str(tmp_path / "missing.csv"), "--no-progress")
    assert wrong.returncode == 2 and "missing.csv" in wrong.stderr and "error" in wrong.stderr
    assert [what for _, what in warm.children()][-2:] == ["sweval run", "exit status 2"]
    # --tracking-uri reaches the child's command line
    flag = warm.sweval(*RUN, "--data", str(data), "--output", str(tmp_path / "out-flag"),
                       "--tracking-uri", store["here"])
    assert flag.returncode == 0 and f"in {store['here']}" in flag.stdout
    assert len(warm.children()) == 6


@pytest.mark.slow
def test_a_stale_or_different_warm_process_is_not_used(warm: Warm, tmp_path: Path) -> None:
    missing = ["run", "--data", str(tmp_path / "missing.csv"), "--no-progress"]
    # a variable read at start-up differs: the command runs in-process, as without up
    other = warm.sweval(*missing, OPENBLAS_NUM_THREADS="3")
    assert other.returncode == 2 and "missing.csv" in other.stderr
    assert warm.children() == []
    assert "not run in `sweval up`'s warm process (another environment: OPENBLAS_NUM_THREADS;" \
        in other.stderr  # and the user is told why
    # a source file edited after the warm process started: in-process too, and status says why
    source = REPO / "flows" / "gap.py"
    before = source.stat()
    try:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        edited = warm.sweval(*missing)
        assert edited.returncode == 2 and "missing.csv" in edited.stderr
        assert warm.children() == []
        assert "(the source changed since it started" in edited.stderr
        status = warm.sweval("status")
        assert "source changed" in status.stdout, status.stdout
    finally:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    # the same source again: the warm process runs it
    again = warm.sweval(*missing)
    assert again.returncode == 2 and [w for _, w in warm.children()][-1] == "exit status 2"
    assert "warm process" not in again.stderr


@pytest.mark.slow
def test_signals_reach_the_child_and_nothing_is_left(
    warm: Warm, write_log, tmp_path: Path
) -> None:
    data = write_log(40)
    long_run = ["run", "--window", "1D", "--folds", "30", "--k", "5,10", "--u-min", "5",
                "--algorithms", "pop,pop-n,item-knn,user-knn,svd", "--no-progress",
                "--data", str(data)]
    # Ctrl-C: the child unwinds as in-process (status 130, "interrupted") and leaves nothing
    client = warm.popen(*long_run, "--output", str(tmp_path / "int"))
    child = warm.wait_for_child(0)
    time.sleep(1.5)
    client.send_signal(signal.SIGINT)
    _out, err = client.communicate(timeout=120)
    assert client.returncode == 130, err[-3000:]
    assert "interrupted" in err
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    assert _leftovers(warm.marker, but=(warm.pid,)) == []
    # the client killed outright: the warm process terminates its child
    client = warm.popen(*long_run, "--output", str(tmp_path / "kill"))
    child = warm.wait_for_child(1)
    time.sleep(1.0)  # during the temporary Prefect server's start (exit status 1 there, once)
    client.kill()
    client.communicate(timeout=30)
    deadline = time.monotonic() + 60
    while _leftovers(warm.marker, but=(warm.pid,)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _leftovers(warm.marker, but=(warm.pid,)) == []
    while warm.children()[-1][1] != "exit status 143" and time.monotonic() < deadline:
        time.sleep(0.1)  # a zombie until the warm process reaps it and logs its status
    assert warm.children()[-1] == (child, "exit status 143")
    # the child killed outright: so is the client (it raised setting SIGKILL's handler: exit 1)
    client = warm.popen(*long_run, "--output", str(tmp_path / "child-killed"))
    child = warm.wait_for_child(2)
    time.sleep(1.0)
    os.kill(child, signal.SIGKILL)
    _out, err = client.communicate(timeout=60)
    assert client.returncode == -signal.SIGKILL and "Traceback" not in err, err[-2000:]
    # `sweval down` while a command runs: it stops the command (SIGTERM: 143), then itself
    client = warm.popen(*long_run, "--output", str(tmp_path / "down"))
    child = warm.wait_for_child(3)
    time.sleep(1.0)
    # ... but `sweval up` after an edit leaves an out-of-date warm process that runs commands
    source = REPO / "flows" / "gap.py"
    before = source.stat()
    try:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        asked = subprocess.run(
            [sys.executable, "-c", "from sweval.flows import warm_process as w; "
             "print(w.needs_start(print))"],
            env=warm.env, cwd=REPO, capture_output=True, text=True, timeout=60)
    finally:
        os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert asked.stdout.splitlines()[-1] == "False", asked.stdout + asked.stderr
    assert "source changed" in asked.stdout and "runs 1 command" in asked.stdout
    assert psutil.pid_exists(child) and client.poll() is None
    stopped = warm.sweval("down", timeout=120)
    assert stopped.returncode == 0 and "warm" in stopped.stdout and "stopped" in stopped.stdout
    _out, err = client.communicate(timeout=60)
    log = (warm.home / "logs" / "warm-server.log").read_text()
    assert client.returncode == 143, err[-2000:] + log
    assert _leftovers(warm.marker) == []
    assert not (warm.home / "warm.sock").exists() and not (warm.home / "warm.json").exists()
