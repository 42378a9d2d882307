"""The Prefect server SW-EVAL starts (`sweval up`, `sweval run`'s temporary API) takes WebSockets
from its own origin only (flows/local_api.py): browsers apply neither CORS nor CSRF tokens to
them, and Prefect has no setting that checks their Origin."""

from __future__ import annotations

import pytest

from sweval.flows.local_api import create_app, own_origin

EVENTS_IN = "ws://127.0.0.1:4200/api/events/in"


def _scope(origin: str | None, host: str = "127.0.0.1:4200") -> dict:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": "websocket", "headers": headers}


@pytest.mark.parametrize(("origin", "host", "own"), [
    (None, "127.0.0.1:4200", True),  # Prefect's own clients (websockets) send no Origin
    ("http://127.0.0.1:4200", "127.0.0.1:4200", True),  # the UI it serves
    ("http://localhost:4200", "127.0.0.1:4200", True),  # the same server by its other name
    ("http://evil.example", "127.0.0.1:4200", False),  # any web page
    ("http://evil.example:4200", "127.0.0.1:4200", False),
    ("http://127.0.0.1:3000", "127.0.0.1:4200", False),  # another local server's page
    ("null", "127.0.0.1:4200", False),  # a sandboxed page, a file:// page
    ("http://127.0.0.1:x", "127.0.0.1:4200", False),
    ("http://localhost", "localhost", True),
])
def test_a_websockets_origin_must_be_the_server_itself(origin, host, own) -> None:
    assert own_origin(_scope(origin, host)) is own


def test_prefects_event_socket_refuses_a_web_pages_origin_and_takes_its_own() -> None:
    """/api/events/in accepts events from whoever opens it: a page on another site, by way of
    the browser, could write to the server. Closed before it is accepted (policy violation,
    which uvicorn answers with HTTP 403)."""
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocketDisconnect

    # no lifespan (no `with`): no services to start and stop, the routes as the server has them
    client = TestClient(create_app(), base_url="http://127.0.0.1:4200")
    with pytest.raises(WebSocketDisconnect) as refused:
        with client.websocket_connect(EVENTS_IN, headers={"Origin": "http://evil.example"}):
            pass
    assert refused.value.code == 1008
    for headers in ({"Origin": "http://127.0.0.1:4200"}, {}):
        try:
            with client.websocket_connect(EVENTS_IN, headers=headers) as socket:
                socket.close()  # accepted
        except WebSocketDisconnect as closed:  # by Prefect, once accepted (no messaging here)
            assert closed.code != 1008, headers
