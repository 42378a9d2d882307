"""No process left behind: ``sweval ui`` and ``sweval serve`` stopped by SIGTERM, SIGINT or SIGHUP
stop everything they started (flows/processes.py).

Each command runs as the real console script in a session of its own, with a marker variable
in its environment that every process it starts inherits. The signal goes to the ``sweval``
process only, as a process manager or ``kill PID`` sends it (not to its group: that would stop
the children without ``sweval``'s help). Then no process of the tree listed just before the
signal, and none carrying the marker, may be alive.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import psutil
import pytest
from strata_run import (
    ALGORITHMS,
    PHASES,
    Run,
    half_read_pipe,
    in_phase,
    strata_log,
)
from sweval_processes import (
    alive,
    assert_nothing_left,
    exit_status,
    kill_outright_and_check,
    marked,
    stop_and_check,
    sweval_command,
    tree,
    wait_for,
)
from sweval_testing import DAY, T0

pytestmark = pytest.mark.slow

SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------ sweval ui
def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_ui_stops_the_mlflow_server_and_its_workers(signum: int, tmp_path: Path) -> None:
    port = _free_port()
    args = ["ui", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--port", str(port)]
    with sweval_command(args, tmp_path) as (process, marker, log):
        # mlflow server and the uvicorn server it starts; SIGTERM waits until the UI answers
        wait_for(lambda: len(tree(process.pid)) >= 3, process, log, "serving (3 processes)")
        if signum == signal.SIGTERM:
            wait_for(lambda: _healthy(f"http://127.0.0.1:{port}"), process, log, "healthy")
        assert len(marked(marker)) >= 3
        status = stop_and_check(process, marker, log, signum)
        assert status == 0  # the UI stopped as asked


# --------------------------------------------------------------------------------- sweval serve
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_serve_stops_its_flow_run_processes(
    signum: int, tmp_path: Path, prefect_api: str, write_log
) -> None:
    """`sweval serve` while a flow run of its deployment runs in a child process."""
    from prefect.deployments import run_deployment

    from sweval.flows.serve import api_url

    data = write_log(days=8)
    name = f"signals-{uuid.uuid4().hex[:8]}"
    args = ["serve", "--data", str(data), "--window", "1D", "--start", str(T0 + 2 * DAY),
            "--algorithms", "pop", "--u-min", "1", "--output", str(tmp_path / "out"),
            "--no-tracking", "--no-progress", "--cron", "0 3 * * *", "--name", name]
    with sweval_command(args, tmp_path, PREFECT_API_URL=api_url() or prefect_api) as (
        process, marker, log
    ):
        wait_for(lambda: "serving sliding-window-eval" in log.read_text()
                 and _deployment_exists(name), process, log, "serving its deployment")
        run_deployment(f"sliding-window-eval/{name}", timeout=0)
        wait_for(lambda: len(tree(process.pid)) >= 2, process, log, "running a flow run")
        stop_and_check(process, marker, log, signum)
    # paused while nothing serves it: no scheduled run piles up Late (QA: 7 ran back to back
    # after a restart, under the old schedule)
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        assert client.read_deployment_by_name(f"sliding-window-eval/{name}").paused


def test_serve_stopped_mid_run_lets_its_flow_run_end_as_stopped(
    tmp_path: Path, prefect_api: str
) -> None:
    """SIGTERM to `sweval serve` while its flow run computes: the flow-run process unwinds
    before serve exits, so its MLflow runs end KILLED and its Prefect flow run is not left
    RUNNING (Prefect's runner alone killed it outright)."""
    import mlflow
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    from sweval.flows.serve import api_url

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    name = f"signals-{uuid.uuid4().hex[:8]}"
    units = Path(os.environ["SWEVAL_CACHE"])  # the test's own store (conftest)
    args = ["serve", "--scale", "0.3", "--window", "1D", "--folds", "60",
            "--algorithms", "pop,item-knn,user-knn", "--output", str(tmp_path / "out"),
            "--tracking-uri", store, "--no-progress", "--full", "--name", name]
    with sweval_command(args, tmp_path, PREFECT_API_URL=api_url() or prefect_api) as (
        process, marker, log
    ):
        wait_for(lambda: "serving sliding-window-eval" in log.read_text()
                 and _deployment_exists(name), process, log, "serving its deployment")
        flow_run = run_deployment(f"sliding-window-eval/{name}", timeout=0)
        wait_for(lambda: units.is_dir() and any(units.rglob("lists.parquet")), process, log,
                 "a unit finished")
        status = stop_and_check(process, marker, log, signal.SIGTERM)
    assert status == 128 + signal.SIGTERM, log.read_text()[-2000:]
    client = mlflow.MlflowClient(store)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs and {run.info.status for run in runs} == {"KILLED"}, log.read_text()[-2000:]
    with get_client(sync_client=True) as prefect:
        state = prefect.read_flow_run(flow_run.id).state
    assert state is not None and state.is_final(), state


def _deployment_exists(name: str) -> bool:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(f"sliding-window-eval/{name}")
        except ObjectNotFound:
            return False
    return True


# ----------------------------------------------------------------------------------- sweval run
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_run_stops_its_temporary_prefect_server(signum: int, tmp_path: Path) -> None:
    """`sweval run` without PREFECT_API_URL starts Prefect's temporary API server: stopped with it,
    the run exits 128 + the signal's number and says how to resume."""
    args = ["run", "--scale", "0.05", "--folds", "3", "--algorithms", "pop,item-knn",
            "--output", str(tmp_path / "out"), "--no-tracking", "--no-progress"]
    with sweval_command(args, tmp_path) as (process, marker, log):
        wait_for(lambda: len(tree(process.pid)) >= 2, process, log, "starting Prefect's server")
        status = stop_and_check(process, marker, log, signum)
    assert status == 128 + signum, log.read_text()[-2000:]
    assert "interrupted: finished units are saved; rerun to resume." in log.read_text()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT],
                         ids=lambda s: signal.Signals(s).name)
def test_a_run_stopped_inside_its_flow_marks_its_mlflow_runs_killed(
    signum: int, tmp_path: Path
) -> None:
    """Inside a flow run Prefect's own SIGTERM handler stands in for SW-EVAL's and raises its
    TerminationSignal: the MLflow runs must still end KILLED (stopped), not FAILED."""
    import mlflow

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["run", "--scale", "0.3", "--window", "1D", "--folds", "60",
            "--algorithms", "pop,item-knn,user-knn", "--output", str(tmp_path / "out"),
            "--tracking-uri", store, "--no-progress"]
    units = Path(os.environ["SWEVAL_CACHE"])  # the test's own store (conftest)
    with sweval_command(args, tmp_path) as (process, marker, log):
        wait_for(lambda: units.is_dir() and any(units.rglob("lists.parquet")), process, log,
                 "a unit finished")
        status = stop_and_check(process, marker, log, signum)
    assert status == 128 + signum, log.read_text()[-2000:]
    runs = mlflow.MlflowClient(store).search_runs(
        [e.experiment_id for e in mlflow.MlflowClient(store).search_experiments()])
    assert runs and {run.info.status for run in runs} == {"KILLED"}, log.read_text()[-2000:]


def test_ctrl_c_in_a_terminal_stops_a_run_within_seconds(tmp_path: Path) -> None:
    """A terminal's Ctrl-C sends SIGINT to the whole foreground process group. Prefect's
    temporary server, when spawned in that group, died with it, and the stopping flow retried
    the dead API for about two minutes; in a session of its own it outlives the signal until
    the run has reported the crash and stopped it."""
    args = ["run", "--scale", "0.3", "--window", "1D", "--folds", "60",
            "--algorithms", "pop,item-knn,user-knn", "--output", str(tmp_path / "out"),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--no-progress"]
    units = Path(os.environ["SWEVAL_CACHE"])  # the test's own store (conftest)
    with sweval_command(args, tmp_path) as (process, marker, log):
        wait_for(lambda: units.is_dir() and any(units.rglob("lists.parquet")), process, log,
                 "a unit finished")
        before = tree(process.pid)
        started = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)  # the group: sweval's session is its own
        status = exit_status(process, log, within_s=30, after="Ctrl-C")
        seconds = time.monotonic() - started
        assert_nothing_left(before, marker, signal.SIGINT, timeout_s=20)
    assert status == 130, log.read_text()[-2000:]
    assert seconds < 30 and "interrupted: finished units are saved" in log.read_text()


def test_ctrl_c_stops_a_dask_run_quietly(tmp_path: Path) -> None:
    """Ctrl-C reaches the local Dask workers too. They printed tracebacks as they died, the
    cluster's close waited 4 s for each busy worker and logged its death, and Prefect logged
    the stop signal with a traceback when it landed in a task's submission: the workers now
    ignore SIGINT and the command kills them itself, silently."""
    args = ["run", "--scale", "0.3", "--window", "1D", "--folds", "60",
            "--algorithms", "pop,item-knn,user-knn", "--output", str(tmp_path / "out"),
            "--task-runner", "dask", "--workers", "2", "--no-tracking", "--no-progress"]
    units = Path(os.environ["SWEVAL_CACHE"])  # the test's own store (conftest)
    with sweval_command(args, tmp_path) as (process, marker, log):
        wait_for(lambda: units.is_dir() and any(units.rglob("lists.parquet")), process, log,
                 "a unit finished")
        before = tree(process.pid)
        os.killpg(process.pid, signal.SIGINT)
        status = exit_status(process, log, within_s=30, after="Ctrl-C")
        assert_nothing_left(before, marker, signal.SIGINT, timeout_s=20)
    text = log.read_text()
    assert status == 130, text[-2000:]
    assert "interrupted: finished units are saved" in text
    assert "Traceback" not in text and "distributed." not in text, text[-3000:]


def test_run_killed_outright_leaves_no_temporary_prefect_server(tmp_path: Path) -> None:
    """SIGKILL (``kill -9``, the out-of-memory killer) cannot be caught: the temporary server's
    guard stops it once `sweval run` is gone (flows.process_tree.stop_with_this_process)."""
    args = ["run", "--scale", "0.05", "--folds", "3", "--algorithms", "pop,item-knn",
            "--output", str(tmp_path / "out"), "--no-tracking", "--no-progress"]
    with sweval_command(args, tmp_path) as (process, marker, log):
        def server_and_guard() -> bool:
            commands = [" ".join(p.cmdline()) for p in tree(process.pid)
                        if p.is_running()]
            return (any("create_app" in c for c in commands)
                    and any("os.getppid() == parent" in c for c in commands))

        wait_for(server_and_guard, process, log, "the temporary server and its guard started")
        kill_outright_and_check(process, marker)


#: A process that starts a server in a session of its own, sets up its guard and is SIGKILLed
#: at once, before the guard's interpreter has even started (a kill during start-up).
_KILLED_AT_ONCE = """
import os, signal, subprocess, sys
from sweval.flows.process_tree import stop_with_this_process
server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                          start_new_session=True)
print(server.pid, flush=True)
stop_with_this_process(server.pid, grace_s=2)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_guard_stops_the_server_when_its_process_died_before_the_guard_started() -> None:
    """The guard is the killed process's child: it notices the death by its parent changing,
    even when the killed process is already gone (and reaped) by the time the guard looks."""
    done = subprocess.run([sys.executable, "-c", _KILLED_AT_ONCE], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    server = psutil.Process(int(done.stdout.split()[0]))
    try:
        deadline = time.monotonic() + 20
        while alive([server]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive([server]) == []
    finally:
        with contextlib.suppress(psutil.Error):
            server.kill()


def test_ui_killed_outright_leaves_no_mlflow_server(tmp_path: Path) -> None:
    """The same for `sweval ui`: its guard stops the MLflow server's whole process group."""
    port = _free_port()
    args = ["ui", "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--port", str(port),
            "--no-browser"]
    with sweval_command(args, tmp_path) as (process, marker, log):
        wait_for(lambda: len(tree(process.pid)) >= 4, process, log,
                 "serving (MLflow's 3 processes and the guard)")
        kill_outright_and_check(process, marker)


# ------------------------------------------------------------------------ the exit sweep itself
_TRACKER_SCRIPT = """
import json, subprocess, sys, time
from multiprocessing import resource_tracker
from sweval.flows.process_tree import stop_descendants
resource_tracker.ensure_running()  # what a local Dask cluster's spawned workers start
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
start = time.monotonic()
stopped = stop_descendants(grace_s=8)
print(json.dumps({"stopped": stopped, "sleeper": sleeper.pid,
                  "tracker": resource_tracker._resource_tracker._pid,
                  "seconds": time.monotonic() - start}))
"""


def test_exit_sweep_does_not_wait_for_the_resource_tracker() -> None:
    """multiprocessing's resource tracker ignores SIGTERM and exits once its parent has: the
    sweep leaves it alone instead of waiting the whole grace for it (10 s per Dask run), and it
    is gone soon after the command exits."""
    import json

    done = subprocess.run([sys.executable, "-c", _TRACKER_SCRIPT], capture_output=True,
                          text=True, timeout=60, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["stopped"] == [found["sleeper"]]
    assert found["seconds"] < 5
    deadline = time.monotonic() + 20
    while psutil.pid_exists(found["tracker"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(psutil.Error):
        assert psutil.Process(found["tracker"]).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_run_of_500_strata_stops_within_seconds_of_sigterm_at_any_phase(
    phase: str, tmp_path: Path
) -> None:
    """A ``sweval run`` of 500 strata stopped by SIGTERM in each of its phases ends within seconds,
    exits 143 and leaves no process (flows/processes.py).

    `--stratify-by` a column of hundreds of values: the run computed every pair of strata's tests
    (124,750 pairs for 500) and drew a report of 500 panels per figure, 20 minutes in all, and a
    SIGTERM in the middle of it was swallowed or waited for (the report renders in a thread of its
    own, which the exit joined). Now the pairs and the report are bounded (the largest strata) and
    a stopped command ends within seconds whatever it is doing.

    Where a stop's seconds went (5.1–6.8 s): marking the 1,000 child runs KILLED in MLflow one
    request each (2.5 s and more) until the 3 s deadline, then Prefect's log handler waiting, at the
    interpreter's exit, for the temporary server its own exit handler had just stopped. Now the
    parent run is marked first and the children while time is left, the logs go before the server
    stops, and a timer in C ends the process should the deadline's thread never get the
    interpreter's lock. The deadline (2 s) runs from the signal's arrival: a main thread inside
    SQLite's commit on a loaded disk ran the handler seconds late (5.6 s).

    Each case is one run, sent SIGTERM as soon as it is seen in ``phase`` (tests/flows/
    strata_run.py: each phase, what shows the run is in it, when its stop goes): it exits
    143 within 5 s and leaves no process."""
    data = tmp_path / "log.csv"
    if phase == "loading":
        os.mkfifo(data)
    else:
        data.write_bytes(strata_log())
    output, db = tmp_path / "out", tmp_path / "mlflow.db"
    args = ["run", "--data", str(data), "--window", "1D", "--folds", "3", "--u-min", "1",
            "--k", "10", "--algorithms", ",".join(ALGORITHMS), "--stratify-by", "policy",
            "--stratify-mode", "test", "--no-progress", "--output", str(output),
            "--tracking-uri", f"sqlite:///{db}"]
    with sweval_command(args, tmp_path) as (process, marker, log), contextlib.ExitStack() as stack:
        # the test's own unit store (conftest)
        run = Run(output, Path(os.environ["SWEVAL_CACHE"]), db, log)
        if phase == "loading":
            stack.enter_context(half_read_pipe(data, strata_log(), process, log))
        at_signal = in_phase(phase, run, process)
        before = tree(process.pid)
        sent = time.monotonic()
        os.kill(process.pid, signal.SIGTERM)
        status = exit_status(process, log, within_s=60, after=f"SIGTERM in {phase}")
        took = time.monotonic() - sent
        assert_nothing_left(before, marker, signal.SIGTERM, timeout_s=20)
    assert status == 128 + signal.SIGTERM, log.read_text()[-3000:]
    assert took < 5.0, f"{took:.1f} s in {phase} ({at_signal}):\n{log.read_text()[-2000:]}"
    if phase == "final-logging":
        pngs = [name for name in at_signal.files if name.startswith("report-")]
        assert 0 < len(pngs) <= 4  # the figures, not one per stratum
