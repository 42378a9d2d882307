"""The state file of ``sweval up``'s servers (``$SWEVAL_HOME/servers.json``), read by
:mod:`flows.servers` and by :mod:`flows.tracking.client` (which store a server serves)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweval.flows.settings import sweval_home

#: The state file's name under ``$SWEVAL_HOME``.
STATE_FILE = "servers.json"


@dataclass(frozen=True, slots=True)
class Server:
    """One started server, as recorded in the state file."""

    name: str  # "prefect" or "mlflow"
    pid: int  # the leader of its own session: its process group id too
    create_time: float  # psutil's, to tell the process from a later one with the same pid
    port: int
    url: str  # the UI's address
    health_url: str
    log: str

    @property
    def api_url(self) -> str:
        """What clients are given: Prefect's ``/api``, MLflow's tracking URI (the server)."""
        return f"{self.url}/api" if self.name == "prefect" else self.url


def state_path() -> Path:
    return sweval_home() / STATE_FILE


def read_state() -> dict[str, Any] | None:
    """The state file's content, or None without one (or an unreadable one)."""
    try:
        state = json.loads(state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def recorded_servers(state: dict[str, Any] | None) -> list[Server]:
    if not state:
        return []
    try:
        return [Server(**entry) for entry in state.get("servers", [])]
    except TypeError:  # a state file from another version
        return []


def served_store(uri: str) -> str | None:
    """The backend store of the ``sweval up`` MLflow server at ``uri``, or None when ``uri`` is
    not that server (see :func:`flows.tracking.client.artifact_root`)."""
    state = read_state()
    if state and any(s.name == "mlflow" and s.url == uri.rstrip("/")
                     for s in recorded_servers(state)):
        return state.get("mlflow_store")
    return None
