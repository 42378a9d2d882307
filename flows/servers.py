"""The local servers of ``sweval up``: a Prefect server and an MLflow server in the background.

Without them, every ``sweval run`` starts Prefect's temporary API server (its module import and
about 3 s until it answers, on 2 cores) and opens the MLflow store in its own process. With them
up, a run only connects, and both UIs stay open between runs::

    sweval up       start `prefect server start` and `mlflow server` on 127.0.0.1, each the leader
                    of a session of its own (detached: they outlive the command and the terminal),
                    wait until both answer their health endpoints, record them in
                    $SWEVAL_HOME/servers.json, print both URLs
    sweval run      state file present and both servers answer → PREFECT_API_URL and
    (and compare,   MLFLOW_TRACKING_URI point at them (unless the user set either: theirs wins);
    leakage, gap,   present but not answering → one notice, and today's behaviour
    report, ui)
    sweval status   each server's URL, pid and whether it answers
    sweval down     SIGTERM to each server's process group, SIGKILL after a grace; state file gone

The servers keep their state where a plain run keeps it: Prefect's database in ``PREFECT_HOME``
(``$SWEVAL_HOME/prefect/prefect.db``, the temporary server's too) and MLflow's store at the URI a
plain run resolves (``$MLFLOW_TRACKING_URI``, else ``sqlite:///$SWEVAL_HOME/mlflow.db``, its
artifacts next to it), so runs logged before, during and after ``sweval up`` are in one place.
Their output goes to ``$SWEVAL_HOME/logs/{prefect,mlflow}-server.log``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.evaluators.units.locks import register_for_life, registrants
from sweval.flows.server_state import (
    STATE_FILE,
    Server,
    read_state,
    recorded_servers,
    served_store,
    state_path,
)
from sweval.flows.settings import sweval_home

_log = logging.getLogger(__name__)

__all__ = ["STATE_FILE", "Server", "down", "mlflow_server_of", "read_state", "recorded_servers",
           "server_users", "served_store", "state_path", "status", "up", "use_local_servers"]

HOST = "127.0.0.1"
#: The folder under ``$SWEVAL_HOME`` where the commands using the servers register.
USERS_FOLDER = "server-users"
DEFAULT_PREFECT_PORT = 4200
DEFAULT_MLFLOW_PORT = 5000
#: Seconds ``sweval up`` waits for both servers (measured 8-26 s each on 2 cores).
START_TIMEOUT_S = 180.0
#: Seconds a server gets to exit after SIGTERM before SIGKILL.
GRACE_S = 10.0
#: Seconds a run waits for a health answer before falling back to today's behaviour.
HEALTH_TIMEOUT_S = 3.0


# -- processes --------------------------------------------------------------------------------


def leader_process(server: Server) -> Any:
    """The server's live leader process (psutil), or None when it has exited (or its pid now
    belongs to another process)."""
    import psutil

    try:
        process = psutil.Process(server.pid)
        if abs(process.create_time() - server.create_time) > 1.0:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process
    except psutil.Error:
        return None


def _group_members(pgid: int, since: float) -> list[Any]:
    """Live processes of process group ``pgid`` started at or after ``since`` (a session's
    members outlive its leader; older ones belong to an unrelated group with a reused id)."""
    import psutil

    members = []
    for process in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if (process.info["status"] != psutil.STATUS_ZOMBIE
                    and process.info["create_time"] >= since - 1.0
                    and os.getpgid(process.pid) == pgid):
                members.append(process)
        except (psutil.Error, OSError):
            continue
    return members


def stop_server(server: Server, grace_s: float = GRACE_S) -> bool:
    """Stop the server's whole process group: SIGTERM, then SIGKILL what is left after
    ``grace_s``. Returns whether anything of it was still running. A recorded pid that cannot
    be a server's session (0, 1, this command's own process group: a corrupt state file) is
    never signalled."""
    import psutil

    from sweval.flows.processes import terminate_then_kill

    if server.pid <= 1 or server.pid == os.getpgrp():
        _log.warning("not stopping %s: its recorded pid %d is not a server's", server.name,
                     server.pid)
        return False
    leader = leader_process(server)
    members = _group_members(server.pid, server.create_time)
    if leader is not None:
        with contextlib.suppress(psutil.Error):
            members += [p for p in leader.children(recursive=True) if p not in members]
        if leader not in members:
            members.append(leader)
    if not members:
        return False
    terminate_then_kill(members, grace_s)
    return True


def port_holder(port: int) -> str | None:
    """Why ``port`` on 127.0.0.1 cannot be bound, in words (the holding process where psutil
    can tell), or None when it is free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            sock.bind((HOST, port))
            return None
        except OSError as exc:
            reason = exc.strerror or str(exc)
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
                if conn.pid is None:
                    return "held by a process of another user"
                with contextlib.suppress(psutil.Error):
                    process = psutil.Process(conn.pid)
                    command = " ".join(process.cmdline()[:4]) or process.name()
                    return f"held by pid {conn.pid} ({command})"
                return f"held by pid {conn.pid}"
    return reason.lower()


def answers(server: Server, timeout: float = HEALTH_TIMEOUT_S) -> bool:
    """Whether the server answers its health endpoint (Prefect: ``true``, MLflow: ``OK``)."""
    try:
        with urllib.request.urlopen(server.health_url, timeout=timeout) as response:
            body = response.read(64).strip().lower()
            return response.status == 200 and body in (b"true", b"ok")
    except (OSError, ValueError):
        return False


# -- up / down / status -----------------------------------------------------------------------


def _commands(
    prefect_port: int, mlflow_port: int, mlflow_store: str
) -> list[tuple[str, list[str], dict[str, str]]]:
    """(name, argv, environment) of both servers."""
    from sweval.flows.tracking.server import server_command, server_env

    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    prefect_env = base | {
        "PREFECT_UI_API_URL": f"http://{HOST}:{prefect_port}/api",
        # a server's log is read when something fails (SW-EVAL's default silences the
        # temporary server's shutdown chatter only)
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    }
    prefect = [sys.executable, "-m", "prefect", "server", "start",
               "--host", HOST, "--port", str(prefect_port)]
    mlflow = server_command(mlflow_store, host=HOST, port=mlflow_port)
    return [("prefect", prefect, prefect_env), ("mlflow", mlflow, server_env())]


def mlflow_store() -> str:
    """The store ``sweval up``'s MLflow server serves: the one a plain ``sweval run`` uses.

    Raises:
        SwevalError: ``MLFLOW_TRACKING_URI`` names a tracking server already.
    """
    from sweval.evaluators.wording import shown_uri
    from sweval.flows.tracking.client import resolve_uri

    uri = resolve_uri()
    if uri.split(":", 1)[0] in ("http", "https", "databricks"):
        raise SwevalError(
            f"MLFLOW_TRACKING_URI={shown_uri(uri)} is a tracking server already: sweval up "
            "serves a local store (unset MLFLOW_TRACKING_URI, or set it to a database URI)."
        )
    return uri


@contextlib.contextmanager
def _servers_lock() -> Iterator[None]:
    """One ``sweval up``/``down`` at a time per ``$SWEVAL_HOME``."""
    from filelock import FileLock

    home = sweval_home()
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(home / "servers.lock", thread_local=False):
        yield


def up(
    prefect_port: int | None = None,
    mlflow_port: int | None = None,
    *,
    timeout: float = START_TIMEOUT_S,
    say: Callable[[str], None] = print,
) -> tuple[list[Server], bool]:
    """Start both servers in the background and wait until they answer.

    Servers that the state file records but that are no longer up (killed, crashed) are stopped
    for good and started again, on the ports they had unless others are given; ``say`` tells
    which and where.

    Args:
        prefect_port, mlflow_port: the ports; None: the recorded server's port when it is no
            longer up, else the default (4200, 5000).

    Returns:
        The servers, and whether they were started now (False: they were up already).

    Raises:
        SwevalError: a port is taken, or a server exited or did not answer in ``timeout``
            seconds (nothing is left running then).
    """
    with _servers_lock():
        running = recorded_servers(read_state())
        health = {server.name: _health(server) for server in running}
        if running and all(state == "up" for state in health.values()):
            return running, False
        ports = _ports({"prefect": prefect_port, "mlflow": mlflow_port}, running)
        if running:  # stale: stop what is left of it
            say(_restart_notice(running, health, ports))
            for server in running:
                stop_server(server)
            state_path().unlink(missing_ok=True)
        if ports["prefect"] == ports["mlflow"]:
            raise SwevalError(f"--prefect-port and --mlflow-port are both {ports['prefect']}.")
        for name, port in ports.items():
            held = port_holder(port)
            if held is not None:
                raise SwevalError(f"port {port} on {HOST} is taken ({held}): stop that process "
                                  f"or choose another port with --{name}-port.")
        store = mlflow_store()
        servers = _start(ports["prefect"], ports["mlflow"], store, timeout=timeout, say=say)
        state = {"servers": [asdict(s) for s in servers], "mlflow_store": store,
                 "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        path = state_path()
        path.with_suffix(".tmp").write_text(json.dumps(state, indent=2), encoding="utf-8")
        path.with_suffix(".tmp").replace(path)
        return servers, True


def _ports(asked: dict[str, int | None], stale: list[Server]) -> dict[str, int]:
    """The port of each server: the one asked for, else the port of its recorded (stale)
    server, so that it comes back where it was, else the default."""
    recorded = {server.name: server.port for server in stale}
    defaults = {"prefect": DEFAULT_PREFECT_PORT, "mlflow": DEFAULT_MLFLOW_PORT}
    return {name: port if port is not None else recorded.get(name, defaults[name])
            for name, port in asked.items()}


def _restart_notice(stale: list[Server], health: dict[str, str], ports: dict[str, int]) -> str:
    """What ``sweval up`` does about recorded servers that are not all up, in words: how each
    is (``health``, by name), on which port, and the ports the new ones get."""
    found = "; ".join(f"{s.name} on port {s.port}: {health[s.name]}" for s in stale)
    return (f"the servers that {state_path()} records are not all up ({found}): stopping what "
            f"is left of them and starting them again on ports {ports['prefect']} (Prefect) "
            f"and {ports['mlflow']} (MLflow)")


def _health(server: Server) -> str:
    """``process gone``, ``not answering`` or ``up``: a recorded server's state in words."""
    if leader_process(server) is None:
        return "process gone"
    return "up" if answers(server) else "not answering"


def _start(
    prefect_port: int, mlflow_port: int, store: str, *, timeout: float,
    say: Callable[[str], None],
) -> list[Server]:
    """Start both servers detached, wait for their health endpoints; on any failure (or an
    interrupt) stop both before raising."""
    import psutil

    from sweval.flows.processes import detach
    from sweval.flows.tracking.client import prepare_sqlite_store

    logs = sweval_home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started: list[tuple[Server, subprocess.Popen[bytes]]] = []
    try:
        for name, argv, env in _commands(prefect_port, mlflow_port, store):
            if name == "mlflow":  # built whole before its server opens it (while Prefect's starts)
                prepare_sqlite_store(store)
            port = prefect_port if name == "prefect" else mlflow_port
            log = logs / f"{name}-server.log"
            with open(log, "wb") as out:
                process = subprocess.Popen(
                    argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True, cwd=sweval_home(),
                )
            url = f"http://{HOST}:{port}"
            health = f"{url}/api/health" if name == "prefect" else f"{url}/health"
            server = Server(name=name, pid=process.pid,
                            create_time=psutil.Process(process.pid).create_time(),
                            port=port, url=url, health_url=health, log=str(log))
            started.append((server, process))
        say(f"starting the Prefect and MLflow servers (about 6-10 s; logs in {logs})")
        pending = {server.name: (server, process) for server, process in started}
        deadline = time.monotonic() + timeout
        while pending:
            for name, (server, process) in list(pending.items()):
                if process.poll() is not None:
                    raise SwevalError(
                        f"the {name} server exited with status {process.returncode} before "
                        f"answering: see {server.log}:\n{log_tail(server.log)}")
                if answers(server, timeout=2.0):
                    del pending[name]
            if pending and time.monotonic() > deadline:
                names = " and ".join(pending)
                raise SwevalError(f"the {names} server did not answer within {timeout:.0f} s: "
                                  "see " + ", ".join(s.log for s, _ in pending.values()) + ".")
            if pending:
                time.sleep(0.25)
    except BaseException:
        for server, process in started:
            stop_server(server, grace_s=5.0)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        raise
    for server, _process_ in started:
        detach(server.pid)  # not one of this command's children to stop at its exit
    return [server for server, _ in started]


def log_tail(log: str, n_lines: int = 12) -> str:
    """The last ``n_lines`` of a server's log file ("" when it cannot be read)."""
    try:
        return "\n".join(Path(log).read_text(errors="replace").splitlines()[-n_lines:])
    except OSError:
        return ""


def down() -> list[tuple[Server, bool]]:
    """Stop both servers (their process groups) and remove the state file.

    Returns:
        Each recorded server, and whether it was still running.
    """
    with _servers_lock():
        servers = recorded_servers(read_state())
        stopped = [(server, stop_server(server)) for server in servers]
        state_path().unlink(missing_ok=True)
        return stopped


def mlflow_server_of(store: str) -> str | None:
    """The address of the MLflow server of ``sweval up`` when it has ``store`` open and answers
    (the reverse of :func:`served_store`), else None."""
    state = read_state()
    if not state or state.get("mlflow_store") != store:
        return None
    found = [s for s in recorded_servers(state) if s.name == "mlflow"]
    return found[0].url if found and answers(found[0]) else None


def status() -> list[tuple[Server, bool, bool]]:
    """Each recorded server, whether its process is alive, whether it answers."""
    return [(s, leader_process(s) is not None, answers(s)) for s in recorded_servers(read_state())]


def use_local_servers(*, prefect: bool, say: Callable[[str], None]) -> None:
    """Point this process (and what it starts) at ``sweval up``'s servers, when the state file
    says they are up and they answer. A ``PREFECT_API_URL`` (environment or Prefect profile)
    or ``MLFLOW_TRACKING_URI`` the user set wins; ``--tracking-uri`` wins over both (it is read
    before the environment). Call before Prefect is imported.

    Args:
        prefect: the command runs Prefect flows (``run``, ``serve``); else MLflow only.
        say: where the notice goes when the servers are recorded but do not answer.
    """
    servers = {s.name: s for s in recorded_servers(read_state())}
    if not servers:
        return
    wanted = [s for s in servers.values() if prefect or s.name == "mlflow"]
    silent = [s for s in wanted if not answers(s)]
    if silent:
        names = " and ".join(f"{s.name} ({s.url})" for s in silent)
        say(f"sweval up's {names} server{'s do' if len(silent) > 1 else ' does'} not answer "
            "(see `sweval status`): this command runs without them, as without `sweval up`.")
        return
    used = False
    if "mlflow" in servers and not os.environ.get("MLFLOW_TRACKING_URI"):
        os.environ["MLFLOW_TRACKING_URI"] = servers["mlflow"].api_url
        used = True
    if prefect and "prefect" in servers and not os.environ.get("PREFECT_API_URL"):
        from prefect.settings import get_current_settings

        if get_current_settings().api.url is None:  # none in a profile, prefect.toml or .env
            os.environ["PREFECT_API_URL"] = servers["prefect"].api_url
            from prefect.context import refresh_global_settings_context

            refresh_global_settings_context()
            used = True
    if used:  # `sweval down` asks before stopping servers in use
        register_for_life(users_folder())


def users_folder() -> Path:
    """Where the commands using the servers register (:func:`evaluators.units.locks.registered`)."""
    return sweval_home() / USERS_FOLDER


def server_users() -> list[dict[str, Any]]:
    """The commands using the servers now, earliest first (pid, command, started)."""
    return registrants(users_folder())
