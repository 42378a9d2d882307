"""Nothing a command started outlives it: its servers and workers stop with it, on SIGINT, SIGTERM
and SIGHUP as on a normal exit.

What ``sweval`` commands start: ``sweval ui`` an ``mlflow server`` (which starts uvicorn and its
workers); ``sweval run`` Prefect's temporary API server and, with ``--task-runner dask``, a local
Dask cluster; ``sweval serve`` a subprocess per flow run. Python's default SIGTERM and SIGHUP end
the process at once, skipping ``finally`` blocks and ``atexit`` handlers, so all of those were
left running. Here::

    SIGINT, SIGTERM, SIGHUP ─▶ Stopped (a KeyboardInterrupt) raised in the main thread
        ─▶ the command unwinds: finally blocks, context managers (the Dask cluster closes),
           tracker.fail("KILLED"), atexit handlers (Prefect stops its temporary server)
        ─▶ at exit, last: every descendant still alive gets SIGTERM, and SIGKILL after a grace
    and, from the signal's arrival, a deadline: :data:`STOP_DEADLINE_S` later the command
    ends whatever it is doing (:func:`_arm_deadline`)

``mlflow server`` runs in a process group of its own (:func:`run_server`), stopped as a group:
its workers are in it even when their parent died first. (Prefect's runner in ``sweval serve``
installs its own SIGTERM handler, which stops the runner and exits; the exit sweep then stops
its flow-run processes.) SIGKILL cannot be caught: the servers a command starts (Prefect's
temporary server, ``sweval ui``'s MLflow server) each get a guard process that stops them once the
command is gone (:func:`flows.process_tree.stop_with_this_process`); local Dask workers watch
their parent themselves.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

import psutil

from sweval.flows.process_tree import (
    GRACE_S,
    stop_descendants,
    stop_group,
    stop_with_this_process,
    terminate_then_kill,
)

_log = logging.getLogger(__name__)

#: The signals that stop a command (and with it everything it started).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """The command was stopped by a signal (``signum``); exits with status 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


_installed = False
_received: int | None = None


#: Seconds a stopped command gets to unwind (finally blocks, MLflow's runs marked KILLED, its
#: children stopped) before it ends at once (:func:`_end_at_deadline`).
STOP_DEADLINE_S = 2.0
#: When the command ends at once whatever it is doing (``time.monotonic()``), once stopped.
_deadline_at: float | None = None


def _raise_stopped(signum: int, _frame: FrameType | None) -> None:
    global _received
    _received = signum
    _arm_deadline(signum)
    raise Stopped(signum)


def _arm_deadline(signum: int) -> None:
    """Make sure the command ends within :data:`STOP_DEADLINE_S` of its stop signal.

    The signal's exception unwinds the main thread, but nothing guarantees the process then
    ends: a library may swallow it (one did, in a 500-strata run's statistics, which went on
    for 20 minutes), and the interpreter's exit waits for worker threads (the report's
    rendering, a Prefect task). A daemon thread ends the process at the deadline: descendants
    stopped (SIGTERM, SIGKILL after 0.5 s), exit status 128 + the signal. What a command keeps
    on disk is written atomically (units, published tables), so nothing is left half-written.
    """
    global _deadline_at
    if not _installed or _deadline_at is not None:
        return
    _deadline_at = time.monotonic() + STOP_DEADLINE_S
    _arm_backstop()
    threading.Thread(target=_end_at_deadline, args=(signum,), name="sweval-stop-deadline",
                     daemon=True).start()


#: Seconds after the deadline at which the process ends from C (:func:`_arm_backstop`).
BACKSTOP_S = 1.5
_backstop_file: IO[str] | None = None


def _arm_backstop() -> None:
    """End the process :data:`BACKSTOP_S` after the deadline even if no Python code can run.

    The deadline's thread, like any Python code, needs the interpreter's lock, and a long C
    call of the main thread (a NumPy or pandas operation, a compiled extension) holds it:
    the stop then waited for that call. ``faulthandler``'s timer is a thread in C that takes no
    lock: at its time it calls ``_exit(1)`` (its traceback dump goes to ``os.devnull``). It is
    the last resort: exit status 1, and the command's children are left to the guards that
    watch it (:func:`stop_with_this_process`) and to the local Dask workers, which watch their
    parent."""
    global _backstop_file
    import faulthandler

    if _deadline_at is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if _backstop_file is None:
            _backstop_file = open(os.devnull, "w")  # noqa: SIM115 (kept for the timer)
        delay = max(0.0, _deadline_at - time.monotonic()) + BACKSTOP_S
        faulthandler.dump_traceback_later(delay, exit=True, file=_backstop_file)


def seconds_left() -> float | None:
    """Seconds until a stopped command ends at once (:data:`STOP_DEADLINE_S` after its stop
    signal, or later if postponed); None while it is not stopped."""
    return None if _deadline_at is None else _deadline_at - time.monotonic()


def deliver_prefect_logs_briefly(seconds: float = 1.0) -> None:
    """A stopped command's last Prefect logs: sent to the API for at most ``seconds`` (less
    when the stop's deadline is nearer), then dropped.

    The interpreter's exit flushes Prefect's API log handler (``logging.shutdown``), which
    waits up to 5 s for its worker, and by then the temporary API server has been stopped by
    its own exit handler: a stopped run's crash logs waited the whole stop deadline for a
    server that was gone. Sent here, before the exit handlers, while the server still runs;
    the worker is stopped either way, so the exit's flush finds nothing to wait for."""
    handlers = sys.modules.get("prefect.logging.handlers")  # loaded if a flow has run
    if handlers is None:
        return
    left = seconds_left()
    timeout = seconds if left is None else max(0.0, min(seconds, left - 1.0))
    with contextlib.suppress(Exception):
        handlers.APILogWorker.drain_all(timeout=timeout)


def postpone_deadline(seconds: float) -> None:
    """Give a stopped command ``seconds`` more (it waits for its children to stop, bounded)."""
    global _deadline_at
    if _deadline_at is not None:
        _deadline_at = max(_deadline_at, time.monotonic() + seconds)
        _arm_backstop()


def _end_at_deadline(signum: int) -> None:
    while _deadline_at is not None and time.monotonic() < _deadline_at:
        time.sleep(0.05)
    with contextlib.suppress(Exception):
        sys.stderr.write(f"interrupted: ended {STOP_DEADLINE_S:g} s after the stop signal, "
                         "without waiting for the rest of the command\n")
        sys.stderr.flush()
        stop_descendants(grace_s=0.5)
    os._exit(0 if _received is None else 128 + signum)  # None: the stop was its normal end


def _redeliver_dropped_stop(unraisable: object) -> None:
    """``sys.unraisablehook``: send a stop signal again when Python dropped its exception.

    The handler raises :class:`Stopped` wherever the main thread is, and that can be inside a
    finaliser or a weakref callback that the garbage collector happened to run (SQLAlchemy's
    registry is one): Python then prints "Exception ignored" and goes on, and the command ran to
    its end with status 0. The signal is sent again from a short-lived thread a moment later,
    so that the handler runs again once the main thread is out of the callback (should it land
    in another one, this repeats)."""
    exc = getattr(unraisable, "exc_value", None)
    if isinstance(exc, Stopped):
        threading.Thread(target=_send_again, args=(exc.signum,),
                         name="sweval-stop-again", daemon=True).start()
        return
    _previous_unraisablehook(unraisable)  # type: ignore[arg-type]


_previous_unraisablehook = sys.unraisablehook


def _send_again(signum: int) -> None:
    time.sleep(0.01)  # past the finaliser: the main thread is inside it while this starts
    os.kill(os.getpid(), signum)


def stop_children_first(signum: int, frame: FrameType | None) -> None:
    """A stop signal's handler for a process whose children must unwind before it does
    (``sweval serve``'s flow-run processes: they mark their runs stopped on the way out):
    SIGTERM to each child, SIGKILL to those still alive after :data:`GRACE_S`, then
    :class:`Stopped`, as :func:`stop_children_on_signals`' handler raises it."""
    with contextlib.suppress(psutil.Error):
        terminate_then_kill(psutil.Process().children(), GRACE_S)
    _raise_stopped(signum, frame)


def received_signal() -> int | None:
    """The stop signal this process received, if any."""
    return _received


def is_stop(exc: BaseException) -> bool:
    """Whether ``exc`` is a stop signal on its way out: :class:`Stopped` (or Ctrl-C's own
    KeyboardInterrupt); Prefect's ``TerminationSignal``, which its flow engine raises for a
    SIGTERM while a flow runs (its handler stands in for ours there, and sends the signal
    again once the flow is out); or any exception raised after a stop signal arrived (Dask's
    serialisation wraps a :class:`Stopped` in an error of its own)."""
    if isinstance(exc, KeyboardInterrupt) or _received is not None:
        return True
    prefect_exceptions = sys.modules.get("prefect.exceptions")  # loaded if a flow is running
    return prefect_exceptions is not None and isinstance(exc, prefect_exceptions.TerminationSignal)


def stopping(exc: BaseException) -> bool:
    """:func:`is_stop`; when ``exc`` is a stop, the command's deadline is armed too (a SIGTERM
    while a Prefect flow runs reaches Prefect's handler, not ours, which arms it), so the
    unwinding that follows (MLflow's runs marked KILLED) ends within :data:`STOP_DEADLINE_S`."""
    global _received
    if not is_stop(exc):
        return False
    if _received is None:
        _received = signal.SIGINT if isinstance(exc, KeyboardInterrupt) else signal.SIGTERM
    _arm_deadline(_received)
    return True


def stop_handled() -> None:
    """The command ended as it should on its stop signal (``sweval ui``): it exits with its own
    status, not 128 + the signal's number."""
    global _received
    _received = None


def stop_children_on_signals() -> None:
    """Make SIGINT, SIGTERM and SIGHUP unwind this command (:class:`Stopped`), and stop every
    descendant still alive when it exits. Call once, early, from the main thread."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stopped)
    sys.unraisablehook = _redeliver_dropped_stop
    atexit.register(stop_descendants)
    _installed = True
    _watch_arrivals()


#: Whether a stop signal's arrival arms the deadline (:func:`_watch_arrivals`); off where the
#: command's own handler paces its stop (:func:`handler_paces_the_stop`).
_arm_on_arrival = True


def _watch_arrivals() -> None:
    """Arm the stop's deadline when a stop signal arrives, not when its handler runs.

    Python runs a signal's handler in the main thread between two bytecodes: a main thread in
    a long C call (SQLite's commit waiting on a loaded disk's ``fsync``) runs it seconds late,
    and the deadline, armed by the handler, started late with it (one CI run ended 5.6 s after
    its SIGTERM). The interpreter's C-level handler writes the signal's number to the wakeup
    file descriptor at once (:func:`signal.set_wakeup_fd`); a daemon thread reading it arms
    the deadline then. Where the descriptor cannot be set, the handler arms it, as before."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read_end)
        os.close(write_end)
        return
    threading.Thread(target=_on_arrival, args=(read_end,), name="sweval-stop-arrival",
                     daemon=True).start()


def _on_arrival(read_end: int) -> None:
    global _received
    while True:
        try:
            numbers = os.read(read_end, 64)
        except OSError:
            return
        if not numbers:
            return
        for signum in numbers:
            if signum in STOP_SIGNALS and _arm_on_arrival:
                if _received is None:
                    _received = signum
                _arm_deadline(signum)


def handler_paces_the_stop() -> None:
    """The command's own signal handlers decide when it ends (``sweval serve``'s wait for its
    flow runs to unwind, :func:`stop_children_first`): a signal's arrival no longer arms the
    deadline; the handler's :class:`Stopped` does."""
    global _arm_on_arrival
    _arm_on_arrival = False


def run_server(argv: Sequence[str], env: Mapping[str, str], log: Path | None = None) -> int:
    """Run a server command in its own process group until it exits or this command is stopped
    (Ctrl-C, SIGTERM, SIGHUP: :class:`Stopped` propagates); the group is stopped either way.
    With ``log``, its output is appended there instead of the terminal.

    Returns:
        The server's exit status when it ended by itself.
    """
    output = None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        output = open(log, "ab")  # noqa: SIM115 (closed once the server ended)
    try:
        return _run_and_stop(argv, env, output)
    finally:
        if output is not None:
            output.close()


def _run_and_stop(argv: Sequence[str], env: Mapping[str, str], output: IO[bytes] | None) -> int:
    process = subprocess.Popen(list(argv), env=dict(env), start_new_session=True, stdout=output,
                               stderr=subprocess.STDOUT if output is not None else None)
    stop_with_this_process(process.pid)  # its group too, should this process be SIGKILLed
    try:
        return process.wait()
    finally:
        # A second Ctrl-C must not cut the stop short: the signals wait until it is done.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        postpone_deadline(2 * GRACE_S + STOP_DEADLINE_S)  # stop_group's own bounded waits
        try:
            stop_group(process)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
