"""Starting, checking and stopping the warm process (:mod:`flows.warm_server`) for
``sweval up``, ``sweval status`` and ``sweval down``; its record is ``$SWEVAL_HOME/warm.json``::

    sweval up       a warm process that answers with this installation's identity stays; one
                    that does not (gone, source edited, other environment) is stopped and a
                    new one started in a session of its own, next to the two servers, and
                    waited for until its socket answers (WARM_TIMEOUT_S); if it cannot start,
                    one warning, and commands run in-process. `sweval up --no-warm` (or
                    SWEVAL_WARM=0 in up's environment) stops a running one and starts none.
    sweval status   its socket, pid, and whether it answers and matches this installation
    sweval down     SIGTERM to it (it stops its children: each unwinds as on Ctrl-C), then
                    SIGTERM and SIGKILL (flows.processes.terminate_then_kill) to whatever of
                    its process tree is left after the grace; record and socket removed
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from sweval.flows import warm_client
from sweval.flows.server_state import Server
from sweval.flows.servers import leader_process, log_tail
from sweval.flows.settings import sweval_home

#: The record's name under ``$SWEVAL_HOME``.
STATE_FILE = "warm.json"
#: Seconds ``sweval up`` waits for the warm process's socket (its imports: 3-5 s on 2 cores).
WARM_TIMEOUT_S = 120.0
#: Seconds the warm process gets to stop its children and exit before its tree is killed
#: (its own grace for each child, flows.warm_server.GRACE_S, plus a margin).
STOP_GRACE_S = 15.0


def state_path() -> Path:
    return sweval_home() / STATE_FILE


def recorded() -> Server | None:
    """The recorded warm process, or None."""
    try:
        return Server(**json.loads(state_path().read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def client_sys_path() -> list[str]:
    """The sys.path the ``sweval`` console script of this interpreter has: its folder (where
    installers put scripts, sysconfig's ``scripts`` path) first, then this process's."""
    return [sysconfig.get_path("scripts"), *sys.path[1:]]


def hello(timeout: float = warm_client.HANDSHAKE_TIMEOUT_S) -> dict[str, object] | None:
    """The hello of the process listening on ``$SWEVAL_HOME/warm.sock``, or None."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(warm_client.socket_path())
            return warm_client.recv_message(sock)
    except (OSError, ValueError, ConnectionError):
        return None


def stale_reason(greeting: dict[str, object]) -> str | None:
    """Why the warm process that said ``greeting`` would not run this installation's commands,
    in words, or None when it would."""
    mine = warm_client.identity(client_sys_path())
    key = warm_client.mismatch(greeting, mine)
    return None if key is None else warm_client.explain_mismatch(key, greeting, mine)


def _alive(server: Server) -> bool:
    return leader_process(server) is not None


def status() -> tuple[Server, bool, dict[str, object] | None] | None:
    """The recorded warm process, whether it is alive, and its hello when it answers."""
    server = recorded()
    if server is None:
        return None
    greeting = hello() if _alive(server) else None
    if greeting is not None and greeting.get("pid") != server.pid:
        greeting = None  # the socket is another process's
    return server, _alive(server), greeting


def start() -> tuple[Server, subprocess.Popen[bytes]]:
    """Start the warm process in a session of its own (not waiting for it)."""
    import psutil

    logs = sweval_home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "warm-server.log"
    env = dict(os.environ) | {"SWEVAL_WARM_SYS_PATH": json.dumps(client_sys_path())}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", "from sweval.flows.warm_server import main; main()"],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=sweval_home(),
        )
    path = warm_client.socket_path()
    server = Server(name="warm", pid=process.pid,
                    create_time=psutil.Process(process.pid).create_time(), port=0,
                    url=f"unix:{path}", health_url="", log=str(log))
    return server, process


def wait_ready(server: Server, process: subprocess.Popen[bytes], timeout: float) -> str | None:
    """Wait until the started warm process answers; record it. Returns None when it does, else
    why not, in words (it is stopped then)."""
    from sweval.flows.processes import detach

    deadline = time.monotonic() + timeout
    why = f"it did not answer within {timeout:.0f} s"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            why = f"it exited with status {process.returncode}"
            break
        greeting = hello(timeout=1.0)
        if greeting is not None and greeting.get("pid") == server.pid:
            stale = stale_reason(greeting)
            if stale is None:
                detach(server.pid)
                path = state_path()
                path.with_suffix(".tmp").write_text(json.dumps(asdict(server), indent=2),
                                                    encoding="utf-8")
                path.with_suffix(".tmp").replace(path)
                return None
            why = f"it reports {stale}"
            break
        time.sleep(0.1)
    stop_process(server)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
    tail = log_tail(server.log, n_lines=8)
    return f"{why}; see {server.log}" + (f":\n{tail}" if tail else "")


def needs_start(say: Callable[[str], None]) -> bool:
    """Whether a warm process should be started: none answers for this installation. A stale
    one (the source changed, ...) is stopped, unless commands are still running in it: those
    are not cut short (``say`` tells how to restart it later), and commands run in-process
    meanwhile."""
    found = status()
    if found is not None:
        server, alive, greeting = found
        stale = stale_reason(greeting) if greeting is not None else "it does not answer"
        if alive and stale is None:
            return False
        running = _running_children(server) if alive else 0
        if running:
            say(f"the warm process (pid {server.pid}) is out of date ({stale}) but runs "
                f"{running} command{'s' if running > 1 else ''}: left as it is; run `sweval "
                "up` again once they finish (until then commands run in-process).")
            return False
        stop()
    return True


def _running_children(server: Server) -> int:
    import psutil

    leader = leader_process(server)
    try:
        return sum(_running(p) for p in leader.children()) if leader is not None else 0
    except psutil.Error:
        return 0


def stop_process(server: Server, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM to the warm process; after ``grace_s``, SIGTERM then SIGKILL to whatever is
    left of its tree (listed before any signal). Returns whether it was running."""
    import psutil

    from sweval.flows.processes import terminate_then_kill

    leader = leader_process(server)
    if leader is None:
        return False
    try:
        tree = [leader, *leader.children(recursive=True)]
    except psutil.Error:
        tree = [leader]
    with contextlib.suppress(psutil.Error):
        leader.terminate()
    psutil.wait_procs([leader], timeout=grace_s)
    terminate_then_kill([p for p in tree if _running(p)], grace_s=5.0)
    return True


def _running(process: object) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE  # type: ignore[attr-defined]
    except psutil.Error:
        return False


def stop() -> tuple[Server, bool] | None:
    """Stop the recorded warm process (see :func:`stop_process`), forget it, and remove its
    socket when no other process answers there. None when none is recorded."""
    server = recorded()
    if server is None:
        return None
    running = stop_process(server)
    state_path().unlink(missing_ok=True)
    greeting = hello(timeout=1.0)
    if greeting is None or greeting.get("pid") == server.pid:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(warm_client.socket_path())
    return server, running
