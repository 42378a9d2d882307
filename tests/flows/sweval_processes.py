"""A ``sweval`` command run as its own process for the signal tests: started in a session of its
own with a marker variable in its environment that every process it starts inherits, signalled
alone, then checked to have left no process behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

SWEVAL = Path(sys.executable).parent / "sweval"
MARKER = "SWEVAL_SIGNAL_TEST_ID"


def marked(marker: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``MARKER=marker``."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.status() != psutil.STATUS_ZOMBIE and \
                    process.environ().get(MARKER) == marker:
                found.append(process)
    return found


def alive(processes: list[psutil.Process]) -> list[str]:
    """Those of ``processes`` still running (the same process: pid and start time)."""
    left = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{process.pid} {' '.join(process.cmdline())[:150]}")
    return left


@contextlib.contextmanager
def sweval_command(
    args: list[str], tmp_path: Path, **env: str
) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """``sweval ARGS`` in a session of its own, marked; anything marked is SIGKILLed at the end.
    The environment is this one (less PREFECT_API_URL: no Prefect API unless ``env`` gives one)
    with ``env``."""
    marker = uuid.uuid4().hex
    log = tmp_path / f"sweval-{marker[:8]}.log"
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [str(SWEVAL), *args], env=base | env | {MARKER: marker}, cwd=tmp_path,
            stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process, marker, log
    finally:
        for left in marked(marker):
            with contextlib.suppress(psutil.Error):
                left.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def wait_for(check: Callable[[], bool], process: subprocess.Popen[bytes], log: Path, what: str,
             timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert process.poll() is None, f"sweval exited before {what}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, \
            f"not {what} after {timeout_s} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def tree(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


def assert_nothing_left(before: list[psutil.Process], marker: str, signum: int,
                        timeout_s: float) -> None:
    """Within ``timeout_s``, no process of ``before`` nor any marked one may be left."""
    deadline = time.monotonic() + timeout_s
    while (alive(before) or marked(marker)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive(before) == [], f"left behind after {signal.Signals(signum).name}"
    assert [p.pid for p in marked(marker)] == []


def exit_status(process: subprocess.Popen[bytes], log: Path, *, within_s: float,
                after: str) -> int:
    """The process's exit status; the test fails, with the end of its log, if it is still
    running ``within_s`` seconds after what was sent to it (``after``: "Ctrl-C", ...)."""
    try:
        return process.wait(timeout=within_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {within_s:g} s after {after}:\n{log.read_text()[-3000:]}")


def kill_outright_and_check(process: subprocess.Popen[bytes], marker: str) -> None:
    """SIGKILL the sweval process alone (nothing of it can run); its guards must stop the rest."""
    before = tree(process.pid)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert_nothing_left(before, marker, signal.SIGKILL, timeout_s=30)


def stop_and_check(process: subprocess.Popen[bytes], marker: str, log: Path, signum: int) -> int:
    """Signal the sweval process alone; then nothing it started may be left."""
    before = tree(process.pid)
    os.kill(process.pid, signum)
    status = exit_status(process, log, within_s=60, after=signal.Signals(signum).name)
    # children get SIGTERM, then SIGKILL after a grace
    assert_nothing_left(before, marker, signum, timeout_s=20)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    return status
