"""Start, watch and stop the production stack's servers as plain processes on loopback.

The docker-compose file (``docker-compose.yml``) runs Postgres, ``mlflow server``, ``prefect server
start`` and ``sweval serve`` as containers. Without a Docker engine, the loopback test runs the same
commands, configured through the same environment variables, as processes bound to 127.0.0.1 on
free ports chosen at run time.

Every process is started in its own session (``start_new_session=True``), so its process group id
is its pid and :func:`stop` can signal the whole group. Every process also inherits a marker
variable (:data:`MARKER_VAR`) with a value unique to the test session; :func:`leftovers` finds any
process still carrying it, which catches even a grandchild that started a session of its own.
"""

from __future__ import annotations

import glob
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

#: Environment variable that marks every process the stack test starts.
MARKER_VAR = "SWEVAL_STACK_TEST_ID"
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


@dataclass
class Service:
    """One started process group: the leader's ``Popen`` and the file its output goes to."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    started_at: float = field(default_factory=time.monotonic)
    ready_after_s: float | None = None

    @property
    def pgid(self) -> int:
        return self.proc.pid  # start_new_session=True makes the leader's pid the group id

    def log_tail(self, n_chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return "<no log>"


def start(
    name: str,
    argv: list[str],
    *,
    env: dict[str, str],
    log_dir: Path,
    cwd: Path | None = None,
    user: str | None = None,
) -> Service:
    """Start ``argv`` as the leader of a new session, output going to ``log_dir/<name>.log``."""
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            user=user,
        )
    return Service(name=name, proc=proc, log_path=log_path)


def wait_until(service: Service, check, *, timeout_s: float, what: str) -> float:
    """Poll ``check()`` until it is true; return the seconds since the service started.

    Fails fast, with the service's log, when the process exits or the timeout passes.
    """
    deadline = service.started_at + timeout_s
    while time.monotonic() < deadline:
        if service.proc.poll() is not None:
            raise RuntimeError(
                f"{service.name} exited with {service.proc.returncode} before {what}:\n"
                + service.log_tail()
            )
        try:
            if check():
                service.ready_after_s = time.monotonic() - service.started_at
                return service.ready_after_s
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.25)
    raise TimeoutError(
        f"{service.name}: not {what} after {timeout_s:.0f} s:\n" + service.log_tail()
    )


def wait_all(checks: list[tuple[Service, Callable[[], bool], str]], *, timeout_s: float) -> None:
    """Poll several services' checks together, so each one's ``ready_after_s`` is its own."""
    pending = list(checks)
    deadline = time.monotonic() + timeout_s
    while pending:
        for item in list(pending):
            service, check, what = item
            if service.proc.poll() is not None:
                raise RuntimeError(
                    f"{service.name} exited with {service.proc.returncode} before {what}:\n"
                    + service.log_tail()
                )
            try:
                ready = check()
            except (OSError, urllib.error.URLError):
                ready = False
            if ready:
                service.ready_after_s = time.monotonic() - service.started_at
                pending.remove(item)
        if pending and time.monotonic() > deadline:
            names = ", ".join(f"{service.name} ({what})" for service, _, what in pending)
            raise TimeoutError(f"not ready after {timeout_s:.0f} s: {names}:\n"
                               + "\n".join(service.log_tail(1500) for service, _, _ in pending))
        if pending:
            time.sleep(0.25)


def http_ok(url: str, *, host_header: str | None = None) -> bool:
    """True when GET ``url`` answers 200 (``host_header`` overrides the Host header)."""
    return http_status(url, host_header=host_header) == 200


def http_status(url: str, *, host_header: str | None = None) -> int:
    request = urllib.request.Request(url)
    if host_header is not None:
        request.add_header("Host", host_header)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def stop(service: Service, *, grace_s: float = 15.0) -> None:
    """SIGTERM the service's process group, then SIGKILL what is left after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(service.pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            service.proc.poll()  # reap the leader so it does not linger as a zombie
            if not group_alive(service.pgid):
                break
            time.sleep(0.1)
        else:
            continue
        break
    try:
        service.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in group ``pgid``."""
    for stat in glob.glob("/proc/[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def leftovers(marker: str) -> list[str]:
    """Live processes whose environment carries ``MARKER_VAR=marker``, as "pid cmdline" lines."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for proc_dir in glob.glob("/proc/[0-9]*"):
        try:
            environ = Path(proc_dir, "environ").read_bytes()
        except OSError:
            continue
        if needle not in environ.split(b"\0"):
            continue
        fields = _stat_fields(f"{proc_dir}/stat")
        if not fields or fields[0] == "Z":
            continue
        cmdline = Path(proc_dir, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        found.append(f"{Path(proc_dir).name} {cmdline.strip()}")
    return found


def listeners(marker: str) -> list[tuple[str, str, int]]:
    """Listening TCP sockets of the marked processes, as (pid cmd, address, port)."""
    sockets = {}  # inode -> (address, port) for sockets in LISTEN state
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A":
                continue
            address, port = local.split(":")
            sockets[inode] = (_decode_address(address, width), int(port, 16))
    found = []
    for line in leftovers(marker):
        pid = line.split()[0]
        for fd in glob.glob(f"/proc/{pid}/fd/*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in sockets:
                address, port = sockets[target[8:-1]]
                found.append((line[:80], address, port))
    return found


def _decode_address(hex_address: str, width: int) -> str:
    raw = bytes.fromhex(hex_address)
    # /proc/net/tcp{,6} stores each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def kill_marked(marker: str) -> None:
    """SIGKILL every process still carrying the marker (clean-up after a failed assertion)."""
    for line in leftovers(marker):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _stat_fields(path: str) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: [state, ppid, pgrp, ...]."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


# ---------------------------------------------------------------------------------- Postgres
def postgres_bin_dir() -> Path | None:
    """Directory holding ``initdb``/``postgres``/``psql`` (Debian: /usr/lib/postgresql/N/bin)."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    for directory in candidates:
        if Path(directory, "initdb").exists() and Path(directory, "postgres").exists():
            return Path(directory)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(os.path.realpath(initdb)).parent
    return None


def postgres_user() -> str | None:
    """The account Postgres runs as: itself refuses root, so root hands it to ``postgres``."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' account exists")


# ------------------------------------------------------------------- the topology, both ways
# docker-compose.yml and the loopback test share these commands and environment variable names;
# tests/stack/test_compose.py checks the compose file against them.

#: `mlflow` service: every option comes from the environment (see mlflow_server_env).
MLFLOW_SERVER_COMMAND = ["mlflow", "server"]
#: `prefect-server` service (entrypoint + command): host, port and database from the environment.
PREFECT_SERVER_COMMAND = ["prefect", "server", "start"]


def mlflow_server_env(
    *, host: str, port: int, workers: int, backend_store_uri: str, artifacts_destination: str,
    allowed_hosts: str,
) -> dict[str, str]:
    """The `mlflow` service's environment (``mlflow server`` reads each option from it)."""
    return {
        "MLFLOW_HOST": host,
        "MLFLOW_PORT": str(port),
        "MLFLOW_WORKERS": str(workers),
        "MLFLOW_BACKEND_STORE_URI": backend_store_uri,
        "MLFLOW_ARTIFACTS_DESTINATION": artifacts_destination,
        "MLFLOW_SERVER_ALLOWED_HOSTS": allowed_hosts,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }


def prefect_server_env(
    *, host: str, port: int, database_url: str, ui_api_url: str, home: str,
) -> dict[str, str]:
    """The `prefect-server` service's environment."""
    return {
        "PREFECT_SERVER_API_HOST": host,
        "PREFECT_SERVER_API_PORT": str(port),
        "PREFECT_API_DATABASE_CONNECTION_URL": database_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_API_URL": ui_api_url,
        "PREFECT_HOME": home,
    }


def sweval_runtime_env(*, prefect_api_url: str, mlflow_tracking_uri: str) -> dict[str, str]:
    """What `sweval-serve` and the Dask workers need to reach both servers."""
    return {
        "PREFECT_API_URL": prefect_api_url,
        "MLFLOW_TRACKING_URI": mlflow_tracking_uri,
        "OPENBLAS_NUM_THREADS": "1",
    }


def dask_scheduler_command(*, host: str, port: int, dashboard: str) -> list[str]:
    """`dask-scheduler` service (entrypoint + command)."""
    return ["dask", "scheduler", "--host", host, "--port", str(port),
            "--dashboard-address", dashboard]


def dask_worker_command(scheduler_address: str) -> list[str]:
    """`dask-worker` service (entrypoint + command): one single-threaded worker process per
    container, warmed by SW-EVAL's preload; scale with more containers."""
    return ["dask", "worker", scheduler_address, "--nworkers", "1", "--nthreads", "1",
            "--no-dashboard", "--preload", "sweval.flows.dask.worker"]


def sweval_serve_command(
    *, config: str, cron: str, name: str, task_runner: str, dask_address: str,
) -> list[str]:
    """`sweval-serve` service (the image's entrypoint `sweval` + command)."""
    return ["sweval", "serve", "--config", config, "--cron", cron, "--name", name,
            "--task-runner", task_runner, "--dask-address", dask_address, "--no-progress"]
