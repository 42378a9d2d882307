"""Stopping the processes a command started: every descendant at its exit (SIGTERM, then
SIGKILL after a grace), a server's whole process group, and a guard process that stops a server
even when the command itself is SIGKILLed (:mod:`flows.processes` decides when).

``mlflow server`` runs in a process group of its own, stopped as a group (:func:`stop_group`):
its workers are in it even when their parent died first. Servers started to outlive the command
(``sweval up``'s) are left alone (:func:`detach`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys

import psutil

_log = logging.getLogger("sweval.flows.processes")

#: Seconds a process gets to exit after SIGTERM before SIGKILL.
GRACE_S = 10.0
#: Children started to outlive this command (``sweval up``'s servers): never stopped at exit.
_detached: set[int] = set()


def detach(pid: int) -> None:
    """Leave the child ``pid`` and its descendants running when this command exits (a server
    started to outlive it, in a session of its own)."""
    _detached.add(pid)


def stop_descendants(grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM every live descendant of this process (except those given to :func:`detach`
    and theirs), SIGKILL those still alive after ``grace_s``; returns their pids. The tree is listed
    before anyone is signalled, so a grandchild whose parent exits first is not missed.

    Python's multiprocessing resource tracker (started by the local Dask cluster's worker
    processes) is left alone too: it ignores SIGTERM and SIGINT by design and exits by itself
    once this process has exited (its pipe closes), after unlinking whatever the workers leaked.
    Waiting for it made every ``--task-runner dask`` run wait the whole grace at exit (10 s),
    and SIGKILL would skip its clean-up."""
    try:
        descendants = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    kept: set[int] = set()
    for child in descendants:
        if child.pid in _detached:
            kept.add(child.pid)
            with contextlib.suppress(psutil.Error):
                kept |= {p.pid for p in child.children(recursive=True)}
    return terminate_then_kill(
        [p for p in descendants if p.pid not in kept and not _is_resource_tracker(p)], grace_s
    )


def _is_resource_tracker(process: psutil.Process) -> bool:
    """True for a ``multiprocessing.resource_tracker`` process (see :func:`stop_descendants`)."""
    try:
        return any("multiprocessing.resource_tracker" in part for part in process.cmdline())
    except psutil.Error:
        return False


def terminate_then_kill(processes: list[psutil.Process], grace_s: float) -> list[int]:
    """SIGTERM every process, then SIGKILL those still alive after ``grace_s``; their pids."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _gone, alive = psutil.wait_procs(processes, timeout=grace_s)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    return [process.pid for process in processes]


#: The guard of :func:`stop_with_this_process`, a child of the watched process: it waits until
#: its parent changes (the kernel hands an orphan to another process the moment its parent
#: exits, so a parent killed before the guard even started is seen too, and no reused pid is
#: mistaken for it), then stops the target if it still runs: its whole process group when it
#: leads one (a server started in a session of its own).
_GUARD = """
import os, signal, sys, time
import psutil
parent, grace_s = int(sys.argv[1]), float(sys.argv[3])
try:
    target = psutil.Process(int(sys.argv[2]))
    group = os.getpgid(target.pid) == target.pid
except (psutil.Error, OSError):
    sys.exit()
while os.getppid() == parent and target.is_running():
    time.sleep(0.5)

def send(signum):
    try:
        if group:
            os.killpg(target.pid, signum)
        elif target.is_running():
            target.send_signal(signum)
    except (psutil.Error, OSError):
        pass

if target.is_running() and os.getppid() != parent:
    send(signal.SIGTERM)
    try:
        target.wait(grace_s)
    except psutil.TimeoutExpired:
        send(signal.SIGKILL)
    except psutil.Error:
        pass
"""


def stop_with_this_process(pid: int, grace_s: float = GRACE_S) -> None:
    """Make sure the child ``pid`` stops when this process does, even by SIGKILL.

    SIGTERM, SIGINT and SIGHUP unwind a command and its exit stops what it started; SIGKILL
    (``kill -9``, the kernel's out-of-memory killer) ends it at once, and a server it started
    (Prefect's temporary API server: a ``uvicorn`` of about 200 MB) ran on, forever. A small
    guard process, in a session of its own, watches this process and stops ``pid`` (its
    process group when it leads one; SIGTERM, SIGKILL after ``grace_s``) once this one is
    gone; it exits with ``pid``. A guard that cannot start is only logged: the normal exit
    stops ``pid`` as before."""
    try:
        subprocess.Popen(
            [sys.executable, "-c", _GUARD, str(os.getpid()), str(pid), str(grace_s)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )
    except OSError as exc:
        _log.debug("no guard for process %d: %s", pid, exc)


def stop_group(process: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> None:
    """Stop ``process`` (the leader of its own process group) and everything it started: the
    tree as it is now and the whole group get SIGTERM, then SIGKILL after ``grace_s``."""
    try:
        tree = [psutil.Process(process.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.Error:
        tree = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    terminate_then_kill(tree, grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # anything of the group the tree did not show
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
