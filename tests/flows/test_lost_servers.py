"""Servers that go away during a run (`sweval down`, a crash): the run does not wait minutes on
MLflow's retries, does not retry marking its runs, and says so in one line."""

from __future__ import annotations

import logging

from sweval.flows.settings import PREFECT_DEFAULTS, LostApiInOneLine
from sweval.flows.tracking.tracker import Tracker


def test_mlflow_retries_are_bounded_by_default():
    """MLflow's own default (7 retries, backoff 2 s doubling) held each call about 2 min."""
    assert PREFECT_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "3"
    assert PREFECT_DEFAULTS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == "1"


def test_a_tracker_whose_server_failed_does_not_call_it_again_to_mark_the_runs(caplog):
    tracker = Tracker.__new__(Tracker)
    tracker.uri = "http://127.0.0.1:5470"
    tracker.broken = ConnectionRefusedError("gone")
    tracker.client = None  # any call would raise AttributeError
    with caplog.at_level(logging.WARNING, logger="sweval.flows.tracking.tracker"):
        tracker.fail("KILLED")
    assert caplog.messages == ["MLflow: the runs are not marked KILLED: http://127.0.0.1:5470 "
                               "did not answer earlier (ConnectionRefusedError)"]


def test_the_lost_api_is_said_once():
    lost = LostApiInOneLine()

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("prefect.events.clients", logging.ERROR, "", 0, message, (),
                                 None)

    first = record("Unable to connect to 'ws://127.0.0.1:4470/api/events/in'. Please check")
    assert lost.filter(first) and first.levelname == "WARNING"
    assert first.getMessage().startswith("Prefect's API does not answer")
    assert not lost.filter(record("Service 'EventsWorker' failed to process item Event(...)"))
    assert lost.filter(record("something else"))
