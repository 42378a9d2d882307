"""The client side of the warm process (:mod:`flows.warm_server`): the ``sweval`` console script
hands a command to it when it can, else runs it in this process as always.

This module imports the standard library only, and only after the cheap checks have passed: a
command that runs in-process pays nothing but a ``stat`` of the socket path. The timeline::

    sweval run ...  (console script: flows.entry)
      │ SWEVAL_WARM=0, a command that does not benefit (only run, compare, leakage, gap,
      │ report do), --help, or no $SWEVAL_HOME/warm.sock ───────────────────▶ in-process
      │ connect; read the warm process's hello (2 s at most) ── refused / timeout ──▶ in-process
      │ compare: same Python executable, sys.flags and sys.path, same sweval source fingerprint
      │ (sizes and mtimes of every file of the package, mtimes of the sys.path folders),
      │ same values of the environment variables read only at start-up (BAKED_PREFIXES,
      │ BAKED_NAMES)  ───────────────────────────────────────────── any differs ──▶ in-process
      │ send argv, cwd, the whole environment, umask, and stdin/stdout/stderr as descriptors
      │ wait for "started" (the child's pid; 30 s at most) ── refused, timeout or a protocol
      │ error ──▶ in-process (a child the warm process did fork is terminated: the socket
      │ closed); a signal received meanwhile is raised again here
      ▼ from here the command runs in the child: never again in this process
    wait for the child's exit status; SIGINT, SIGTERM, SIGHUP received here are forwarded to
    the child (which unwinds as in-process, flows/processes.py); exit with the child's status
    (killed by a signal: this process kills itself with the same signal)

If this process dies or the connection drops, the warm process terminates the child. If the warm
process dies, the child gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and this process reports
that the command's status is unknown (exit status 1).
"""

from __future__ import annotations

import os
import sys

#: The socket's name under ``$SWEVAL_HOME``.
SOCKET_NAME = "warm.sock"
#: The commands handed to the warm process: those that import Prefect, MLflow, scipy or
#: matplotlib. The others (inspect, generate, up, status, ...) start in-process as fast.
WARM_COMMANDS = frozenset({"run", "compare", "leakage", "gap", "report"})
#: ``SWEVAL_WARM=0`` (or false/no/off) makes every command run in-process.
OPT_OUT_ENV = "SWEVAL_WARM"
#: The protocol's version: a client and a warm process of different versions do not talk.
PROTOCOL = 1
#: Seconds the client waits for the warm process's hello (it answers at once when it is up).
HANDSHAKE_TIMEOUT_S = 2.0
#: Seconds the client waits for "started" once its request is sent (a fork: milliseconds).
STARTED_TIMEOUT_S = 30.0

#: Environment variables read once, at interpreter start or at the import of a library, that no
#: child can re-apply after the fork: the interpreter's (PYTHON*: hash seed, warnings, I/O
#: encoding; the locale), the thread pools of OpenBLAS, OpenMP, MKL and numba (read when the
#: native library loads), matplotlib's configuration and cache folders (read at its import),
#: and the terminal variables rich and typer read at import. The client runs in the warm
#: process only when all of these are equal (present in both with the same value, or in
#: neither); everything else in the environment (PREFECT_*, MLFLOW_*, SWEVAL_*, PATH, ...) is
#: the client's in the child.
BAKED_PREFIXES = ("PYTHON", "LC_", "OPENBLAS_", "GOTO", "OMP_", "KMP_", "MKL_", "NUMBA_",
                  "NUMEXPR_", "VECLIB_", "BLIS_", "MPL", "LD_", "MALLOC_", "_TYPER_")
BAKED_NAMES = frozenset({"LANG", "LANGUAGE", "HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
                         "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "PY_COLORS",
                         "COLUMNS", "LINES", "TERMINAL_WIDTH", "GITHUB_ACTIONS",
                         "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CUDA_VISIBLE_DEVICES"})
#: The signals forwarded to the child.
FORWARDED_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def sweval_home() -> str:
    """``$SWEVAL_HOME``, default ``~/.sweval`` (as :func:`flows.settings.sweval_home`)."""
    return os.path.expanduser(os.environ.get("SWEVAL_HOME")
                              or os.path.join(os.path.expanduser("~"), ".sweval"))


def socket_path() -> str:
    return os.path.join(sweval_home(), SOCKET_NAME)


def baked_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The variables of ``environ`` that the warm process reads once (see BAKED_PREFIXES)."""
    return {name: value for name, value in environ.items()
            if name in BAKED_NAMES or name.startswith(BAKED_PREFIXES)}


def package_root() -> str:
    """The ``sweval`` package's folder (``src/sweval`` in a checkout: its subpackages are
    symbolic links to the repository's folders)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def source_fingerprint(paths: list[str]) -> str:
    """A digest of the code a process would import: every file of the ``sweval`` package
    (path, size, mtime in ns; the links followed, ``__pycache__`` left out) and the mtime of
    every folder of ``paths``, a sys.path (installing, upgrading or removing a distribution
    changes its folder's listing, hence its mtime). About 2 ms for the package's files."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    root = package_root()
    for folder, subfolders, files in os.walk(root, followlinks=True):
        subfolders[:] = sorted(s for s in subfolders if s != "__pycache__" and s[0] != ".")
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(path, root)}\0{stat.st_size}\0"
                          f"{stat.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    for entry in paths:
        try:
            mtime = os.stat(entry or ".").st_mtime_ns
        except OSError:
            mtime = -1
        digest.update(f"{entry}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def identity(paths: list[str] | None = None) -> dict[str, object]:
    """What must be equal between a client and the warm process (the hello's content), for a
    process whose sys.path is ``paths`` (default: this one's)."""
    paths = list(sys.path if paths is None else paths)
    return {"protocol": PROTOCOL, "executable": sys.executable, "flags": list(sys.flags),
            "sys_path": paths, "fingerprint": source_fingerprint(paths),
            "baked_env": baked_env(os.environ)}


#: What each field of the identity says when it differs, in words.
MISMATCH_WORDS = {"protocol": "another protocol version", "executable": "another Python",
                  "flags": "other interpreter flags", "sys_path": "another sys.path",
                  "baked_env": "another environment", "fingerprint":
                  "the source changed since it started (SW-EVAL or an installed package)"}


def mismatch(hello: dict[str, object], mine: dict[str, object] | None = None) -> str | None:
    """Why the warm process that said ``hello`` cannot run the command of a process whose
    identity is ``mine`` (default: this one's): the first differing field, or None."""
    mine = identity() if mine is None else mine
    for key in MISMATCH_WORDS:
        if hello.get(key) != mine[key]:
            return key
    return None


def explain_mismatch(key: str, hello: dict[str, object], mine: dict[str, object]) -> str:
    """The difference ``key`` between ``hello`` and ``mine`` in words (for the environment,
    the variables that differ)."""
    if key != "baked_env":
        return MISMATCH_WORDS[key]
    theirs, ours = hello.get("baked_env") or {}, mine["baked_env"]
    assert isinstance(theirs, dict) and isinstance(ours, dict)
    names = sorted(n for n in set(theirs) | set(ours) if theirs.get(n) != ours.get(n))
    return f"another environment: {', '.join(names[:3])}{', ...' if len(names) > 3 else ''}"


# -- messages: 4-byte big-endian length, then UTF-8 JSON ----------------------------------------


def send_message(sock: object, message: dict[str, object], fds: list[int] | None = None) -> None:
    import json
    import socket

    body = json.dumps(message).encode()
    header = len(body).to_bytes(4, "big")
    assert isinstance(sock, socket.socket)
    if fds:
        sent = socket.send_fds(sock, [header + body], fds)
        sock.sendall((header + body)[sent:])
    else:
        sock.sendall(header + body)


def recv_exactly(sock: object, size: int) -> bytes:
    """``size`` bytes from ``sock``; ConnectionError when it closes first."""
    chunks = []
    while size:
        chunk = sock.recv(size)  # type: ignore[attr-defined]
        if not chunk:
            raise ConnectionError("the connection closed mid-message")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: object) -> dict[str, object]:
    import json

    size = int.from_bytes(recv_exactly(sock, 4), "big")
    if size > 64 << 20:
        raise ValueError(f"a message of {size} bytes")
    message = json.loads(recv_exactly(sock, size))
    if not isinstance(message, dict):
        raise ValueError("a message that is not an object")
    return message


# -- the client ------------------------------------------------------------------------------


def wants_warm(argv: list[str]) -> bool:
    """Whether the command in ``argv`` is one the warm process runs (before any connection)."""
    if os.environ.get(OPT_OUT_ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    return (len(argv) > 1 and argv[1] in WARM_COMMANDS
            and "--help" not in argv[1:] and os.path.exists(socket_path()))


def run_in_warm_process(argv: list[str]) -> int | None:
    """Run ``argv`` in a child of the warm process; its exit status, or None when the command
    did not start there (the caller then runs it in-process)."""
    if not wants_warm(argv):
        return None
    import signal
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pending: list[int] = []
    forward = {"sock": None}

    def on_signal(signum: int, _frame: object) -> None:
        if forward["sock"] is None:
            pending.append(signum)
        else:
            send_message(forward["sock"], {"signal": signum})

    previous: dict[str, object] = {}
    try:
        sock.settimeout(HANDSHAKE_TIMEOUT_S)
        sock.connect(socket_path())
        hello, mine = recv_message(sock), identity()
        why = mismatch(hello, mine)
        if why is not None:
            sock.close()
            sys.stderr.write(f"note: not run in `sweval up`'s warm process "
                             f"({explain_mismatch(why, hello, mine)}; `sweval up` from this "
                             "shell restarts it): starting in this process\n")
            return None
        umask = os.umask(0)
        os.umask(umask)
        previous = {sig: signal.signal(getattr(signal, sig), on_signal)
                    for sig in FORWARDED_SIGNALS}
        send_message(sock, {"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                            "umask": umask}, fds=[0, 1, 2])
        sock.settimeout(STARTED_TIMEOUT_S)
        pid = recv_message(sock).get("started")
        if not isinstance(pid, int):
            raise ValueError("no child started")
    except (OSError, ValueError, ConnectionError):
        # Nothing ran: this process runs the command. (A child forked but not reported within
        # STARTED_TIMEOUT_S is terminated by the warm process when this socket closes.)
        sock.close()
        for sig, handler in previous.items():
            signal.signal(getattr(signal, sig), handler)
        for signum in pending:  # a signal received meanwhile is this process's again
            signal.raise_signal(signum)
        return None
    # The command runs in the child from here on: never fall back now.
    sock.settimeout(None)
    try:
        forward["sock"] = sock
        for signum in pending:
            send_message(sock, {"signal": signum})
        result = recv_message(sock)
        status = result["exit"]
        assert isinstance(status, int)
    except (OSError, ValueError, ConnectionError, KeyError, AssertionError) as exc:
        print(f"sweval: lost the warm process (`sweval status`) while the command ran in its "
              f"child (pid {pid}): {exc}; its exit status is unknown.", file=sys.stderr)
        return 1
    finally:
        forward["sock"] = None
        sock.close()
    if status < 0:  # the child was killed by signal -status: so is this process
        if -status not in (signal.SIGKILL, signal.SIGSTOP):  # their handlers cannot be set
            signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
        return 128 - status
    return status
