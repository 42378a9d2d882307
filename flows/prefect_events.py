"""Prefect's events when its API is lost in the middle of a run.

Prefect sends a run's task-run states as events, through a queue that a worker thread drains
over a websocket. Its client makes up to 11 attempts per event, the last 7 after a second's
sleep each, before it gives the event up, and the queue is drained when the process exits.
With the API gone (``sweval down`` during a run, a crash), a run's queued events (several per
fold) went through those attempts one by one: a run that lost the API exited 7.5 minutes
after its error (64 events, about 7 s each)::

    event 1    11 attempts, about 7 s      (a server restarting meanwhile loses nothing)
    event 2..  1 attempt each, milliseconds while the API stays lost (a refused connection)
    event n    goes through → the patience is back for the next loss

An event that fails stays in the client's unconfirmed list, from which Prefect resends it on
the next connection that succeeds.
"""

from __future__ import annotations

from typing import Any

from prefect.events.clients import PrefectEventsClient
from prefect.events.worker import (
    EventsWorker,
    emit_events_to_cloud,
    should_emit_events_to_running_server,
)
from prefect.settings import PREFECT_API_URL


class QuickToGiveUpEventsClient(PrefectEventsClient):
    """Prefect's websocket events client, trying each event once while the API is lost."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.patience = self._reconnection_attempts

    async def _emit(self, event: Any) -> None:
        try:
            await super()._emit(event)
        except Exception:
            self._reconnection_attempts = 0
            raise
        self._reconnection_attempts = self.patience


def give_up_quickly_on_a_lost_api() -> None:
    """Send this process's events through :class:`QuickToGiveUpEventsClient` when they go to a
    server that ``PREFECT_API_URL`` names (``sweval up``'s, or one of the user's); Prefect
    Cloud keeps its own client, and the temporary server lives as long as the run. Call before
    the flow starts."""
    if should_emit_events_to_running_server() and not emit_events_to_cloud():
        EventsWorker.set_client_override(QuickToGiveUpEventsClient,
                                         api_url=PREFECT_API_URL.value())
