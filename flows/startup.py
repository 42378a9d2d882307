"""The start-up of ``sweval run`` done side by side: Prefect's temporary server, MLflow, imports.

With no ``PREFECT_API_URL``, the first flow call starts Prefect's temporary API server, a
subprocess that needs about 3 s to answer, and this process only waits for it; the flow then
imports MLflow and sets up its store (about 1.7 s more on a 2-core machine). Done side by side,
the wait and the set-up overlap::

    main thread    import Prefect's server module ─┬─ import MLflow, set up the store, ─ join ─ flow
                                                   │  import the report's plotting, scipy.stats
    helper thread                                  └─ start the temporary server: spawn it,
                                                      poll /health until it answers ─────┘

The server object is Prefect's own (``SubprocessASGIServer``, one per port): the flow's client
finds it running and reuses it, and Prefect stops it at exit as usual. Whatever fails here is
left for the flow to meet again where it raises its usual clear error.

With a running API (``sweval up``'s servers, or ``PREFECT_API_URL``) there is nothing to wait
for at the start, but the flow then waits on its servers at every call (creating the flow and
task runs, each MLflow ``log_batch``: a round trip each). The same set-up runs in a background
thread meanwhile, using those waits::

    main thread     flow: Prefect and MLflow calls (waits) ... collect, report ─ join at exit
    preload thread  open MLflow's client, import scipy.stats and the report's plotting
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

from sweval.evaluators.config.model import EvalConfig

_log = logging.getLogger(__name__)


#: Seconds a stopped command still gives the temporary server's start-up thread (it polls the
#: server's health for up to the start-up timeout, 120 s by default, under a loaded machine).
STOPPED_JOIN_S = 1.0
#: The thread of :func:`_preload` while it runs (see :func:`finish_preloading`).
_preloading: threading.Thread | None = None


def prepare_side_by_side(config: EvalConfig) -> None:
    """Start the temporary Prefect server (when one is needed) while MLflow is set up here;
    with a running API (``sweval up``'s, ``PREFECT_API_URL``), set up MLflow and import what the
    end of the flow needs in a background thread instead (see :func:`_preload`)."""
    global _preloading
    server = _start_temporary_server()
    if server is None:
        _preloading = threading.Thread(target=_preload, args=(config,),
                                       name="sweval-preload", daemon=True)
        _preloading.start()
        return
    try:
        _preload(config)
    except BaseException:  # a stop signal: no waiting for the server to answer
        server.join(STOPPED_JOIN_S)  # (the exit sweep stops its process)
        raise
    server.join()


def _start_temporary_server() -> threading.Thread | None:
    """A thread starting Prefect's temporary server, or None when an API URL is configured
    (or ephemeral mode is off: the flow call then raises Prefect's own error)."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        return None
    from prefect.server.api.server import SubprocessASGIServer

    def start() -> None:
        try:
            server = SubprocessASGIServer()
            with _own_session_and_guard():
                server.start()
        except Exception as exc:  # noqa: BLE001  (the flow's client retries and raises)
            _log.debug("start-up: the temporary Prefect server did not start early: %s", exc)

    thread = threading.Thread(target=start, name="sweval-prefect-server", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def _own_session_and_guard() -> Iterator[None]:
    """Processes this thread spawns meanwhile start a session of their own, each with a guard.

    Prefect spawns its temporary server in our process group, where a terminal's Ctrl-C
    (SIGINT to the whole foreground group) kills it along with us, while the stopping flow still
    reports to it. In its own session the server outlives the signal until our exit stops it
    (Prefect's ``stop`` at exit). A SIGKILL leaves no exit to run: the guard of
    :func:`~flows.processes.stop_with_this_process`, started the moment the server's process
    exists (not seconds later, once it answers), stops it then. Other threads' spawns, and
    spawns that choose their session themselves (the guard's own), are left as they are; the
    replacement is a ``Popen`` subclass, so ``isinstance`` still holds.
    """
    from sweval.flows.processes import stop_with_this_process

    popen = subprocess.Popen
    owner = threading.get_ident()

    class Popen(popen):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            ours = threading.get_ident() == owner and "start_new_session" not in kwargs
            if ours:
                kwargs["start_new_session"] = True
            super().__init__(*args, **kwargs)
            if ours:
                stop_with_this_process(self.pid)

    subprocess.Popen = Popen  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = popen  # type: ignore[misc]


def _preload(config: EvalConfig) -> None:
    """Open the MLflow client, import the report's plotting and scipy's statistics (the summary's
    bootstrap intervals): about 2.5 s of imports on 2 cores that the flow would do in turn, done
    while it waits on the temporary server's start-up or, in a background thread, on the Prefect
    and MLflow servers (each call a round trip). The flow's thread takes each module from here,
    or waits for its import to finish. A failure is left for the flow to meet again."""
    try:
        if config.tracking:
            from sweval.flows.tracking import open_client, resolve_tracking_uri

            open_client(resolve_tracking_uri(config))
        import scipy.stats  # noqa: F401  (evaluators.stats.significance, at the end of the flow)

        import sweval.evaluators.report.page  # noqa: F401  (matplotlib: the report)
    except Exception as exc:  # noqa: BLE001  (the flow does it again and reports the error)
        _log.debug("start-up: the background set-up failed: %s", exc)


def finish_preloading() -> None:
    """Wait for :func:`_preload` (an import cut short at exit can abort the interpreter)."""
    if _preloading is not None:
        _preloading.join()
