"""A stop signal is never lost: not inside a finaliser, not behind an exception it turned into.

Each case runs in a fresh interpreter with SW-EVAL's handlers (``stop_children_on_signals``)
and sends itself the signal at a chosen point, so the timing is exact.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

#: The signal arrives while the garbage collector runs a finaliser in the main thread (as
#: SQLAlchemy's weakref callbacks ran when a run was stopped): Python drops the finaliser's
#: exception, so the handler's Stopped never reached the command.
IN_A_FINALISER = """
import gc, os, signal, time
from sweval.flows.processes import Stopped, stop_children_on_signals

stop_children_on_signals()

class Finalised:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):  # the handler runs here, inside the finaliser
            pass

try:
    cycle = Finalised()
    cycle.me = cycle
    del cycle
    gc.collect()
    time.sleep(10)
    print("went on")
except Stopped as stopped:
    print("stopped by", stopped.signum)
"""


def test_a_signal_that_lands_in_a_finaliser_still_stops_the_command() -> None:
    done = subprocess.run([sys.executable, "-c", IN_A_FINALISER], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.stdout.strip() == f"stopped by {int(signal.SIGTERM)}", done.stderr
    assert "Exception ignored" not in done.stderr


#: A command whose stop signal some library turned into another exception, or caught outright.
COMMAND = """
import os, signal, sys
import typer
from sweval.flows.cli import app as cli
from sweval.flows.processes import stop_children_on_signals

stop_children_on_signals()
app = typer.Typer()

@app.command()
def work(how: str) -> None:
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(1000):
            pass
    except KeyboardInterrupt as exc:
        if how == "converted":
            raise RuntimeError("the event loop was closed") from exc
        if how == "user-error":
            from sweval.data.errors import SwevalError
            raise SwevalError("cannot reach the Prefect API") from exc
        # "caught": the library carries on

cli.app = app
sys.argv = ["sweval", sys.argv[1]]
cli.main()
"""


@pytest.mark.parametrize("how", ["converted", "user-error", "caught"])
def test_a_stopped_command_exits_with_128_plus_the_signal(how: str) -> None:
    done = subprocess.run([sys.executable, "-c", COMMAND, how], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 128 + signal.SIGTERM, done.stdout + done.stderr
    assert "interrupted" in done.stdout + done.stderr
    assert "rerun to resume" not in done.stdout + done.stderr  # not an evaluation: nothing to resume


#: A command that does not get out of its work once stopped: a library swallows the stop and
#: goes on (as one did in a 500-strata run's statistics, for 20 minutes), or the exit would wait
#: for a worker thread (the report's rendering, a Prefect task).
STUCK = """
import sys, time
from concurrent.futures import ThreadPoolExecutor
import typer
from sweval.flows.cli import app as cli

app = typer.Typer()

@app.command()
def work(how: str) -> None:
    print("ready", flush=True)
    if how == "worker-thread":
        ThreadPoolExecutor(1).submit(time.sleep, 600).result()
    while True:
        try:
            time.sleep(600)
        except KeyboardInterrupt:
            pass  # swallowed: the work goes on

cli.app = app
sys.argv = ["sweval", sys.argv[1]]
cli.entry_point()
"""


@pytest.mark.parametrize("how", ["swallowed", "worker-thread"])
@pytest.mark.slow
def test_a_stopped_command_ends_within_seconds_whatever_it_is_doing(how: str) -> None:
    import time

    process = subprocess.Popen([sys.executable, "-c", STUCK, how], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # inside its work
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert took < 5.0, (took, err)
    assert "interrupted" in err and "Traceback" not in err


#: A main thread inside one long C call: SQLite waiting for a lock another process holds (as a
#: commit waits for a loaded disk's fsync). Python runs the signal's handler only once that
#: call returns, here after 60 s.
IN_C = """
import os, sqlite3, sys
import typer
from sweval.flows.cli import app as cli

app = typer.Typer()

@app.command()
def work(database: str) -> None:
    connection = sqlite3.connect(database, timeout=60)
    print("ready", flush=True)
    connection.execute("BEGIN EXCLUSIVE")  # waits in C for the test's lock

cli.app = app
sys.argv = ["sweval", sys.argv[1]]
cli.entry_point()
"""


@pytest.mark.slow
def test_the_deadline_runs_from_the_signals_arrival_not_from_its_handler(tmp_path) -> None:
    """The stop's deadline is armed when the signal arrives (the interpreter's wakeup
    descriptor, read by a thread), so a main thread stuck in C for a minute still ends within
    seconds, with the signal's status."""
    import sqlite3
    import time

    database = tmp_path / "locked.db"
    holder = sqlite3.connect(database)
    holder.execute("CREATE TABLE t (x)")
    holder.commit()
    holder.execute("BEGIN EXCLUSIVE")
    process = subprocess.Popen([sys.executable, "-c", IN_C, str(database)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # inside SQLite's wait
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=90)
        took = time.monotonic() - sent
    finally:
        process.kill()
        holder.rollback()
        holder.close()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert took < 5.0, (took, err)
    assert "interrupted: ended 2 s after the stop signal" in err
