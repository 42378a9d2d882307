"""The ``sweval`` command line.

``sweval run`` evaluates algorithms with the sliding-window protocol (as the Prefect flow
``sliding-window-eval``, tracked in MLflow), ``sweval serve`` serves it on a cron schedule,
``sweval ui`` opens the MLflow UI on the local store, ``sweval generate`` writes a synthetic
log, ``sweval algorithms`` lists the algorithms (built-in and plugins). Every user error is
printed as one red line naming the problem, with exit status 2 and no traceback; a run whose
every unit could not be computed (an algorithm raised) writes the others' results, lists the
failed units and exits with status 3.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape

from sweval.data.errors import SwevalError
from sweval.flows.cli.options import build_config, with_eval_options
from sweval.flows.cli.terminal import message_console
from sweval.flows.settings import apply_env_defaults

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="SW-EVAL: sliding-window offline evaluation of recommender systems.",
)
console = message_console()
_log = logging.getLogger(__name__)


def _print_version(value: bool) -> None:
    """``--version``: the installed distribution's version (its metadata), then exit."""
    if value:
        from importlib.metadata import version

        print(f"sweval {version('sweval')}")
        raise typer.Exit()


#: The commands that use the servers of ``sweval up`` when they are up (:mod:`flows.servers`),
#: and whether each runs Prefect flows (else it uses MLflow only).
SERVER_COMMANDS = {"run": True, "serve": True, "compare": False, "leakage": False, "gap": False,
                   "report": False, "ui": False}


@app.callback()
def _options(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the installed version and exit.",
    )] = False,
) -> None:
    """SW-EVAL: sliding-window offline evaluation of recommender systems."""
    if ctx.invoked_subcommand in SERVER_COMMANDS and "--help" not in sys.argv[1:]:
        from sweval.flows.servers import use_local_servers

        prefect = SERVER_COMMANDS[ctx.invoked_subcommand] and "--no-prefect" not in sys.argv
        use_local_servers(prefect=prefect,  # --no-prefect: not even Prefect's settings import
                          say=lambda line: console.print(line, markup=False))


def entry_point() -> None:
    """The ``sweval`` console script: :func:`main`, then an exit without the long final sweep.

    Before the interpreter shuts down, every object still alive is moved out of the garbage
    collector's reach (``gc.freeze``). The collections that otherwise run while Prefect, MLflow
    and their dependencies are torn down cost about 1.1 s at every exit (2 cores). atexit
    handlers (Prefect stopping its temporary server, logging's flush), thread joins and the
    standard streams' flush run as usual; only objects caught in reference cycles are left
    for the operating system to reclaim. SW-EVAL's own files are closed when written, so
    nothing they hold waits for a collection.

    Then the process ends as the interpreter's exit would end it, minus its last stage
    (:func:`exit_without_teardown`): the modules are not torn down one by one (about 0.16 s a
    command on 2 cores, with Prefect, MLflow, pandas and matplotlib imported).

    SIGINT, SIGTERM and SIGHUP unwind the command like Ctrl-C, and whatever it started (servers,
    workers, flow-run processes) is stopped with it (:mod:`flows.processes`).

    A command that ended on an :class:`UnreachablePrefectApi` exits at once after its error
    line, without the interpreter's exit: Prefect's log and events workers would otherwise try
    to deliver what they have queued, each request through the client's retries (measured with
    ``sweval down`` in the middle of a run: 116 s between the error and the process's end).
    SW-EVAL's own work is on disk by then: finished units, and the output directory's lock is
    the kernel's to release.
    """
    from sweval.flows.processes import stop_children_on_signals

    stop_children_on_signals()
    try:
        main()
        status = 0
    except SystemExit as done:
        if isinstance(done.__context__, UnreachablePrefectApi):
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(done.code if isinstance(done.code, int) else 2)
        if done.code is not None and not isinstance(done.code, int):
            raise  # a message to print: the interpreter's own exit does that
        status = done.code or 0
    finally:
        gc.freeze()
    exit_without_teardown(status)


def exit_without_teardown(status: int) -> NoReturn:
    """End the process with ``status`` as the interpreter's exit does, up to its last stage:
    stop thread pools and wait for the threads that are not daemons, run the ``atexit`` handlers (Prefect stopping
    its temporary server and flushing its log and event workers, logging's flush, MLflow's,
    the registrations of :func:`~evaluators.units.locks.register_for_life`, ``weakref.finalize``
    callbacks), flush stdout and stderr (a failed flush of a successful command: status 120,
    as the interpreter gives). The last stage, skipped here, tears down every module and the
    objects they hold: nothing of SW-EVAL's waits for it (its files are closed when
    written), and the kernel reclaims the memory."""
    import atexit
    import threading

    from sweval.flows.processes import deliver_prefect_logs_briefly, received_signal

    # the interpreter's own two calls, in its order: threading's exit hooks (thread pools
    # told to stop) and the join of non-daemon threads, then the atexit handlers. A command
    # stopped by a signal does not wait for its worker threads (the report's rendering, a
    # task's statistics): what they would write is written atomically or not at all.
    if received_signal() is None:
        threading._shutdown()  # type: ignore[attr-defined]
    else:
        deliver_prefect_logs_briefly()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120
    os._exit(status)


def main() -> None:
    """Run the command line: user errors become one clear line and exit status 2 (3: a run
    finished with failed units); a command stopped by a signal exits with 128 + its number."""
    apply_env_defaults()  # before any command imports Prefect
    from sweval.flows.processes import received_signal

    try:
        status = app(standalone_mode=False)
    except SwevalError as exc:
        if received_signal():  # a stop signal's exception, turned into another on its way out
            _interrupted()
        from sweval.evaluators.wording import shown_uri

        console.print(f"[bold red]error:[/bold red] {escape(shown_uri(str(exc)))}")
        sys.exit(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        _interrupted()
    except Exception as exc:  # click's own usage errors
        if received_signal():
            _interrupted()
        exceptions = _click_exceptions()
        if isinstance(exc, exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, typer.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, typer.Abort):
            sys.exit(1)
        raise
    # typer turns a KeyboardInterrupt (Ctrl-C, SIGTERM, SIGHUP) into Exit(130); a stop signal
    # whose exception some library caught let the command go on to its end: stopped all the same
    if status == 130 or received_signal():
        _interrupted()
    if isinstance(status, int) and status:  # a command's typer.Exit(code) (`sweval status`: 1)
        sys.exit(status)


#: The commands that compute units: stopped, they resume where they were when rerun.
RESUMABLE = frozenset({"run", "compare", "leakage", "gap"})


def _interrupted() -> None:
    """A command stopped by Ctrl-C, SIGTERM or SIGHUP (:mod:`flows.processes`): say so (and, for
    an evaluation, how to resume), exit with 128 + the signal's number (130, 143, 129)."""
    from sweval.flows.processes import received_signal

    command = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if command in RESUMABLE:
        console.print("[yellow]interrupted[/yellow]: finished units are saved; rerun to resume.")
    else:
        console.print("[yellow]interrupted[/yellow]")
    sys.exit(128 + (received_signal() or 2))


def _click_exceptions() -> Any:
    """The click exceptions typer raises: typer >= 0.20 vendors click as ``typer._click``."""
    try:
        from typer._click import exceptions
    except ImportError:  # older typer uses click itself
        from click import exceptions
    return exceptions


from sweval.flows.cli import algorithms as _algorithms  # noqa: E402
from sweval.flows.cli import generate as _generate  # noqa: E402
from sweval.flows.cli import run as _run  # noqa: E402
from sweval.flows.cli import serve as _serve  # noqa: E402
from sweval.flows.cli import ui as _ui  # noqa: E402
from sweval.flows.cli.logs import setup_logging as _setup_logging  # noqa: E402
from sweval.flows.cli.run import UnreachablePrefectApi  # noqa: E402

app.command(cls=_run.RunCommand)(_run.run)
app.command()(_serve.serve)
app.command()(_algorithms.algorithms)
app.command()(_ui.ui)
app.command()(_generate.generate)

from sweval.flows.cli.report import report as _report  # noqa: E402

app.command(name="report")(_report)

from sweval.flows.cli.compare import DEFAULT_OUTPUT as compare_output  # noqa: E402
from sweval.flows.cli.compare import compare_command  # noqa: E402

#: Options of `sweval run` whose output an experiment command does not produce: not offered
#: there ("No such option" rather than a silent no-op). Options about where and how a command
#: runs (--tracking, --task-runner, --workers, ...) stay accepted for scripts that pass them
#: to every command.
_RUN_ONLY = frozenset({"lag", "metrics", "seeds", "per_user"})
#: ... nor in leakage and gap, which score one split per algorithm.
_SPLIT_ONLY = _RUN_ONLY | {"folds", "tune", "tune_windows", "tune_metric", "tune_sampler",
                           "tune_trials", "tune_seed", "tune_mode", "ci", "ci_method",
                           "bootstrap", "bootstrap_seed", "test_unit", "baseline", "correction",
                           "summary_bootstrap", "stratify_by", "stratify_mode"}

app.command(name="compare")(with_eval_options(
    compare_command(build_config, _setup_logging),
    defaults={"output": compare_output}, omit=_RUN_ONLY))

from sweval.flows.cli.inspect import inspect as _inspect  # noqa: E402

app.command(name="inspect")(_inspect)

from sweval.flows.cli.leakage import DEFAULT_OUTPUT as leakage_output  # noqa: E402
from sweval.flows.cli.leakage import leakage_command  # noqa: E402

app.command(name="leakage")(with_eval_options(
    leakage_command(build_config, _setup_logging),
    defaults={"output": leakage_output},
    omit=_SPLIT_ONLY | {"start", "train_window", "relevance"}))

from sweval.flows.cli.gap import DEFAULT_OUTPUT as gap_output  # noqa: E402
from sweval.flows.cli.gap import gap_command  # noqa: E402

app.command(name="gap")(with_eval_options(
    gap_command(build_config, _setup_logging),
    defaults={"output": gap_output}, omit=_SPLIT_ONLY))

from sweval.flows.cli.cache import app as _cache_app  # noqa: E402

app.add_typer(_cache_app, name="cache")

from sweval.flows.cli.datasets import app as _datasets_app  # noqa: E402

app.add_typer(_datasets_app, name="datasets")

from sweval.flows.cli import servers as _servers_cli  # noqa: E402

app.command(name="up")(_servers_cli.up)
app.command(name="down")(_servers_cli.down)
app.command(name="status")(_servers_cli.status)


if __name__ == "__main__":
    entry_point()
