"""``sweval up`` / ``down`` / ``status``: Prefect's background server and ``mlflow server``.

::

    sweval up      Prefect's server as `prefect server start --background` runs it, answering
                   only its own host (:mod:`flows.local_api`; its pid in Prefect's pid file,
                   $PREFECT_HOME/server.pid) and `mlflow server` in a session of its own (its pid
                   in $SWEVAL_HOME/servers.json), both on 127.0.0.1; returns once both answer
    sweval run ... each recorded server that answers is used, unless the user chose another
    sweval status  whether each answers (exit status 0: all do)
    sweval down    `prefect server stop`, then SIGTERM to MLflow's process group; SIGKILL to
                   whatever is left of either after a grace

The servers keep their data where a plain run does (Prefect's database in ``PREFECT_HOME``,
MLflow's store at the URI a plain run resolves), so runs before, during and after ``sweval up``
are in one place. A database password reaches ``mlflow server`` through its environment, never
its command line; ``servers.json`` records the store with the password masked. Their logs are
``$SWEVAL_HOME/logs/{prefect,mlflow}-server.log``.
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
from collections.abc import Callable, Iterator
from pathlib import Path

from sweval.data.errors import SwevalError
from sweval.evaluators.state import SERVERS
from sweval.evaluators.wording import shown_uri
from sweval.flows.settings import sweval_home

HOST = "127.0.0.1"
DEFAULT_PORTS = {"prefect": 4200, "mlflow": 5000}
HEALTH = {"prefect": "/api/health", "mlflow": "/health"}
#: Seconds ``sweval up`` waits for both servers (measured 8-26 s each on 2 cores).
START_TIMEOUT_S = 180.0
#: Seconds a server gets to exit after SIGTERM before SIGKILL.
GRACE_S = 10.0
#: Where the commands using the servers register (``sweval down`` names them).
USERS_FOLDER = "server-users"

#: The Prefect server's logging: to its log file. ``--background`` gives the server a pipe that
#: nobody reads once ``prefect server start`` has exited, and Prefect's console handler ends the
#: server at its first warning written there (rich exits on a broken pipe).
_PREFECT_LOGGING = """version: 1
disable_existing_loggers: false
formatters: {plain: {format: "%(asctime)s | %(levelname)-7s | %(name)s - %(message)s"}}
handlers: {file: {class: logging.FileHandler, filename: "@LOG@", formatter: plain}}
loggers:
  prefect.server: {level: WARNING}
  prefect._internal: {level: WARNING, handlers: [file], propagate: false}
  uvicorn: {level: WARNING, handlers: [file], propagate: false}
  uvicorn.access: {level: WARNING, handlers: [file], propagate: false}
  fastapi: {level: WARNING, handlers: [file], propagate: false}
root: {level: WARNING, handlers: [file]}
"""


def answers(url: str, health: str, timeout: float = 3.0) -> bool:
    """Whether the server at ``url`` answers its health endpoint (``true`` or ``OK``)."""
    try:
        with urllib.request.urlopen(url + health, timeout=timeout) as response:
            return response.status == 200 and response.read(64).strip().lower() in (b"true", b"ok")
    except (OSError, ValueError):
        return False


def recorded() -> dict[str, str]:
    """The URL of each server ``sweval up`` recorded, by name."""
    state = SERVERS.read(sweval_home())
    return {name: state[name]["url"] for name in DEFAULT_PORTS
            if isinstance(state.get(name), dict) and "url" in state[name]}


def port_holder(port: int) -> str | None:
    """Why ``port`` on 127.0.0.1 cannot be bound, in words, or None when it is free."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
        try:
            sock.bind((HOST, port))
            return None
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
                command = " ".join(psutil.Process(conn.pid).cmdline()[:4])
                return f"held by pid {conn.pid} ({command})"
    return reason


@contextlib.contextmanager
def _servers_lock() -> Iterator[None]:
    """One ``sweval up``/``down`` at a time per ``$SWEVAL_HOME``."""
    from filelock import FileLock

    sweval_home().mkdir(parents=True, exist_ok=True)
    with FileLock(sweval_home() / "servers.lock", thread_local=False):
        yield


def up(ports: dict[str, int | None], *, timeout: float = START_TIMEOUT_S,
       say: Callable[[str], None] = print) -> tuple[dict[str, str], bool]:
    """Start both servers (unless both answer already) and wait until they answer.

    Servers recorded but not answering are stopped and started again, on their ports unless
    others are given. Returns each server's URL and whether they were started now.

    Raises:
        SwevalError: a port is taken, or a server did not answer in ``timeout`` seconds (both
            are stopped then).
    """
    with _servers_lock():
        urls = recorded()
        if len(urls) == 2 and all(answers(url, HEALTH[name]) for name, url in urls.items()):
            return urls, False
        chosen = {name: ports.get(name) or (int(urls[name].rsplit(":", 1)[1]) if name in urls
                                            else default) for name, default in DEFAULT_PORTS.items()}
        if urls:
            say(f"the servers {SERVERS.path(sweval_home())} records do not all answer: "
                f"starting them again on ports {chosen['prefect']} (Prefect) and "
                f"{chosen['mlflow']} (MLflow)")
            _stop_all()
        if chosen["prefect"] == chosen["mlflow"]:
            raise SwevalError(f"--prefect-port and --mlflow-port are both {chosen['prefect']}.")
        for name, port in chosen.items():
            if (held := port_holder(port)) is not None:
                raise SwevalError(f"port {port} on {HOST} is taken ({held}): stop that process "
                                  f"or choose another port with --{name}-port.")
        urls = {name: f"http://{HOST}:{port}" for name, port in chosen.items()}
        logs = sweval_home() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        say(f"starting the Prefect and MLflow servers (about 6-10 s; logs in {logs})")
        try:
            _start_prefect(chosen["prefect"], logs / "prefect-server.log")
            _start_mlflow(chosen["mlflow"], logs / "mlflow-server.log")
            _wait(urls, timeout, logs)
        except BaseException:
            _stop_all()
            raise
        return urls, True


def _start_prefect(port: int, log: Path) -> None:
    """Prefect's server as ``prefect server start --background`` runs it (uvicorn, its pid in
    Prefect's pid file, so that ``prefect server stop`` stops it too), accepting only its own
    origin and host: CORS limited to its address, CSRF tokens required for writes (Prefect's
    client fetches them itself), and requests addressed to another host refused
    (:mod:`flows.local_api`)."""
    from sweval.flows.local_api import server_argv
    from sweval.flows.process_tree import detach

    url = f"http://{HOST}:{port}"
    pid_file = _prefect_pid_file()
    if pid_file.exists() and _pid("prefect") is not None:
        raise SwevalError(f"a Prefect server started in the background is running (pid "
                          f"{pid_file.read_text().strip()}): stop it (`prefect server stop`).")
    settings = sweval_home() / "prefect-server-logging.yml"
    settings.write_text(_PREFECT_LOGGING.replace("@LOG@", str(log)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {
        "PREFECT_UI_API_URL": f"{url}/api", "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        "PREFECT_LOGGING_SETTINGS_PATH": str(settings),
        "PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS": f"{url},http://localhost:{port}",
        "PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED": "true", "PREFECT__SERVER_FINAL": "1"}
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [*server_argv(port), "--timeout-keep-alive", "5"], env=env,
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=sweval_home())
    detach(process.pid)  # it outlives this command
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(str(process.pid))
    SERVERS.write(sweval_home(), SERVERS.read(sweval_home()) | {"prefect": {"url": url}})


def _start_mlflow(port: int, log: Path) -> None:
    """``mlflow server`` in a session of its own, the store's URI in its environment."""
    import psutil

    from sweval.flows.process_tree import detach
    from sweval.flows.tracking.server import server_command, server_env
    from sweval.flows.tracking.sqlite_store import prepare_sqlite_store

    store = mlflow_store()
    prepare_sqlite_store(store)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            server_command(store, host=HOST, port=port), env=server_env(store),
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=sweval_home())
    detach(process.pid)  # it outlives this command
    SERVERS.write(sweval_home(), SERVERS.read(sweval_home()) | {"mlflow": {
        "url": f"http://{HOST}:{port}", "pid": process.pid,
        "create_time": psutil.Process(process.pid).create_time()}, "mlflow_store": shown_uri(store)})


def _wait(urls: dict[str, str], timeout: float, logs: Path) -> None:
    deadline = time.monotonic() + timeout
    pending = dict(urls)
    while pending:
        pending = {n: u for n, u in pending.items() if not answers(u, HEALTH[n], timeout=2.0)}
        gone = [n for n in pending if _pid(n) is None]
        if gone or (pending and time.monotonic() > deadline):
            names = " and ".join(gone or pending)
            raise SwevalError(f"the {names} server {'exited' if gone else 'did not answer'} "
                              f"within {timeout:.0f} s: see {logs}.")
        time.sleep(0.25 if pending else 0)


def _pid(name: str) -> int | None:
    """The live pid of a server: Prefect's pid file's, or MLflow's process group (its recorded
    leader, whose start time must match so that a reused pid is never taken for it, or, the
    leader gone, what is left of its group). A pid that cannot be a server's (0, init, this
    command's own group: a corrupt file) is never taken."""
    import psutil

    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, psutil.Error):
        record = SERVERS.read(sweval_home())["mlflow"] if name == "mlflow" else {}
        pid = int(record["pid"] if record else _prefect_pid_file().read_text())
        if pid <= 1 or pid in (os.getpid(), os.getpgrp()):
            return None
        if name == "prefect":
            return pid if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE else None
        since = float(record["create_time"])
        for process in psutil.process_iter(["create_time", "status"]):
            with contextlib.suppress(psutil.Error, OSError):
                if (process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == pid
                        and process.info["create_time"] >= since - 1):
                    return pid
    return None


def _prefect_pid_file() -> Path:
    return Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser() / "server.pid"


def _stop_all() -> dict[str, bool]:
    """Stop the recorded servers and forget them; returns whether each was running."""
    names = recorded()
    running = {name: _pid(name) for name in names}
    if "prefect" in names and _prefect_pid_file().exists():
        subprocess.run([sys.executable, "-m", "prefect", "server", "stop"],
                       capture_output=True, stdin=subprocess.DEVNULL)
    if running.get("mlflow"):
        with contextlib.suppress(OSError):
            os.killpg(running["mlflow"], signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(_alive(n, p) for n, p in running.items()):
        time.sleep(0.1)
    for name, pid in running.items():
        if _alive(name, pid):
            with contextlib.suppress(OSError):
                (os.killpg if name == "mlflow" else os.kill)(pid, signal.SIGKILL)
    SERVERS.remove(sweval_home())
    return {name: pid is not None for name, pid in running.items()}


def _alive(name: str, pid: int | None) -> bool:
    """Whether the server runs: Prefect's process, any process of MLflow's group."""
    try:
        if pid is not None and pid > 1:
            (os.killpg if name == "mlflow" else os.kill)(pid, 0)
            return True
    except OSError:
        pass
    return False


def down() -> dict[str, bool]:
    """Stop both servers; returns, for each one recorded, whether it was running."""
    with _servers_lock():
        return _stop_all()


def status() -> dict[str, tuple[str, bool]]:
    """Each recorded server's URL and whether it answers."""
    return {name: (url, answers(url, HEALTH[name])) for name, url in recorded().items()}


def mlflow_store() -> str:
    """The store ``sweval up``'s MLflow server serves: the one a plain ``sweval run`` uses.

    Raises:
        SwevalError: ``MLFLOW_TRACKING_URI`` names a tracking server already.
    """
    from sweval.flows.tracking.client import resolve_uri

    uri = resolve_uri()
    if uri.split(":", 1)[0] in ("http", "https", "databricks"):
        raise SwevalError(
            f"MLFLOW_TRACKING_URI={shown_uri(uri)} is a tracking server already: sweval up "
            "serves a local store (unset MLFLOW_TRACKING_URI, or set it to a database URI).")
    return uri


def mlflow_server_of(store: str) -> str | None:
    """The URL of ``sweval up``'s MLflow server when it serves ``store`` and answers."""
    url = recorded().get("mlflow")
    if url and SERVERS.read(sweval_home()).get("mlflow_store") == shown_uri(store) \
            and answers(url, HEALTH["mlflow"]):
        return url
    return None


def use_local_servers(*, prefect: bool, say: Callable[[str], None]) -> None:
    """Point this process (and what it starts) at each of ``sweval up``'s servers that answers;
    a ``PREFECT_API_URL`` (environment, profile) or ``MLFLOW_TRACKING_URI`` the user set wins
    (``--tracking-uri`` wins over both). ``prefect``: the command runs Prefect flows."""
    from sweval.evaluators.units.locks import register_for_life

    urls = {n: u for n, u in recorded().items() if prefect or n == "mlflow"}
    silent = [n for n, url in urls.items() if not answers(url, HEALTH[n])]
    if silent:
        say(f"sweval up's {' and '.join(f'{n} ({urls[n]})' for n in silent)} server "
            f"{'do' if len(silent) > 1 else 'does'} not answer (see `sweval status`): this "
            "command runs without it, as without `sweval up`.")
    used = False
    if "mlflow" in urls and "mlflow" not in silent and not os.environ.get("MLFLOW_TRACKING_URI"):
        os.environ["MLFLOW_TRACKING_URI"] = urls["mlflow"]
        used = True
    if "prefect" in urls and "prefect" not in silent and not os.environ.get("PREFECT_API_URL"):
        from prefect.context import refresh_global_settings_context
        from prefect.settings import get_current_settings

        if get_current_settings().api.url is None:  # none in a profile, prefect.toml or .env
            os.environ["PREFECT_API_URL"] = urls["prefect"] + "/api"
            refresh_global_settings_context()
            used = True
    if used:
        register_for_life(users_folder())


def users_folder() -> Path:
    return sweval_home() / USERS_FOLDER
