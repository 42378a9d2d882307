"""Prefect's API server as SW-EVAL starts it on this machine (``sweval up``, and the temporary
API of ``sweval run``): Prefect's own app, answering only requests addressed to a loopback name.

A web page can make a browser send requests to 127.0.0.1 under a name of its own (DNS
rebinding: ``evil.example`` resolved to 127.0.0.1), which makes them same-origin for the browser,
so CORS and CSRF tokens do not stop them; the ``Host`` header still says ``evil.example``.
Prefect's server accepted any Host; MLflow's refuses those that are not its own. Here a request
(or websocket) whose Host is not in :data:`LOCAL_HOSTS` gets ``400 Invalid host header``.

uvicorn builds it with ``--factory sweval.flows.local_api:create_app``.
"""

from __future__ import annotations

from typing import Any

#: The names a local server answers to (any port).
LOCAL_HOSTS = ["127.0.0.1", "localhost"]


def only_local_hosts(app: Any) -> Any:
    """``app`` (ASGI) behind starlette's ``TrustedHostMiddleware`` for :data:`LOCAL_HOSTS`."""
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    return TrustedHostMiddleware(app, allowed_hosts=LOCAL_HOSTS, www_redirect=False)


def create_app() -> Any:
    """Prefect's server app (``prefect.server.api.server.create_app``), local hosts only."""
    from prefect.server.api.server import create_app as prefect_app

    return only_local_hosts(prefect_app())


def server_argv(port: int) -> list[str]:
    """The uvicorn command line of the app on 127.0.0.1:``port`` (as ``prefect server start``
    builds its own, with this module's factory)."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.find_spec("sweval")
    assert spec is not None and spec.submodule_search_locations
    package_parent = Path(next(iter(spec.submodule_search_locations))).parent
    return [sys.executable, "-m", "uvicorn", "--app-dir", str(package_parent), "--factory",
            "sweval.flows.local_api:create_app", "--host", "127.0.0.1", "--port", str(port)]
