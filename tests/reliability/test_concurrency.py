"""Concurrent runs: one output directory, one run at a time; one shared unit store, shared units.

Two real ``sweval run --no-prefect`` processes (the fault tests' traced driver, every unit slowed
down so the runs overlap) are started at once:

- into the same ``--output``: one completes, the other stops at once with exit status 2 and an
  error naming the first (pid, host, start time); ``results.csv`` is the uninterrupted run's;
- into two outputs sharing one ``--cache``: both complete, every unit is computed once between
  them (the driver's journal), and both ``results.csv`` are the uninterrupted run's.

The lock itself (``evaluators/units/locks.py``) is checked in-process: the error's wording, and that a
lock whose holder was killed does not block the next run.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fault_helpers import base_options, finish, reference_results, start_driver, write_config
from sweval_testing import log_frame

from sweval.data.errors import SwevalError
from sweval.evaluators.units.locks import OUTPUT_LOCK, output_lock


def reference(values: dict[str, Any], output: Path) -> bytes:
    """results.csv of one run alone, in this process, with its own unit store."""
    return reference_results(values, output)


def journal_starts(journal: Path) -> list[tuple[int, str, str]]:
    """(pid, fold, algorithm) of every unit any process started computing."""
    rows = []
    for line in journal.read_text().splitlines() if journal.exists() else []:
        kind, pid, fold, algorithm = line.split()
        if kind == "start":
            rows.append((int(pid), fold, algorithm))
    return rows


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "log.csv"
    log_frame().to_csv(path, index=False)
    return path


# ------------------------------------------------------------------------------ the processes
@pytest.mark.slow
def test_two_runs_into_one_output_directory_one_clear_outcome(tmp_path: Path, log_file: Path):
    output = tmp_path / "out"
    values = base_options(log_file, output)
    config = write_config(tmp_path / "eval.json", **values)
    journal = tmp_path / "journal.txt"
    first = start_driver(config, journal, delay=0.3)
    second = start_driver(config, journal, delay=0.3)
    results = {first.pid: finish(first), second.pid: finish(second)}
    statuses = sorted(status for status, _out, _err in results.values())
    assert statuses == [0, 2], {pid: (s, err[-2000:]) for pid, (s, _o, err) in results.items()}
    winner = next(pid for pid, (status, _o, _e) in results.items() if status == 0)
    loser = next(pid for pid in results if pid != winner)
    _status, _out, err = results[loser]
    message = " ".join(err.split())
    assert "Traceback" not in err
    assert f"error: {output}: another sweval run is writing to this output directory: " \
           f"pid {winner} on host {socket.gethostname()}, started 20" in message, message
    assert re.search(r"started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 \(", message), message
    assert "Wait until it has finished (or stop it), or choose another --output." in message
    # The loser computed nothing and wrote nothing; the winner's tables are a lone run's.
    assert {pid for pid, _fold, _algorithm in journal_starts(journal)} == {winner}
    assert (output / "results.csv").read_bytes() == reference(values, tmp_path / "alone")


@pytest.mark.slow
def test_two_runs_sharing_a_unit_store_both_complete_and_share_units(
    tmp_path: Path, log_file: Path
):
    cache = tmp_path / "shared-units"
    journal = tmp_path / "journal.txt"
    processes = []
    for name in ("a", "b"):
        values = base_options(log_file, tmp_path / name)
        config = write_config(tmp_path / f"{name}.json", **values)
        processes.append(start_driver(config, journal, delay=0.3, extra=["--cache", str(cache)]))
    outcomes = [finish(process) for process in processes]
    for status, _out, err in outcomes:
        assert status == 0, err[-3000:]
    expected = reference(base_options(log_file, tmp_path / "alone"), tmp_path / "alone")
    n_units = len(list((tmp_path / "alone" / "units").glob("*/*/unit.json")))
    assert n_units == 18  # 6 folds x 3 algorithms
    starts = journal_starts(journal)
    computed = Counter((fold, algorithm) for _pid, fold, algorithm in starts)
    assert len(computed) == n_units and set(computed.values()) == {1}, computed  # each once
    by_process = Counter(pid for pid, _fold, _algorithm in starts)
    reused = {}
    for process, (_status, out, _err) in zip(processes, outcomes, strict=True):
        found = re.search(r"units: reused (\d+) units?, computed (\d+)", out)
        assert found, out
        reused[process.pid] = int(found[1])
        assert int(found[2]) == by_process.get(process.pid, 0)
        assert int(found[1]) + int(found[2]) == n_units
    # Neither run computed everything: the units were shared (journal and summaries agree).
    assert sum(by_process.values()) == n_units and sum(reused.values()) == n_units
    for name in ("a", "b"):
        assert (tmp_path / name / "results.csv").read_bytes() == expected, name
        assert not (tmp_path / name / "units").exists()  # the units went to the shared store


# ------------------------------------------------------------------------------ the lock itself
HOLDER = r"""
import sys, time
from sweval.evaluators.units.locks import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


def hold_lock(directory: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "locked"
    return process


def test_a_held_output_directory_names_its_holder_and_a_killed_holder_blocks_nothing(
    tmp_path: Path,
):
    directory = tmp_path / "out"
    holder = hold_lock(directory)
    try:
        with pytest.raises(SwevalError) as caught, output_lock(directory):
            pass
        message = str(caught.value)
        assert f"pid {holder.pid} on host {socket.gethostname()}, started " in message
        assert "-c " in message  # the holder's command line
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # no clean-up runs: the lock file stays behind
        holder.wait(timeout=10)
    assert (directory / OUTPUT_LOCK).exists()
    clock = time.monotonic()
    with output_lock(directory):  # the kernel released the dead holder's lock
        assert f'"pid": {os.getpid()}' in (directory / OUTPUT_LOCK).read_text()
    assert time.monotonic() - clock < 1.0


def test_an_output_directory_takes_only_its_own_commands_output(tmp_path: Path):
    """QA: `sweval gap --output <a run's directory>` replaced results.csv and report.html and
    left the run's other tables, a silent mix of two commands; leakage the same, even while
    the run was writing there."""
    directory = tmp_path / "out"
    with output_lock(directory):  # a run
        pass
    for other in ("gap", "leakage", "compare"):
        with pytest.raises(SwevalError, match=rf"holds the output of `sweval run`; `sweval "
                                              rf"{other}` would replace some of its files"), \
                output_lock(directory, command=other):
            pass
    with output_lock(directory):  # the run again: resumes
        pass
    older = tmp_path / "older-gap"  # written before lock records named their command
    older.mkdir()
    (older / "gap.json").write_text('{"validations": {}}')
    with pytest.raises(SwevalError, match="holds the output of `sweval gap`"), \
            output_lock(older):
        pass
    with output_lock(older, command="gap"):
        pass
    older_run = tmp_path / "older-run"  # QA: a run's output from before the lock said so
    older_run.mkdir()
    (older_run / "config.json").write_text("{}")  # a user's: the lock says SW-EVAL wrote here
    (older_run / OUTPUT_LOCK).write_text('{"pid": 1, "host": "h", "started": "s", "command": "c"}')
    with pytest.raises(SwevalError, match="holds the output of `sweval run`"), \
            output_lock(older_run, command="gap"):
        pass
    with output_lock(older_run):
        pass


def test_an_output_path_that_is_a_file_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "out"
    path.write_text("not a directory")
    with pytest.raises(SwevalError, match="--output names a file, not a directory"), \
            output_lock(path):
        pass


# ------------------------------------------------------------------------------ the catalogue
def test_the_operations_catalogue_names_tests_that_exist():
    """docs/reliability.md's "Processes, concurrency and upgrades" table: each row's test exists."""
    from sweval_testing import REPO

    text = (REPO / "docs" / "reliability.md").read_text()
    section = text.split("## Processes, concurrency and upgrades", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    named = [re.search(r"`(tests/[\w/]+\.py)::(\w+)` \|$", row) for row in rows]
    assert len(rows) >= 8 and all(named), rows
    for found in named:
        path, name = found[1], found[2]
        source = (REPO / path).read_text()
        assert re.search(rf"^def {name}\(", source, re.M), f"{path}::{name} does not exist"


def test_a_deployment_s_flow_run_is_named_as_the_holder_of_an_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A served flow run's command line is Prefect's engine: the lock names its flow run."""
    from sweval.evaluators.units.locks import describe_owner, output_lock

    monkeypatch.setenv("PREFECT__FLOW_RUN_ID", "0b7c3e2a-1111-4222-8333-944455556666")
    with output_lock(tmp_path):
        lock_file = next(tmp_path.glob("*lock*"))
        assert describe_owner(lock_file).endswith(
            "(Prefect flow run 0b7c3e2a-1111-4222-8333-944455556666)")
