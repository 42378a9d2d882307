"""The run of 500 strata that the stop test of tests/flows/test_signals.py stops by SIGTERM in
each of its phases, and what shows the run is in each.

Each case is one run, stopped as soon as the run is seen in its phase (its files and output,
looked at every 50 ms; no whole run is timed first): the stop is sent in that phase, and each
case takes its phase's start plus the stop. The phases, what shows the run is in each, and
when each case's stop went on a busy 2-core machine::

    phase          the run                                 in it while                  stop
    loading        reads the log (a named pipe here)       the pipe is half written      2 s
                   claims the output, opens MLflow's parent run
    units          computes 6 units (3 folds, 2 algos)     a unit started, not all done 11 s
    tables         results, summary, significance tables   the tables' 12-strata        17 s
                                                           warning, no results.csv
    report         draws the report (a thread)             results.csv, no report.html  22 s
    child logging  creates the 1,002 child runs in MLflow  some child runs, not all     22 s
    final logging  logs and FINISHes each child            some FINISHED, not all       54 s
                   then the parent; prints the summary

MLflow's logging runs while the report is drawn. The child runs are created as units finish
when a unit ends a second or more after the last logging (flows/tracking/run_hook.py), else
(as in these runs) at the start of the final logging.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sweval_processes import wait_for
from sweval_testing import DAY, T0, UNITS_GLOB

N_STRATA = 500
ALGORITHMS = ("pop", "pop-n")
N_UNITS = 3 * len(ALGORITHMS)  # --folds 3
N_CHILDREN = len(ALGORITHMS) * (N_STRATA + 1)  # each stratum's and "all"'s, per algorithm
TABLES_WARNING = f"{N_STRATA} strata: significance_strata.csv compares the 12"


def strata_log() -> bytes:
    """12,000 interactions of 1,500 users over 8 days, each user in one of 500 policies."""
    rng = np.random.default_rng(0)
    users = rng.integers(0, 1500, 12_000)
    frame = pd.DataFrame({"user": users, "item": rng.zipf(1.5, len(users)) % 300,
                          "timestamp": T0 + rng.integers(0, 8 * DAY, len(users)),
                          "policy": [f"p{u % N_STRATA:03d}" for u in users]})
    return frame.to_csv(index=False).encode()


@dataclass(frozen=True)
class State:
    """How far a run has got, read from its files."""

    unit_locks: int  # units started (each unit's lock file stays)
    finished_units: int
    children: int  # child runs in the MLflow store
    finished_children: int  # of them, FINISHED
    files: frozenset[str]  # in the output directory
    text: str = field(repr=False)  # the command's output, whitespace collapsed


@dataclass(frozen=True)
class Run:
    """Where a run writes: its output directory, unit store, MLflow store and output."""

    output: Path
    units: Path
    db: Path
    log: Path

    def state(self) -> State:
        children = self._children()
        return State(len(list(self.units.glob("*/.*.lock"))),
                     len(list(self.units.glob(UNITS_GLOB))), *children,
                     frozenset(path.name for path in self.output.glob("*")),
                     " ".join(self.log.read_text().split()))

    def _children(self) -> tuple[int, int]:
        """Child runs in the MLflow store, and of them FINISHED; (0, 0) while it is not
        readable (not created yet, or locked by a write)."""
        if not self.db.exists():
            return 0, 0
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True,
                                                    timeout=1)) as db:
                return db.execute(
                    "SELECT count(*), coalesce(sum(r.status = 'FINISHED'), 0) FROM runs r "
                    "JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'mlflow.parentRunId'"
                ).fetchone()
        except sqlite3.Error:
            return 0, 0


@dataclass(frozen=True)
class Phase:
    """A phase of the run: ``during`` holds while the run is in it, ``past`` once it is over."""

    during: Callable[[State], bool]
    past: Callable[[State], bool]


PHASES = {
    # the test holds the pipe half written: the command is reading its log
    "loading": Phase(lambda s: s.unit_locks == 0 and "tracking.json" not in s.files,
                     lambda s: s.unit_locks > 0),
    "units": Phase(lambda s: s.unit_locks > 0 and s.finished_units < N_UNITS,
                   lambda s: s.finished_units == N_UNITS),
    "tables": Phase(lambda s: TABLES_WARNING in s.text and "results.csv" not in s.files,
                    lambda s: "results.csv" in s.files),
    "report": Phase(lambda s: "results.csv" in s.files and "report.html" not in s.files,
                    lambda s: "report.html" in s.files),
    "child-logging": Phase(lambda s: 0 < s.children < N_CHILDREN,
                           lambda s: s.children == N_CHILDREN),
    "final-logging": Phase(lambda s: 0 < s.finished_children < N_CHILDREN
                           and "report.html" in s.files,
                           lambda s: s.finished_children == N_CHILDREN),
}


def in_phase(phase: str, run: Run, process: subprocess.Popen[bytes]) -> State:
    """The run's state once it is in ``phase`` (looked at every 50 ms); fails should the run
    get past the phase between two looks or end."""
    deadline = time.monotonic() + 600
    while True:
        now = run.state()
        if PHASES[phase].during(now):
            return now
        assert not PHASES[phase].past(now), f"past {phase} between two looks: {now}"
        assert process.poll() is None, f"sweval exited before {phase}:\n{now.text[-3000:]}"
        assert time.monotonic() < deadline, f"not in {phase} after 600 s:\n{now.text[-3000:]}"
        time.sleep(0.05)


@contextlib.contextmanager
def half_read_pipe(fifo: Path, data: bytes, process: subprocess.Popen[bytes],
                    log: Path) -> Iterator[None]:
    """Once ``process`` has opened the named pipe ``fifo``, half of ``data`` written into it:
    the command is reading its log, and waits there for the rest (closed at the end)."""
    handle: list[int] = []

    def opened() -> bool:
        with contextlib.suppress(OSError):  # ENXIO: no reader yet
            handle.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        return bool(handle)

    wait_for(opened, process, log, "reading the pipe", timeout_s=60)
    try:
        os.set_blocking(handle[0], True)
        os.write(handle[0], data[: len(data) // 2])
        yield
    finally:
        os.close(handle[0])
