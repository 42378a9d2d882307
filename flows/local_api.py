"""Prefect's API server as SW-EVAL starts it on this machine (``sweval up``, and the temporary
API of ``sweval run``): Prefect's own app, answering only requests addressed to a loopback name.

A web page can make a browser send requests to 127.0.0.1 under a name of its own (DNS
rebinding: ``evil.example`` resolved to 127.0.0.1), which makes them same-origin for the browser,
so CORS and CSRF tokens do not stop them; the ``Host`` header still says ``evil.example``.
Prefect's server accepted any Host; MLflow's refuses those that are not its own. Here a request
(or websocket) whose Host is not in :data:`LOCAL_HOSTS` gets ``400 Invalid host header``.

Browsers apply neither CORS nor Prefect's CSRF tokens to a WebSocket: a page on any site could
open ``ws://127.0.0.1:4200/api/events/in`` (the Host is then the server's own) and write events,
and Prefect has no setting that checks a WebSocket's ``Origin``. A browser always sends it;
here a WebSocket whose ``Origin`` is not the server's own (a local name, the port it was
addressed to) is closed before it is accepted (HTTP 403). Prefect's own clients send no
``Origin`` and are let through, as any non-browser client (they are not the web's to stop).

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


def own_origin(scope: dict[str, Any]) -> bool:
    """Whether a request's ``Origin`` (if it has one) is the server it was sent to: a name of
    :data:`LOCAL_HOSTS`, the port of its ``Host`` header (80 or 443 when none)."""
    from urllib.parse import urlsplit

    headers = dict(scope.get("headers") or [])
    origin = headers.get(b"origin")
    if origin is None:
        return True
    try:
        parts = urlsplit(origin.decode("latin-1"))
        host = urlsplit("//" + headers.get(b"host", b"").decode("latin-1"))
        default = 443 if parts.scheme == "https" else 80
        return (parts.scheme in ("http", "https") and parts.hostname in LOCAL_HOSTS
                and (parts.port or default) == (host.port or default))
    except ValueError:  # a port that is not a number
        return False


def same_origin_websockets(app: Any) -> Any:
    """``app`` (ASGI) refusing WebSockets from another origin (:func:`own_origin`): closed
    before they are accepted, which the server answers with HTTP 403."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and not own_origin(scope):
            await send({"type": "websocket.close", "code": 1008})  # policy violation
            return
        await app(scope, receive, send)

    return guarded


def create_app() -> Any:
    """Prefect's server app (``prefect.server.api.server.create_app``), local hosts only, its
    WebSockets from its own origin only."""
    from prefect.server.api.server import create_app as prefect_app

    return only_local_hosts(same_origin_websockets(prefect_app()))


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
