"""Environment defaults for Prefect and MLflow, and the places SW-EVAL keeps its local state.

Every entry point (``sweval``, ``python -m sweval.flows.sliding_window``, the test suite) calls
:func:`apply_env_defaults` before Prefect is imported. Values already in the environment win.

Local state lives under ``SWEVAL_HOME`` (default ``~/.sweval``), whatever the working directory::

    ~/.sweval/prefect/        PREFECT_HOME: the ephemeral Prefect API's database (prefect.db)
    ~/.sweval/mlflow.db       the default MLflow tracking store (sqlite)
    ~/.sweval/mlartifacts/    its artifacts (one folder per experiment)
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweval.evaluators.units.failures import UnitFailure

#: Prefect settings SW-EVAL sets when the environment does not (measured on 2-core machines:
#: the ephemeral API's 20 s default start timeout is too short there).
PREFECT_DEFAULTS = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",  # Prefect's client-side telemetry (and its first-run notice)
    # MLflow's telemetry: it reads DO_NOT_TRACK only as "true", so "1" left it on (a thread
    # recording every client call, and a request to its config server in every process).
    "MLFLOW_DISABLE_TELEMETRY": "true",
    # MLflow's client prints two lines ("View run ... at", "View experiment at") for every run
    # it ends against a server, after a request of its own for the run's name; the summary's
    # last line gives the parent run and its comparison view.
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    # A tracking server that is gone (`sweval down` during a run, a crash) held every MLflow
    # call for its retries: 7 with backoff 2 s, 4, 8, ... (about 2 minutes a call, with Ctrl-C
    # caught in the middle). One that stops answering mid-run (hung, stopped, a proxy whose
    # upstream is gone) held each call for MLflow's 120 s read timeout, every try (8 minutes
    # with 3 retries). 5 s a try, 2 retries after 0 s and 4 s: at most 3 × 5 + 4 (+ 1 of
    # jitter) = 20 s a call, which still rides out a server's restart of a few seconds.
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "2",
    # The same for Prefect's API client once it has connected: 5 retries, 2 s doubling (about
    # 62 s a call: the flow's final state alone held a run 62-76 s after `sweval down`).
    # 3 retries, 2 s, 4 s, 8 s; and 15 s a try instead of 60 (a mute API held each call
    # 4 × 60 s + 14 s; now 4 × 15 s + 14 s, at most 74 s). Not lower: the temporary server
    # on a busy 2-core machine answers some requests in seconds.
    "PREFECT_CLIENT_MAX_RETRIES": "3",
    "PREFECT_API_REQUEST_TIMEOUT": "15",
    # `sweval report RUN_ID` downloads the run's tables: no tqdm bar over the command's output
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
    # Flow and task logs still reach the Prefect API (and UI) at INFO; the terminal shows
    # warnings and errors only, so the progress bar and the summary stay readable.
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
    # The ephemeral server's own shutdown chatter (cancelled event flushes) is not the user's
    # business; a real `prefect server start` is configured separately.
    "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
}


def sweval_home() -> Path:
    """``$SWEVAL_HOME``, default ``~/.sweval``."""
    return Path(os.environ.get("SWEVAL_HOME") or Path.home() / ".sweval").expanduser()


def default_tracking_uri() -> str:
    """The local MLflow store used when neither ``--tracking-uri`` nor ``MLFLOW_TRACKING_URI``
    is given: ``sqlite:///$SWEVAL_HOME/mlflow.db`` (never the deprecated file store)."""
    return f"sqlite:///{(sweval_home() / 'mlflow.db').resolve()}"


def apply_env_defaults(*, verbose: bool = False) -> None:
    """Set the Prefect defaults above (and ``PREFECT_HOME``) where the environment has none.

    Args:
        verbose: show Prefect's INFO lines in the terminal too.
    """
    os.environ.setdefault("PREFECT_HOME", str(sweval_home() / "prefect"))
    try:  # Prefect creates its home without parents and then fails to start its server
        Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # Prefect reports it with the path
    for name, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(name, value)
    if verbose:
        os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] = "INFO"
    mask_passwords_in_logs()


def mask_passwords_in_logs() -> None:
    """Make every log record of this process hold a URI's password masked
    (:func:`~evaluators.wording.shown_uri`), whoever logs it and wherever it goes: the terminal,
    a log file, Prefect's API (its database) or MLflow. Installed once, as the record factory:
    the message (and an exception's traceback text) is masked as the record is made."""
    global _masking
    if _masking:
        return
    from sweval.evaluators.wording import shown_uri

    make = logging.getLogRecordFactory()

    def masked(*args: object, **kwargs: object) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
            if "@" in message or "password" in message.lower():
                shown = shown_uri(message)
                if shown != message:
                    record.msg, record.args = shown, ()
            if record.exc_info and record.exc_info[1] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                if shown_uri(text) != text:
                    record.exc_text = shown_uri(text)
        except Exception:  # noqa: BLE001  (a record that cannot be formatted: as it is)
            pass
        return record

    logging.setLogRecordFactory(masked)
    _masking = True


_masking = False


@contextmanager
def flow_run_settings() -> Iterator[None]:
    """Prefect settings for a flow run started by ``sweval run``, where the user set none.

    Flow run heartbeats are off by default: Prefect 3.8 emits one every 180 s from a thread that
    sleeps in 1 s steps, and the end of every flow run waits for that thread's next step, so a
    command took a whole number of seconds longer than its work (0.5 s on average, up to 1).
    Heartbeats only serve zombie-run automations on a long-lived server; a
    ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` in the environment or the Prefect profile turns them
    back on (Prefect's own minimum is 30 s). Deployment runs (``sweval serve``, workers) keep
    Prefect's defaults.
    """
    from prefect.settings import temporary_settings

    with temporary_settings(set_defaults={"flows.heartbeat_frequency": None}):
        yield


class HideReportedErrors(logging.Filter):
    """Drop Prefect's terminal records about runs that failed with a :class:`SwevalError` or an
    unreachable Prefect API (an ``httpx`` error, Prefect's "Failed to reach API"), and its
    tracebacks once the command was stopped by a signal.

    A bad option or a missing file fails the flow with a SwevalError that the CLI prints as one
    line; Prefect's own "Finished in state Failed" lines and tracebacks would repeat it (the CLI
    says an unreachable API in one line too: ``flows.cli.app.UnreachablePrefectApi``). A stop
    signal (Ctrl-C) raises wherever the flow is, and Prefect logs the exception it surfaced as
    (a serialisation error, when it lands in a task's submission) with its traceback, while the
    CLI says in one line that the run was interrupted. The records still reach the Prefect API
    (and UI): only the terminal handler is filtered.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        import httpx

        from sweval.data.errors import SwevalError
        from sweval.flows.processes import is_stop

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, SwevalError | httpx.HTTPError) or (exc is not None and is_stop(exc)):
            return False
        message = record.getMessage()
        return not any(text in message for text in (
            "SwevalError", "Failed to reach API",
            "aborted by an interrupt signal",  # Ctrl-C: the CLI says "interrupted" itself
        ))


class UserErrorsWithoutTraceback(logging.Filter):
    """Keep a record about a :class:`SwevalError` (a bad option, a bad log) but drop its
    traceback: the error's message names the file, column and rows, and the traceback of the
    engine's frames around it, printed twice per failed flow run (Prefect's "Encountered
    exception during execution" and "Engine execution exited"), buried it in ``sweval serve``'s
    output and in the Prefect UI.

    The flow run's "Encountered exception during execution" record of a SwevalError that a task
    raised is dropped too: the task run's "Finished in state Failed(...)" record gave its
    message just before."""

    #: How many of the task runs' latest failed states are remembered.
    KEPT = 16

    def __init__(self) -> None:
        super().__init__()
        self.failed_tasks: list[str] = []  # the messages of the task runs' failed states

    def filter(self, record: logging.LogRecord) -> bool:
        from sweval.data.errors import SwevalError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, SwevalError):
            record.exc_info, record.exc_text = None, None
            record.sweval_error = str(exc)  # for the handlers after this one
        said = getattr(record, "sweval_error", None)
        if said is not None:
            return not (said and record.getMessage().startswith("Encountered exception") and any(
                said in message for message in self.failed_tasks))
        if record.name.startswith("prefect.task_runs") and record.levelno >= logging.ERROR:
            message = record.getMessage()
            if message.startswith("Finished in state Failed("):
                self.failed_tasks = [*self.failed_tasks[1 - self.KEPT:], message]
        return True


def user_errors_without_traceback() -> None:
    """Install :class:`UserErrorsWithoutTraceback` on every handler of the root logger and of
    Prefect's loggers (the console's and the API's), once; called as a flow run starts, in
    whatever process runs it (``sweval run``, a served or deployed run, a worker's), and mask
    the passwords in its log records (:func:`mask_passwords_in_logs`)."""
    mask_passwords_in_logs()
    manager = logging.root.manager
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in list(manager.loggerDict)
                                      if name.startswith("prefect"))]
    for handler in {handler for logger in loggers for handler in logger.handlers}:
        if not any(isinstance(f, UserErrorsWithoutTraceback) for f in handler.filters):
            handler.addFilter(UserErrorsWithoutTraceback())


class LostApiInOneLine(logging.Filter):
    """Prefect's API gone during a run (``sweval down``, a crash), in one terminal line.

    Prefect sends the task runs' states as events; with the API gone, its events client logs
    a warning per attempt to reconnect and its worker an error per event, with the event's
    whole JSON (several lines each, per fold). The first becomes one warning that says what
    is lost and what is not; the rest are dropped (only from the terminal)."""

    LOST = ("Service 'EventsWorker' failed to process item", "Unable to connect to 'ws")
    #: The events worker's countdown while it drains its queue at exit, once the loss is said.
    DRAINING = "Still processing items"

    def __init__(self) -> None:
        super().__init__()
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.said and message.startswith(self.DRAINING):
            return False
        if not message.startswith(self.LOST):
            return True
        if self.said:
            return False
        self.said = True
        record.msg, record.args = ("Prefect's API does not answer: this run's task-run states "
                                   "are not recorded there (the results are not affected)"), ()
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


class RetriesInOneLine(logging.Filter):
    """urllib3's warnings while MLflow's client retries a server that does not answer, in one
    terminal line.

    urllib3 logs one long warning per retry of each call ("Retrying (Retry(total=2, ...)) after
    connection broken by 'NewConnectionError(...)': /api/2.0/mlflow/runs/log-batch"): six lines
    before the run's own "MLflow logging deferred" warning when ``sweval down`` took the server
    away. The first says which server is retried; the rest are dropped (from the terminal)."""

    RETRYING = "Retrying ("
    SERVER = re.compile(r"host='([^']+)', port=(\d+)")

    def __init__(self) -> None:
        super().__init__()
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "urllib3.connectionpool":
            return True
        message = record.getMessage()
        if not message.startswith(self.RETRYING):
            return True
        if self.said:
            return False
        self.said = True
        found = self.SERVER.search(message)
        where = f"{found.group(1)}:{found.group(2)}" if found else "a server"
        record.msg, record.args = (f"{where} does not answer: retrying (MLflow's client; "
                                   "further retries are not shown)"), ()
        return True


class RepeatedFailuresInOneLine(logging.Filter):
    """A unit failure whose traceback was already shown, in one terminal line.

    A model that raises usually raises at the same place on every fold: 30 folds printed the
    same dozen-line traceback 30 times, and the first fold's, the one to read, scrolled away.
    The first failure of an algorithm at a given place (the traceback's frames) keeps its
    traceback; a later one with the same frames is its ``unit failed: fold f, label: error``
    line and a pointer to the fold whose traceback was shown. The message still says each
    failure's own error, and the summary lists every failed unit. One filter per command (the
    terminal handler's), so a command never points at another command's output.
    """

    def __init__(self) -> None:
        super().__init__()
        self.shown: dict[tuple[str, tuple[str, ...]], UnitFailure] = {}  # (label, frames)

    def filter(self, record: logging.LogRecord) -> bool:
        failure = getattr(record, "unit_failure", None)
        if failure is None:
            return True
        frames = tuple(line for line in failure.traceback.splitlines()
                       if line.startswith("  File "))
        first = self.shown.setdefault((failure.label, frames), failure)
        if first is not failure:
            where = f"fold {first.fold}" + ("" if first.stratum == "all"
                                            else f", stratum {first.stratum}")
            record.msg, record.args = "unit failed: %s (traceback as for %s, above)", (
                failure.describe(), where)
        return True


def hide_reported_errors_in_terminal() -> None:
    """Install :class:`HideReportedErrors` and one :class:`LostApiInOneLine` on the terminal
    handlers: the root logger's (Prefect's console handler, or ours when logging was configured
    first) and those of ``prefect._internal`` (which does not propagate: its services' errors,
    the events worker's among them, go to a stream handler of its own); call it after
    Prefect's import. Prefect's API handlers sit on its own loggers and keep every record.

    Also sets ``logging.raiseExceptions`` to False, the standard library's setting for
    production: Prefect's log shipper writes each batch it fails to send to stderr, raw
    ("--- Error logging to API ---", then the error without a newline, so that the command's
    own error line followed on the same line), when it is true.
    """
    logging.raiseExceptions = False
    handlers = [*logging.getLogger().handlers, *logging.getLogger("prefect._internal").handlers]
    lost = next((f for h in handlers for f in h.filters if isinstance(f, LostApiInOneLine)),
                None) or LostApiInOneLine()
    for handler in handlers:
        if not any(isinstance(f, HideReportedErrors) for f in handler.filters):
            handler.addFilter(HideReportedErrors())
        if lost not in handler.filters:
            handler.addFilter(lost)
