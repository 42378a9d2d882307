"""Servers that go away during a run (`sweval down`, a crash): the run does not wait minutes on
MLflow's retries, does not retry marking its runs, and says so in one line."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from sweval.flows.settings import PREFECT_DEFAULTS, LostApiInOneLine
from sweval.flows.tracking.tracker import Tracker


def test_mlflow_and_prefect_retries_are_bounded_by_default():
    """MLflow's own default (7 retries, backoff 2 s doubling) held each call about 2 min,
    Prefect's (5 retries, 2 s doubling) the flow's final state about 62 s."""
    assert PREFECT_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2"
    assert PREFECT_DEFAULTS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] == "2"
    assert PREFECT_DEFAULTS["PREFECT_CLIENT_MAX_RETRIES"] == "3"


@pytest.mark.slow  # two fresh interpreters
def test_requests_to_a_server_that_stops_answering_time_out_in_seconds_by_default():
    """MLflow's client waited 120 s a try for an answer, Prefect's 60 s: a server that went
    mute mid-run held each call for minutes. Bounded (the run then ends within 30 s:
    tests/flows/test_silent_servers.py), and a value the user set wins."""
    import os
    import subprocess

    assert int(PREFECT_DEFAULTS["MLFLOW_HTTP_REQUEST_TIMEOUT"]) * (
        int(PREFECT_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]) + 1) <= 15
    assert int(PREFECT_DEFAULTS["PREFECT_API_REQUEST_TIMEOUT"]) <= 15
    code = ("import os; from sweval.flows.settings import apply_env_defaults; "
            "apply_env_defaults(); from mlflow.environment_variables import "
            "MLFLOW_HTTP_REQUEST_TIMEOUT as M; from prefect.settings import "
            "PREFECT_API_REQUEST_TIMEOUT as P; print(M.get(), P.value())")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_HTTP_REQUEST_TIMEOUT", "PREFECT_API_REQUEST_TIMEOUT")}
    said = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True, timeout=120).stdout.split()
    assert said == ["5", "15.0"]
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120, env=env | {
                              "MLFLOW_HTTP_REQUEST_TIMEOUT": "300",
                              "PREFECT_API_REQUEST_TIMEOUT": "90"}).stdout.split()
    assert said == ["300", "90.0"]


class Exited(Exception):
    pass


def test_a_command_that_lost_the_prefect_api_exits_without_draining_prefects_queues(
        monkeypatch):
    """The interpreter's exit drained Prefect's queued logs and events, each request through
    the client's retries: 116 s after the error line, measured with `sweval down` mid-run."""
    from sweval.flows.cli import app as cli

    def exits(code: int) -> None:
        raise Exited(code)

    def lost() -> None:
        try:
            raise cli.UnreachablePrefectApi("cannot reach the Prefect API at ...")
        except cli.UnreachablePrefectApi:
            sys.exit(2)

    monkeypatch.setattr("sweval.flows.processes.stop_children_on_signals", lambda: None)
    monkeypatch.setattr(cli.gc, "freeze", lambda: None)
    monkeypatch.setattr(cli.os, "_exit", exits)
    monkeypatch.setattr(cli, "main", lost)
    with pytest.raises(Exited) as exited:
        cli.entry_point()
    assert exited.value.args == (2,)

    def other_error() -> None:
        try:
            raise cli.SwevalError("a bad option")
        except cli.SwevalError:
            sys.exit(2)

    monkeypatch.setattr(cli, "main", other_error)
    monkeypatch.setattr(cli, "exit_without_teardown", exits)
    with pytest.raises(Exited) as exited:  # the usual exit: atexit handlers, threads, flushes
        cli.entry_point()
    assert exited.value.args == (2,)


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

    lost_already = LostApiInOneLine()
    lost_already.said = True
    assert not lost_already.filter(record("Still processing items: 12 items remaining..."))
    assert lost.filter(record("Still processing items: 12 items remaining...")) is False


def test_the_terminal_filters_reach_prefects_internal_handler_and_its_raw_api_log_errors(
        monkeypatch):
    """The events worker's errors go to `prefect._internal`'s own handler (it does not
    propagate), and Prefect's log shipper writes its failures raw to stderr while
    logging.raiseExceptions is true: both reached the terminal around the one-line warning."""
    import prefect  # noqa: F401  (its logging configuration)

    from sweval.flows.settings import hide_reported_errors_in_terminal

    monkeypatch.setattr(logging, "raiseExceptions", True)
    hide_reported_errors_in_terminal()
    assert logging.raiseExceptions is False
    handlers = [*logging.getLogger().handlers, *logging.getLogger("prefect._internal").handlers]
    assert logging.getLogger("prefect._internal").handlers
    said_once = {id(f) for h in handlers for f in h.filters if isinstance(f, LostApiInOneLine)}
    assert len(said_once) == 1 and all(
        any(isinstance(f, LostApiInOneLine) for f in h.filters) for h in handlers)


def test_the_flow_engines_tracebacks_of_an_unreachable_api_stay_out_of_the_terminal():
    """QA: the Prefect server killed mid-run printed a 5 KB ConnectError traceback ("Encountered
    exception during execution") before the command's one error line."""
    import httpx

    from sweval.flows.settings import HideReportedErrors

    def record(message: str, exc: BaseException | None) -> logging.LogRecord:
        info = (type(exc), exc, None) if exc is not None else None
        return logging.LogRecord("prefect.flow_runs", logging.ERROR, "", 0, message, (), info)

    hide = HideReportedErrors()
    assert not hide.filter(record("Encountered exception during execution: ConnectError(...)",
                                  httpx.ConnectError("All connection attempts failed")))
    assert not hide.filter(record("Encountered exception during execution: "
                                  "RuntimeError('Failed to reach API at http://127.0.0.1:4491/api/')",
                                  None))
    assert hide.filter(record("Encountered exception during execution: ValueError('a bug')",
                              ValueError("a bug")))  # anything else still shows
    # Ctrl-C (QA): the CLI says "interrupted: finished units are saved" itself
    assert not hide.filter(record("Crash detected! Execution was aborted by an interrupt signal.",
                                  None))


def test_verbose_keeps_the_http_clients_request_lines_off_the_terminal():
    """QA: `sweval run -v` printed a line per Prefect API request (56 lines for one fold)."""
    from sweval.flows.cli.logs import setup_logging as _setup_logging

    root, httpx = logging.getLogger(), logging.getLogger("httpx")
    saved = root.handlers[:], root.level, httpx.level
    try:
        root.handlers[:] = []
        _setup_logging(True)
        assert root.isEnabledFor(logging.INFO)
        assert not httpx.isEnabledFor(logging.INFO) and httpx.isEnabledFor(logging.WARNING)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        httpx.setLevel(saved[2])


def test_mlflows_retries_are_said_once():
    from sweval.flows.settings import RetriesInOneLine

    class Shown:  # formats as urllib3's objects do with %r
        def __init__(self, text: str) -> None:
            self.text = text

        def __repr__(self) -> str:
            return self.text

    def record(total: int) -> logging.LogRecord:  # urllib3's own format and arguments
        return logging.LogRecord(
            "urllib3.connectionpool", logging.WARNING, "", 0,
            "Retrying (%r) after connection broken by '%r': %s",
            (Shown(f"Retry(total={total}, connect={total})"),
             Shown("NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=5471): Failed "
                   "to establish a new connection: [Errno 111] Connection refused\")"),
             "/api/2.0/mlflow/runs/log-batch"), None)

    retries = RetriesInOneLine()
    first = record(2)
    assert retries.filter(first)
    assert first.getMessage() == ("127.0.0.1:5471 does not answer: retrying (MLflow's client; "
                                  "further retries are not shown)")
    assert not retries.filter(record(1)) and not retries.filter(record(0))
    other = logging.LogRecord("sweval.evaluators.run.driver", logging.WARNING, "", 0,
                              "Retrying (not urllib3)", (), None)
    assert retries.filter(other) and other.getMessage() == "Retrying (not urllib3)"


def test_a_user_error_is_logged_without_its_traceback_other_errors_with_it() -> None:
    """QA: each served run with a bad log printed its error twice with the engine's whole
    traceback (8 tracebacks for 4 runs); the message already names the file, column and rows."""
    import io

    from sweval.data.errors import SwevalError
    from sweval.flows.settings import UserErrorsWithoutTraceback

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(UserErrorsWithoutTraceback())
    logger = logging.getLogger("sweval.test.user_errors")
    logger.addHandler(handler)
    try:
        for error in (SwevalError("log.csv: column 'timestamp' ..."), ValueError("a bug")):
            try:
                raise error
            except Exception:
                logger.exception("Encountered exception during execution: %r", error)
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "SwevalError(\"log.csv: column 'timestamp' ...\")" in text
    assert text.count("Traceback") == 1 and "ValueError: a bug" in text


def test_a_user_error_raised_in_a_task_is_logged_once() -> None:
    """A served run whose task raised a SwevalError logged its message twice: the task run's
    failed state, then the flow run's "Encountered exception during execution"."""
    import io

    from sweval.data.errors import SwevalError
    from sweval.flows.settings import UserErrorsWithoutTraceback

    streams = [io.StringIO(), io.StringIO()]  # Prefect's API handler and its console's
    handlers = [logging.StreamHandler(stream) for stream in streams]
    for handler in handlers:
        handler.addFilter(UserErrorsWithoutTraceback())
    task_logger = logging.getLogger("prefect.task_runs.sweval_test")
    flow_logger = logging.getLogger("sweval.test.flow_runs")
    for logger in (task_logger, flow_logger):
        for handler in handlers:
            logger.addHandler(handler)
        logger.propagate = False
    missing = SwevalError("/data/log.csv: no such file or bundled dataset")
    try:
        task_logger.error("Finished in state %s", f"Failed('Task run encountered an exception "
                          f"SwevalError: {missing}')")
        for error in (missing, SwevalError("the flow's own error")):
            try:
                raise error
            except Exception:
                flow_logger.exception("Encountered exception during execution: %r", error)
    finally:
        for logger in (task_logger, flow_logger):
            for handler in handlers:
                logger.removeHandler(handler)
            logger.propagate = True
    for stream in streams:
        text = stream.getvalue()
        assert text.count("/data/log.csv: no such file") == 1, text
        assert "Finished in state Failed('Task run encountered an exception SwevalError" in text
        assert "Encountered exception during execution: SwevalError(\"the flow's own error\")" \
            in text
        assert "Traceback" not in text


def test_an_mlflow_store_error_is_said_in_one_line() -> None:
    """A full disk under MLflow's SQLite store printed four tracebacks and the SQL statement
    with its parameters; now one line says the disk is full. Other store errors keep their
    message, without the statement, its parameters and SQLAlchemy's links."""
    import sqlite3

    import sqlalchemy.exc
    from mlflow.exceptions import MlflowException

    from sweval.flows.tracking.client import said

    def wrapped(message: str) -> MlflowException:  # as mlflow.store.db.utils raises it
        cause = sqlalchemy.exc.OperationalError(
            'INSERT INTO tags ("key", value, run_uuid) VALUES (?, ?, ?)',
            [("sweval.run_key", "k", "r")], sqlite3.OperationalError(message))
        return MlflowException(str(cause))

    full = said(wrapped("database or disk is full"))
    assert full.startswith("the disk that holds it is full") and "\n" not in full
    assert said(OSError(28, "No space left on device")) == full
    locked = said(wrapped("database is locked"))
    assert locked == "MlflowException: (sqlite3.OperationalError) database is locked"


@pytest.mark.slow
def test_a_full_disk_under_the_mlflow_store_ends_the_run_in_one_line(tmp_path) -> None:
    """The real thing: the store on a full tmpfs (needs root with CAP_SYS_ADMIN)."""
    import os
    import subprocess

    from sweval_testing import log_frame

    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("no tmpfs can be mounted here (not root, or no CAP_SYS_ADMIN)")
    try:
        log_frame(8).to_csv(tmp_path / "log.csv", index=False)
        argv = [str(Path(sys.executable).parent / "sweval"), "run", "--data",
                str(tmp_path / "log.csv"), "--window", "1D", "--folds", "2", "--u-min", "1",
                "--algorithms", "pop", "--no-progress", "--no-prefect", "--output"]
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        uri = f"sqlite:///{disk / 'mlflow.db'}"
        first = subprocess.run([*argv, str(tmp_path / "a"), "--tracking-uri", uri], env=env,
                               capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        filler = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        (disk / "filler").write_bytes(b"\0" * filler)
        done = subprocess.run([*argv, str(tmp_path / "b"), "--tracking-uri", uri], env=env,
                              capture_output=True, text=True, timeout=300)
        said = done.stdout + done.stderr
        assert done.returncode == 2, said
        assert "Traceback" not in said and "[SQL:" not in said, said
        assert f"error: MLflow tracking at {uri}: the disk that holds it is full" in said
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
