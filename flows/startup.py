"""The start-up of ``sweval run``: Prefect's temporary API first, everything else beside it.

Without a Prefect API (no ``PREFECT_API_URL``, no ``sweval up``), Prefect's ephemeral mode
imports its whole server module into the command's process (seconds), then starts the server
in a subprocess and waits seconds more for it to answer; only then does the flow begin to load
the log. Here the same server (Prefect's app, ``prefect.server.api.server:create_app``, run by
uvicorn in ephemeral mode exactly as Prefect runs it) is spawned as the very first thing a run
does, ``PREFECT_API_URL`` points at it, and Prefect is only a client in this process::

    main thread   options ─ spawn the server ─ first line ─ load the log, import Prefect ─ wait ─ flow
    preload       └──────────────── open MLflow's store, import scipy.stats, the report ────┘
    server        └──────────── import Prefect's server, open its database, listen ───────┘

The server runs in a session of its own (a terminal's Ctrl-C reaches only the command, which
stops the server at exit, after Prefect's workers have delivered what they queued) with a guard
process that stops it should the command be killed outright
(:func:`flows.process_tree.stop_with_this_process`). A profile or ``prefect.toml`` that names an
API (read once Prefect is imported) wins: the spawned server is then stopped unused.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import logging
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import IO

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig

_log = logging.getLogger(__name__)

#: The environment of Prefect's ephemeral server (as Prefect's own SubprocessASGIServer sets it).
_SERVER_ENV = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1"}
#: Seconds between two health checks while the server starts.
_POLL_S = 0.1


class TemporaryApi:
    """Prefect's API server, started for one command (see the module docstring)."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, output: IO[bytes]) -> None:
        self.process = process
        self.port = port
        self.output = output
        self.url = f"http://127.0.0.1:{port}/api"

    @classmethod
    def start(cls) -> TemporaryApi | None:
        """Spawn the server and point ``PREFECT_API_URL`` at it; None when an API is set."""
        if os.environ.get("PREFECT_API_URL") or os.environ.get(
                "PREFECT_SERVER_EPHEMERAL_ENABLED", "true").lower() in ("false", "0"):
            return None
        spec = importlib.util.find_spec("prefect")
        if spec is None or not spec.submodule_search_locations:
            return None
        from sweval.flows.local_api import server_argv

        port = _free_port()
        argv = [*server_argv(port), "--log-level", "error", "--lifespan", "on"]
        from sweval.flows.process_tree import stop_with_this_process

        output = tempfile.TemporaryFile()  # its last lines, should it fail (a pipe could fill)
        process = subprocess.Popen(argv, env=os.environ | _SERVER_ENV, start_new_session=True,
                                   stdin=subprocess.DEVNULL, stdout=output, stderr=output)
        stop_with_this_process(process.pid)
        api = cls(process, port, output)
        atexit.register(api.stop)  # registered first: runs after Prefect's own exit handlers
        os.environ["PREFECT_API_URL"] = api.url
        return api

    def wait(self, timeout_s: float) -> None:
        """Return once the server answers its health check.

        Raises:
            SwevalError: it exited, or did not answer within ``timeout_s`` (with its last
                lines of output).
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SwevalError(f"Prefect's temporary API server exited with status "
                                  f"{self.process.returncode}: {self._tail()}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/health", timeout=1) as response:
                    if response.status == 200:
                        return
            time.sleep(_POLL_S)
        raise SwevalError(f"Prefect's temporary API server did not answer within {timeout_s:g} s "
                          f"(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS): {self._tail()}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def _tail(self) -> str:
        if self.process.poll() is None:
            return "(still starting)"
        self.output.seek(0)
        output = self.output.read().decode(errors="replace")
        return " | ".join(output.strip().splitlines()[-5:]) or "(no output)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ready_api(api: TemporaryApi | None) -> None:
    """Wait for the temporary server, once Prefect is imported: stop it unused when Prefect's
    settings name another API (a profile, ``prefect.toml``).

    Raises:
        SwevalError: the server did not start.
    """
    if api is None:
        return
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    configured = str(settings.api.url or "")
    if configured and configured.rstrip("/") != api.url:
        api.stop()
        return
    api.wait(float(settings.server.ephemeral.startup_timeout_seconds))


#: The thread of :func:`preload` while it runs (see :func:`finish_preloading`).
_preloading: threading.Thread | None = None


def preload(config: EvalConfig) -> None:
    """Open MLflow's store and import scipy's statistics and the report's plotting in a thread
    of their own (about 2.5 s of imports on 2 cores the run would do in turn, done while it
    loads its log and waits for the server); a failure is left for the run to meet again."""
    global _preloading

    def run() -> None:
        try:
            if config.tracking:
                from sweval.flows.tracking import open_client, resolve_tracking_uri

                open_client(resolve_tracking_uri(config))
            import scipy.stats  # noqa: F401  (the summary's intervals)

            import sweval.evaluators.report.figures  # noqa: F401  (matplotlib: the report)
            import sweval.evaluators.report.page  # noqa: F401
        except Exception as exc:  # noqa: BLE001  (the run does it again and reports the error)
            _log.debug("start-up: the background set-up failed: %s", exc)

    _preloading = threading.Thread(target=run, name="sweval-preload", daemon=True)
    _preloading.start()


def finish_preloading() -> None:
    """Wait for :func:`preload` (an import cut short at exit can abort the interpreter)."""
    if _preloading is not None:
        _preloading.join()
