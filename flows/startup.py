"""The start-up of ``sweval run`` done side by side: Prefect's temporary server, MLflow, imports.

With no ``PREFECT_API_URL``, the first flow call starts Prefect's temporary API server, a
subprocess that needs about 3 s to answer, and this process only waits for it; the flow then
imports MLflow and sets up its store (about 1.7 s more on a 2-core machine). Done side by side,
the wait and the set-up overlap::

    main thread    import Prefect's server module ─┬─ import MLflow, set up the store, ─ join ─ flow
                                                   │  import the report's plotting
    helper thread                                  └─ start the temporary server: spawn it,
                                                      poll /health until it answers ─────┘

The server object is Prefect's own (``SubprocessASGIServer``, one per port): the flow's client
finds it running and reuses it, and Prefect stops it at exit as usual. Whatever fails here is
left for the flow to meet again where it raises its usual clear error.
"""

from __future__ import annotations

import logging
import threading

from sweval.evaluators.config import EvalConfig

_log = logging.getLogger(__name__)


def prepare_side_by_side(config: EvalConfig) -> None:
    """Start the temporary Prefect server (when one is needed) while MLflow is set up here."""
    server = _start_temporary_server()
    try:
        if config.tracking:
            from sweval.flows.tracking import open_client, resolve_tracking_uri

            open_client(resolve_tracking_uri(config))
        import sweval.evaluators.report  # noqa: F401  (matplotlib: the report at the end of the flow)
    except Exception as exc:  # noqa: BLE001  (the flow does it again and reports the error)
        _log.debug("start-up: the early set-up failed: %s", exc)
    finally:
        if server is not None:
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
            SubprocessASGIServer().start()
        except Exception as exc:  # noqa: BLE001  (the flow's client retries and raises)
            _log.debug("start-up: the temporary Prefect server did not start early: %s", exc)

    thread = threading.Thread(target=start, name="sweval-prefect-server", daemon=True)
    thread.start()
    return thread
