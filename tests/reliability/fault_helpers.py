"""Helpers of the fault tests: a small log, a traced `sweval run` driver, process groups, a loopback
MLflow server and a TCP relay that can be cut to make that server unreachable."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sweval_testing import DAY, REPO, T0, UNITS_GLOB, group_members

#: ``python -c DRIVER CONFIG JOURNAL DELAY [sweval run options...]``: ``sweval run --config CONFIG
#: --no-prefect`` where every unit first sleeps DELAY seconds (so that faults land mid-run) and
#: is journalled as ``start|done PID FOLD ALGORITHM`` (so a test sees what a run computed).
DRIVER = r"""
import os, sys, time
config, journal, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
if os.environ.get("SWEVAL_TEST_DISK_QUOTA"):  # a simulated full disk (see SmallDisk)
    sys.path.insert(0, os.path.join("tests", "reliability"))
    from fault_helpers import install_quota
    quota, root = os.environ["SWEVAL_TEST_DISK_QUOTA"].split(":", 1)
    install_quota(int(quota), root)
import sweval.evaluators.run.driver as run
original = run.compute_unit

def note(what, unit):
    with open(journal, "a") as handle:
        handle.write(f"{what} {os.getpid()} {unit.split.index} {unit.spec.name}\n")

def traced(unit, store, **kwargs):
    note("start", unit)
    time.sleep(delay)
    result = original(unit, store, **kwargs)
    note("done", unit)
    return result

run.compute_unit = traced
from sweval.flows.cli.app import main
sys.argv = ["sweval", "run", "--config", config, "--no-prefect", *sys.argv[4:]]
main()
"""


def unit_files(output: Path) -> dict[str, tuple[int, int]]:
    """``{f<fold>__<algorithm>.json: (inode, mtime_ns)}`` of the finished units in ``output``
    (a unit is finished once its ``unit.json`` record is written)."""
    units = output / "units"
    if not units.exists():
        return {}
    found = {}
    for path in units.glob(UNITS_GLOB):
        record = json.loads(path.read_text())
        name = f"f{record['split_index']:04d}__{record['algorithm']}.json"
        found[name] = (path.stat().st_ino, path.stat().st_mtime_ns)
    return found


def unit_names(output: Path) -> set[tuple[int, str]]:
    return {(int(name[1:5]), name[:-5].split("__", 1)[1]) for name in unit_files(output)}


def journal_units(journal: Path, pid: int, what: str = "start") -> list[tuple[int, str]]:
    """The units process ``pid`` started (or finished) according to the driver's journal."""
    if not journal.exists():
        return []
    found = []
    for line in journal.read_text().splitlines():
        kind, line_pid, fold, algorithm = line.split()
        if kind == what and int(line_pid) == pid:
            found.append((int(fold), algorithm))
    return found


def start_driver(
    config: Path, journal: Path, *, delay: float, env: dict[str, str] | None = None,
    extra: list[str] | None = None,
) -> subprocess.Popen[str]:
    """Start the traced ``sweval run`` in its own process group (stdout/stderr captured)."""
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(config), str(journal), str(delay), *(extra or [])],
        cwd=REPO, env=(env or dict(os.environ)) | {"COLUMNS": "200"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )


def kill_group(process: subprocess.Popen[Any], sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def finish(process: subprocess.Popen[str], timeout: float = 180) -> tuple[int, str, str]:
    """Wait for ``process`` (killing its group on timeout); returns (status, stdout, stderr)."""
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        stdout, stderr = process.communicate()
        raise AssertionError(f"timed out after {timeout} s: {stderr[-3000:]}") from None
    finally:
        kill_group(process)  # whatever it may have started (an ephemeral API, Dask workers)
        deadline = time.monotonic() + 15
        while group_members(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert not group_members(process.pid), f"left behind: {group_members(process.pid)}"
    return process.returncode, stdout, stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ------------------------------------------------------------------------------ MLflow server
@dataclass
class MlflowServer:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path


#: Where conftest.py keeps the server it started early (see its docstring).
EARLY_MLFLOW = pytest.StashKey[MlflowServer]()


def start_mlflow_server(directory: Path) -> MlflowServer:
    """Start ``mlflow server`` on 127.0.0.1 (sqlite store in ``directory``) in its own process
    group; :func:`wait_ready` waits for it, :func:`stop_group` stops it."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = directory / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env |= {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "mlflow", "server",
                "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}",
                "--artifacts-destination", str(directory / "artifacts"),
                "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            ],
            cwd=directory, env=env, stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return MlflowServer(url=f"http://127.0.0.1:{port}", port=port, process=process, log=log)


def wait_ready(server: MlflowServer, timeout_s: float = 240) -> MlflowServer:
    deadline = time.monotonic() + timeout_s
    while not _http_ok(f"{server.url}/health"):
        if server.process.poll() is not None:
            raise AssertionError(f"mlflow server exited: {server.log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"mlflow server not up in {timeout_s} s: {server.log.read_text()[-3000:]}"
            )
        time.sleep(0.25)
    return server


@contextlib.contextmanager
def mlflow_server(directory: Path, *, timeout_s: float = 240) -> Iterator[MlflowServer]:
    """A ready loopback MLflow server, stopped by process group afterwards (asserting that
    nothing of it is left)."""
    server = start_mlflow_server(directory)
    try:
        yield wait_ready(server, timeout_s)
    finally:
        stop_group(server.process)


def stop_group(process: subprocess.Popen[Any], grace_s: float = 10) -> None:
    """SIGTERM the process group, SIGKILL what is left after ``grace_s``; assert none is left."""
    pgid = process.pid
    kill_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_members(pgid), group_members(pgid)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


# ------------------------------------------------------------------------------ a TCP relay
class Relay:
    """A loopback TCP relay in front of a server: :meth:`cut` makes the server unreachable (new
    connections refused, open ones reset), :meth:`restore` brings it back on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._connections += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)


def write_config(path: Path, **values: Any) -> Path:
    from sweval.evaluators.config.model import EvalConfig

    path.write_text(EvalConfig.build(**values).to_json())
    return path


def tracking_state(output: Path) -> dict[str, Any]:
    return json.loads((output / "tracking.json").read_text())


# ------------------------------------------------------------------------------ a small disk
PAGE = 4096


class SmallDisk:
    """A directory whose free space the test controls.

    ``tmpfs``: a 2 MiB tmpfs mounted there (needs root with CAP_SYS_ADMIN); free space is set by
    a filler file and writes beyond it fail with ENOSPC from the kernel. ``simulated`` (where no
    tmpfs can be mounted): ``open`` is patched so that writes under the directory fail with
    ENOSPC once the files there would exceed a byte quota (see :func:`install_quota`).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.kind = "simulated"
        self.quota: int | None = None
        if os.environ.get("SWEVAL_TEST_SIMULATE_DISK_FULL") != "1" and os.geteuid() == 0:
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(path)],
                capture_output=True, text=True,
            )
            if mounted.returncode == 0:
                self.kind = "tmpfs"
        self.filler = path / "filler.bin"

    def room_for(self, sizes: list[int]) -> int:
        """Space that files of these sizes take (whole pages on tmpfs)."""
        if self.kind == "tmpfs":
            return sum(-(-size // PAGE) * PAGE for size in sizes)
        return sum(sizes)

    def leave_free(self, n_bytes: int) -> None:
        """Fill the disk up to ``n_bytes`` of free space."""
        if self.kind == "tmpfs":
            stats = os.statvfs(self.path)
            filler = stats.f_bavail * stats.f_frsize - n_bytes
            assert filler >= 0
            with open(self.filler, "wb") as handle:
                handle.write(b"\0" * filler)  # real pages, not a sparse file
        else:
            self.quota = used_bytes(self.path) + n_bytes

    def free_up(self) -> None:
        self.filler.unlink(missing_ok=True)
        self.quota = None

    def env(self) -> dict[str, str]:
        """What a driver process needs to see the simulated quota."""
        if self.kind == "tmpfs" or self.quota is None:
            return {}
        return {"SWEVAL_TEST_DISK_QUOTA": f"{self.quota}:{self.path}"}

    def close(self) -> None:
        if self.kind == "tmpfs":
            subprocess.run(["umount", "-l", str(self.path)], check=False)


def used_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())


def install_quota(quota: int, root: Path) -> Any:
    """Patch ``open`` so that writes under ``root`` fail with ENOSPC beyond ``quota`` bytes in all.

    Returns a function that removes the patch.
    """
    import builtins
    import errno
    import io

    real_open = builtins.open
    root = Path(root).resolve()

    class Full:
        def __init__(self, handle: Any, path: Path) -> None:
            self._handle = handle
            self._path = path

        def write(self, data: Any) -> int:
            self._handle.flush()
            size = len(data.encode() if isinstance(data, str) else data)
            room = quota - used_bytes(root)
            if size > room:
                if room > 0:
                    self._handle.write(data[:room])
                    self._handle.flush()
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self._path))
            return self._handle.write(data)

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: Any) -> None:
            self._handle.close()

        def __iter__(self) -> Any:
            return iter(self._handle)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._handle, name)

    def limited_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if isinstance(file, str | os.PathLike) and any(c in mode for c in "wax+"):
            path = Path(file).resolve()
            if path.is_relative_to(root):
                return Full(handle, path)
        return handle

    builtins.open = limited_open
    io.open = limited_open

    def remove() -> None:
        builtins.open = real_open
        io.open = real_open

    return remove


#: The algorithms of the fault and concurrency runs.
ALGORITHMS = ["pop", "pop-n", "item-knn"]


def base_options(data: Path, output: Path, **overrides: Any) -> dict[str, Any]:
    """The EvalConfig fields of a small run over ``data``: 6 daily folds, three algorithms."""
    values: dict[str, Any] = {
        "data": str(data), "window": "1D", "folds": 6, "start": str(T0 + 2 * DAY), "k": [5, 10],
        "u_min": 3, "algorithms": ALGORITHMS, "params": {"pop-n": {"n_recent": 100},
                                                          "item-knn": {"n_neighbors": 10}},
        "output": str(output), "progress": False, "tracking": False,
        "cache": str(output / "units"),  # the units beside the output: on its (small) disk
    }
    return values | overrides


def reference_results(options: dict[str, Any], output: Path) -> bytes:
    """results.csv of an uninterrupted in-process run (the same code path as --no-prefect)."""
    from sweval.evaluators.config.model import EvalConfig
    from sweval.flows.execute import execute

    execute(EvalConfig.build(**(options | {"output": str(output), "tracking": False,
                                           "cache": str(output / "units")})))
    return (output / "results.csv").read_bytes()
