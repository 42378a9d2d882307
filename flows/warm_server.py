"""The warm process of ``sweval up``: everything a run imports, imported once; every command a
child forked from it, which starts where an in-process command would be after its imports.

A plain ``sweval run`` spends about 3.5 s (2 cores) importing Prefect's settings, MLflow,
scipy.stats, matplotlib and the CLI before it computes anything. This process pays that once::

    sweval up ──▶ python -c "...warm_server.main()" in a session of its own (detached);
                  SWEVAL_WARM_SYS_PATH gives it the sys.path of the `sweval` script
    main()        identity (source fingerprint, baked environment) taken FIRST, so a file
                  edited during the imports never passes for the imported one
                  apply_env_defaults, then the imports a run needs (WARM_IMPORTS); refuses to
                  serve when any thread but the main one exists (a fork copies only the calling
                  thread) or a CUDA library is loaded (a CUDA context does not survive a fork);
                  native pools (OpenBLAS in numpy and scipy, jemalloc in pyarrow) are
                  fork-aware: they re-create their threads in the child when needed
                  numba's cached kernels loaded (cache hits only: nothing compiles here);
                  the built-in algorithms' code versions hashed (evaluators.units)
                  gc.freeze(); bind $SWEVAL_HOME/warm.sock (0600, via an atomic rename)
    loop          one thread, a selector: the listening socket, every client connection, and a
                  wakeup pipe written on SIGCHLD, SIGTERM, SIGINT, SIGHUP
      accept      peer must be this user (SO_PEERCRED); send the hello (flows.warm_client
                  identity); read the request and its three descriptors (2 s at most);
                  fork ──▶ child (below); send {"started": pid}
      client msg  {"signal": n} ─▶ os.kill(child, n)
      client EOF  the client died or dropped the connection ─▶ SIGTERM to the child, SIGKILL
                  to its whole tree after GRACE_S
      SIGCHLD     waitpid(WNOHANG) until none is left: {"exit": status} to each child's client
                  (negative: killed by that signal), the connection closed
      SIGTERM     (``sweval down``) stop accepting, remove the socket, SIGTERM to every child,
                  SIGKILL to the trees still alive after GRACE_S, report their exits, return

    child         (returns from the loop into main(), which runs the CLI: the interpreter's
                  own exit then runs as for `sweval run`: threads joined, atexit, flushes)
                  signal dispositions reset; own process group; SIGTERM if the warm process dies
                  the client's descriptors onto 0, 1, 2 (stdout line-buffered on a terminal, as
                  at interpreter start); cwd, umask, argv; os.environ replaced by the client's
                  then what was read from the environment at import is re-read (see below)
                  ─▶ flows.cli.entry_point(): exit status = the command's

The environment rule. Variables read only at interpreter start or when a native library loads
(flows.warm_client.BAKED_PREFIXES/BAKED_NAMES: PYTHON*, the locale, OpenBLAS/OpenMP/MKL/numba
thread counts, matplotlib's folders, the terminal variables rich and typer read at import) cannot
be changed in a child: when the client's differ from this process's, the client runs the command
in-process (it falls back). Everything else is the client's, and what the imports derived from it
is derived again in the child (:func:`_reread_environment`): SW-EVAL's Prefect defaults, Prefect's
settings context and logging configuration (its terminal handler then sees the client's
terminal), MLflow's telemetry switch, the time zone, the colour detection of SW-EVAL's
module-level rich consoles, numpy's global random state (a fresh process seeds it from the OS;
Python's ``random`` is reseeded on fork by itself).

Not carried over: resource limits (ulimit), the client's process group and controlling terminal
(Ctrl-C reaches the client, which forwards it), Ctrl-Z (it stops the client, not the child).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field

from sweval.flows import warm_client

#: The modules a ``sweval run`` (and compare, leakage, gap, report) imports, measured with a
#: profile of a child (the modules loaded during the command that were not loaded before it):
#: the CLI, Prefect's flow and task engines and client, MLflow's client and REST store,
#: scipy.stats, matplotlib's pyplot and the image plugins its savefig loads, pyarrow's Parquet
#: and dataset readers, the engine with its numba kernels (numba and llvmlite: about 0.5 s on
#: their own; importing them starts no thread, and the kernels compile or load from numba's
#: cache only when first called, in the child) and the report.
WARM_IMPORTS = (
    "sweval.flows.cli",
    "prefect",
    "prefect.main",
    "prefect.engine",
    "prefect.flow_engine",
    "prefect.task_engine",
    "prefect.concurrency.v1.context",
    "prefect.utilities.visualization",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.tls",
    "mlflow",
    "mlflow.tracking.request_header.registry",
    "scipy.stats",
    "matplotlib.pyplot",
    "PIL.BmpImagePlugin",
    "PIL.GifImagePlugin",
    "PIL.JpegImagePlugin",
    "PIL.PpmImagePlugin",
    "pyarrow.parquet",
    "pyarrow.dataset",
    "pyarrow.pandas_compat",
    "pandas.io.formats.csvs",
    "pandas.core.methods.to_dict",
    "pandas.core.reshape.reshape",
    "sweval.flows.sliding_window",
    "sweval.flows.tracking.tracker",
    "sweval.flows.pipeline",
    "sweval.flows.summary",
    "sweval.flows.startup",
    "sweval.flows.servers",
    "sweval.data.first_seen",
    "sweval.algorithms.neighbour_kernels",
    "sweval.algorithms.ranking_kernels",
    "sweval.algorithms.row_chunks",
    "sweval.evaluators.training_state",
    "sweval.evaluators.report",
)
#: Seconds a child gets after SIGTERM before its whole tree gets SIGKILL.
GRACE_S = 10.0
#: The environment variable with the sys.path the warm process takes (JSON list).
SYS_PATH_ENV = "SWEVAL_WARM_SYS_PATH"
#: Modules whose presence means a CUDA context may exist (it does not survive a fork).
CUDA_MODULES = ("implicit.gpu._cuda", "cupy", "torch", "numba.cuda.cudadrv.driver")


@dataclass(slots=True)
class Request:
    """What a client sent: its command line, working directory, environment, umask, and its
    stdin, stdout, stderr as descriptors received here."""

    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int
    fds: list[int]


@dataclass(slots=True)
class Child:
    pid: int
    conn: socket.socket
    kill_at: float | None = None  # SIGKILL the tree after this monotonic time


@dataclass(slots=True)
class Server:
    listener: socket.socket
    path: str
    hello: dict[str, object]
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    children: dict[int, Child] = field(default_factory=dict)
    wake_r: int = -1
    wake_w: int = -1
    stopping: bool = False


def main() -> None:
    """The warm process: prepare, serve until SIGTERM; in a forked child, run the command."""
    paths = os.environ.get(SYS_PATH_ENV)
    if paths:
        sys.path[:] = json.loads(paths)
        os.environ.pop(SYS_PATH_ENV)
    hello = warm_client.identity()  # before the imports: see the module's docstring
    hello["pid"] = os.getpid()
    kernels = _import_everything()
    server = _listen(warm_client.socket_path(), hello)
    _say(f"pid {os.getpid()} listening on {server.path} (imports: {time.process_time():.1f} "
         f"CPU s; {len(sys.modules)} modules, {kernels} cached kernels; {_os_threads()} OS "
         "threads, 1 Python thread)")
    request = _serve(server)
    if request is None:
        return  # stopped
    _become_client(request)
    from sweval.flows.cli import entry_point

    entry_point()


def _import_everything() -> int:
    import importlib
    import threading

    from sweval.flows.settings import apply_env_defaults

    apply_env_defaults()  # as the CLI does before Prefect's import
    for name in WARM_IMPORTS:
        importlib.import_module(name)
    from rich.console import Console

    if not hasattr(Console, "_detect_color_system"):  # rich changed: the child could not redo it
        raise SystemExit("warm process: rich.console.Console has no _detect_color_system")
    loaded = [name for name in CUDA_MODULES if name in sys.modules]
    if loaded:
        raise SystemExit(f"warm process: {', '.join(loaded)} imported (CUDA does not fork)")
    if threading.active_count() != 1:
        names = ", ".join(t.name for t in threading.enumerate())
        raise SystemExit(f"warm process: the imports started threads ({names}): cannot fork")
    kernels = _load_cached_kernels()
    _hash_code_versions()
    gc.collect()
    gc.freeze()  # the children's collections skip (and so do not copy) the imported objects
    return kernels


def _hash_code_versions() -> None:
    """Hash the code of every built-in algorithm's units (``evaluators.units.code_version``,
    cached per process): a child's plan takes them from the cache instead of parsing about
    twelve modules again (about 40 ms a command). A child runs only while the source is the one
    hashed here (the client compares the source fingerprint)."""
    from sweval.algorithms.registry import ALGORITHMS
    from sweval.evaluators.units import code_version

    for name in ALGORITHMS:
        code_version(name)


def _load_cached_kernels() -> int:
    """Load every compiled kernel in numba's disk cache for SW-EVAL's imported modules (the
    machine code a child would load at the first call of each kernel: about 1.5 s for the
    kNN and ranking kernels on 2 cores, measured). Only cache hits are loaded: a kernel whose
    source changed has no index entry left, and one compiled for another CPU is skipped, so
    nothing is compiled here. numba's cache index is not a public API: whatever fails leaves
    that kernel to load in the child, as in-process. Returns how many were loaded."""
    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:
        return 0
    loaded = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("sweval.") or module is None:
            continue
        for kernel in list(vars(module).values()):
            if not isinstance(kernel, CPUDispatcher):
                continue
            try:
                magic = kernel.targetctx.codegen().magic_tuple()
                index = kernel._cache._cache_file._load_index()  # noqa: SLF001
                for signature, target, *_rest in index:
                    if target == magic and signature not in kernel.overloads:
                        kernel.compile(signature)
                        loaded += 1
            except Exception as exc:  # noqa: BLE001  (the child loads it itself)
                _say(f"kernel {name}.{kernel.__name__} not preloaded: {exc!r}")
    return loaded


def _os_threads() -> int | str:
    """This process's threads as the OS counts them (native libraries' pools included; a fork
    copies only the calling one, and OpenBLAS re-creates its pool in the child by itself)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return "?"


def _listen(path: str, hello: dict[str, object]) -> Server:
    """Bind the socket under a temporary name (0600 from the start), then move it in place."""
    temporary = f"{path}.{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    try:
        listener.bind(temporary)
    finally:
        os.umask(umask)
    os.chmod(temporary, 0o600)
    listener.listen(16)
    os.replace(temporary, path)
    listener.setblocking(False)
    server = Server(listener=listener, path=path, hello=hello)
    server.wake_r, server.wake_w = os.pipe()
    os.set_blocking(server.wake_r, False)
    os.set_blocking(server.wake_w, False)
    signal.set_wakeup_fd(server.wake_w)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    server.selector.register(listener, selectors.EVENT_READ, "accept")
    server.selector.register(server.wake_r, selectors.EVENT_READ, "wake")
    return server


_stop_requested = False


def _on_signal(signum: int, _frame: object) -> None:
    global _stop_requested
    if signum != signal.SIGCHLD:
        _stop_requested = True


def _serve(server: Server) -> Request | None:
    """The loop. Returns None when stopped; in a forked child, the child's request."""
    while True:
        if _stop_requested and not server.stopping:
            _begin_stop(server)
        if server.stopping and not server.children:
            _close(server)
            return None
        timeout = _next_deadline(server)
        for key, _events in server.selector.select(timeout):
            if key.data == "accept":
                request = _accept(server)
                if request is not None:
                    return request  # the child
            elif key.data == "wake":
                with contextlib.suppress(BlockingIOError):
                    while os.read(server.wake_r, 512):
                        pass
            else:
                _client_message(server, key.data)
        _reap(server)
        _kill_overdue(server)


def _next_deadline(server: Server) -> float | None:
    deadlines = [c.kill_at for c in server.children.values() if c.kill_at is not None]
    return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None


def _accept(server: Server) -> Request | None:
    try:
        conn, _ = server.listener.accept()
    except (BlockingIOError, InterruptedError):
        return None
    if server.stopping:
        conn.close()
        return None
    fds: list[int] = []
    try:
        conn.setblocking(True)
        conn.settimeout(warm_client.HANDSHAKE_TIMEOUT_S)
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            raise PermissionError(f"a client of uid {uid}")
        warm_client.send_message(conn, server.hello)
        header, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
        if not header:
            raise ConnectionError("the client left after the hello (it runs in-process)")
        if len(header) < 4:
            header += warm_client.recv_exactly(conn, 4 - len(header))
        size = int.from_bytes(header, "big")
        message = json.loads(warm_client.recv_exactly(conn, size))
        if len(fds) != 3:
            raise ValueError(f"{len(fds)} descriptors instead of 3")
        request = Request(argv=[str(a) for a in message["argv"]], cwd=str(message["cwd"]),
                          env={str(k): str(v) for k, v in message["env"].items()},
                          umask=int(message["umask"]), fds=fds)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if not isinstance(exc, ConnectionError):
            _say(f"a client's request failed: {exc!r}")
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        _leave_server(server, conn)
        return request
    for fd in fds:
        os.close(fd)
    _say(f"child {pid}: sweval {request.argv[1] if len(request.argv) > 1 else ''}")
    try:
        warm_client.send_message(conn, {"started": pid})
    except OSError:
        pass  # the client is gone: the EOF below terminates the child
    conn.setblocking(False)
    server.children[pid] = Child(pid=pid, conn=conn)
    server.selector.register(conn, selectors.EVENT_READ, pid)
    return None


def _say(line: str) -> None:
    """One line in the warm process's log (its stderr: $SWEVAL_HOME/logs/warm-server.log)."""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def _client_message(server: Server, pid: int) -> None:
    child = server.children.get(pid)
    if child is None:
        return
    try:
        header = child.conn.recv(4)
        if header:
            child.conn.settimeout(warm_client.HANDSHAKE_TIMEOUT_S)
            try:
                if len(header) < 4:
                    header += warm_client.recv_exactly(child.conn, 4 - len(header))
                message = json.loads(warm_client.recv_exactly(
                    child.conn, int.from_bytes(header, "big")))
            finally:
                child.conn.setblocking(False)
            signum = int(message["signal"])
            if signum in {int(getattr(signal, s)) for s in warm_client.FORWARDED_SIGNALS}:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
            return
    except BlockingIOError:
        return
    except (OSError, ValueError, KeyError, TypeError):
        pass
    # EOF or garbage: the client is gone; the command must not outlive it
    server.selector.unregister(child.conn)
    _terminate(child)


def _terminate(child: Child) -> None:
    if child.kill_at is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)
        child.kill_at = time.monotonic() + GRACE_S


def _kill_overdue(server: Server) -> None:
    now = time.monotonic()
    for child in server.children.values():
        if child.kill_at is not None and now >= child.kill_at:
            _kill_tree(child.pid)
            child.kill_at = now + GRACE_S  # again, should anything survive


def _kill_tree(pid: int) -> None:
    """SIGKILL the child, its process group and every descendant psutil can see."""
    import psutil

    try:
        tree = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        tree = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for process in tree:
        with contextlib.suppress(psutil.Error):
            process.kill()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _reap(server: Server) -> None:
    while server.children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        child = server.children.pop(pid, None)
        if child is None:
            continue
        _say(f"child {pid}: exit status {os.waitstatus_to_exitcode(status)}")
        with contextlib.suppress(KeyError, ValueError):
            server.selector.unregister(child.conn)
        with contextlib.suppress(OSError):
            child.conn.setblocking(True)
            child.conn.settimeout(1.0)
            warm_client.send_message(child.conn, {"exit": os.waitstatus_to_exitcode(status)})
        child.conn.close()


def _begin_stop(server: Server) -> None:
    server.stopping = True
    with contextlib.suppress(KeyError, ValueError):
        server.selector.unregister(server.listener)
    server.listener.close()
    _unlink_if_ours(server)
    for child in server.children.values():
        _terminate(child)


def _unlink_if_ours(server: Server) -> None:
    """Remove the socket file unless it now belongs to a newer warm process."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            probe.connect(server.path)
            hello = warm_client.recv_message(probe)
        if hello.get("pid") != os.getpid():
            return
    except (OSError, ValueError, ConnectionError):
        pass
    with contextlib.suppress(FileNotFoundError):
        os.unlink(server.path)


def _close(server: Server) -> None:
    server.selector.close()
    signal.set_wakeup_fd(-1)
    os.close(server.wake_r)
    os.close(server.wake_w)


def _leave_server(server: Server, conn: socket.socket) -> None:
    """In the child: drop every resource of the server (its sockets, the wakeup pipe, its
    signal handlers)."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    server.selector.close()
    server.listener.close()
    conn.close()
    for child in server.children.values():
        child.conn.close()
    os.close(server.wake_r)
    os.close(server.wake_w)


def _become_client(request: Request) -> None:
    """In the child: take on the client's process state (see the module's docstring)."""
    os.setpgid(0, 0)
    _terminate_with_parent()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
        os.close(fd)
    # as at interpreter start: stdout line-buffered on a terminal (stderr always is)
    sys.stdout.reconfigure(line_buffering=os.isatty(1))  # type: ignore[union-attr]
    os.chdir(request.cwd)
    os.umask(request.umask)
    sys.argv[:] = request.argv
    os.environ.clear()
    os.environ.update(request.env)
    _reread_environment()


def _terminate_with_parent() -> None:
    """SIGTERM to this child when the warm process dies (Linux's PR_SET_PDEATHSIG)."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the prctl
        os.kill(os.getpid(), signal.SIGTERM)


def _reread_environment() -> None:
    """Derive again what the imports derived from the environment (the client's now)."""
    time.tzset()
    from sweval.flows.settings import apply_env_defaults

    apply_env_defaults()
    import prefect.context
    import prefect.logging.configuration

    prefect.context.refresh_global_settings_context()
    prefect.logging.configuration.setup_logging(incremental=False)
    from sweval.flows.tracking.client import reread_telemetry_setting

    reread_telemetry_setting()
    import numpy.random

    numpy.random.seed()
    from rich.console import Console

    for name, module in list(sys.modules.items()):
        if name.startswith("sweval.") and module is not None:
            for value in list(vars(module).values()):
                if isinstance(value, Console):
                    value._color_system = value._detect_color_system()  # noqa: SLF001


if __name__ == "__main__":
    main()
