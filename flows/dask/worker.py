"""Preload of the local Dask workers (:mod:`flows.dask.cluster`): the fold task's imports, done
as each worker process starts, while the flow is still loading the log, instead of when the
worker unpickles its first fold task.

For a cluster of your own, the same warm-up is ``dask worker ... --preload sweval.flows.dask.worker``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

#: The start of distributed's message for a heartbeat that did not reach the scheduler.
HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat"


class HeartbeatFailureInOneLine(logging.Filter):
    """A failed heartbeat as one warning line instead of an error with a traceback.

    distributed logs a heartbeat whose connection to the scheduler fails (``OSError``) with a
    traceback, and the worker goes on (the next heartbeat follows). On a loaded 2-core machine
    this was seen at the very end of a Dask run that finished well (the stream to the scheduler
    closed while the local cluster was closing): a traceback on the user's terminal for
    nothing. The record keeps its message and the error, as one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(HEARTBEAT_FAILED):
            reason = record.exc_info[1] if record.exc_info else None
            record.msg, record.args = f"{HEARTBEAT_FAILED}: %s", (reason,)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def dask_setup(worker: Any) -> None:
    """Import what a fold task runs: the flow module (Prefect, the evaluation engine), the
    algorithm registry and the compiled kernels' module (numba; the kernels themselves load
    from numba's disk cache on first use); log failed heartbeats in one line
    (:class:`HeartbeatFailureInOneLine`) and Prefect's records as the flow's process does
    (:func:`~flows.settings.hide_reported_errors_in_terminal`: with the API lost, each worker
    printed its events' dumps and raw log-shipping errors); in a local cluster of ``sweval
    run``, ignore SIGINT (:data:`~flows.dask.cluster.IGNORE_SIGINT`)."""
    import sweval.algorithms.ranking_kernels  # noqa: F401
    import sweval.flows.sliding_window  # noqa: F401
    from sweval.flows.dask.cluster import IGNORE_SIGINT
    from sweval.flows.settings import hide_reported_errors_in_terminal

    hide_reported_errors_in_terminal()

    if os.environ.get(IGNORE_SIGINT) and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command that started us stops us

    logging.getLogger("distributed.worker").addFilter(HeartbeatFailureInOneLine())
