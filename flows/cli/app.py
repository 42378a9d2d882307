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
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from sweval.data.errors import SwevalError
from sweval.flows.cli.options import build_config, with_eval_options
from sweval.flows.settings import RepeatedFailuresInOneLine, RetriesInOneLine, apply_env_defaults
from sweval.flows.cli.terminal import message_console, table_console

if TYPE_CHECKING:
    from sweval.evaluators.config.model import EvalConfig

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


def _algorithm_help() -> str:
    from sweval.algorithms.registry import ALGORITHMS

    lines = []
    for name, cls in ALGORITHMS.items():
        fields = [
            f"{param}={field.default!r}" + (f" ({field.description})" if field.description else "")
            for param, field in cls.Config.model_fields.items()
        ]
        lines.append(f"{name}: " + ("; ".join(fields) if fields else "no parameters"))
    return "\n\n".join(lines)


@app.command(
    epilog="[bold]Algorithm parameters[/bold] (set with --set NAME.PARAM=VALUE):\n\n"
    + _algorithm_help()
)
@with_eval_options
def run(
    ctx: typer.Context,
    rolling: Annotated[bool, typer.Option(help="Rolling mode: evaluate only the complete windows from --start that no earlier run into --output evaluated (what scheduled runs do).")] = False,
    prefect: Annotated[bool, typer.Option("--prefect/--no-prefect", help="Run as the Prefect flow sliding-window-eval (ephemeral local API unless PREFECT_API_URL is set); --no-prefect computes in this process without Prefect.")] = True,
    **options: Any,
) -> None:
    """Evaluate algorithms with the sliding-window protocol (SW-EVAL) and print the summary.

    Runs the Prefect flow [bold]sliding-window-eval[/bold] and logs to MLflow. Rerunning the same command resumes: finished (fold, algorithm) units in --output are not recomputed."""
    verbose = options["verbose"]
    _setup_logging(verbose)
    apply_env_defaults(verbose=verbose)
    cfg = build_config(ctx, options)
    from sweval.evaluators.run.plan import precheck
    from sweval.flows.cli.summary import print_summary

    precheck(cfg)

    if prefect:
        from sweval.evaluators.run.output_dir import claim
        from sweval.evaluators.run.plan import unit_store

        # a live run of its store from here, not once the flow starts: Prefect's start-up takes
        # seconds (9 s with the temporary server), in which `sweval cache prune` deleted units;
        # the output directory is claimed first (its units/ may be the store)
        claim(cfg.output)
        with unit_store(cfg).in_use():
            outputs = _run_flow(cfg, rolling=rolling)
    else:
        from sweval.flows.execute import execute

        outputs = execute(cfg, rolling=rolling, tracking=cfg.tracking)
    if outputs is None:
        console.print(
            f"rolling: no complete {cfg.window} window yet in {cfg.data or cfg.dataset_name}; "
            "nothing to evaluate.", markup=False
        )
        return
    print_summary(outputs, cfg)
    if rolling:
        from sweval.evaluators.run.rolling import progress_line, read_state

        state = read_state(Path(cfg.output))
        if "n_folds" in state:
            folds = outputs.folds
            skipped = folds.loc[folds["skipped"].astype(bool), "fold"].astype(int)
            console.print(progress_line(state, skipped), markup=False, highlight=False)
    _print_tracking(cfg)
    if outputs.failed:
        from sweval.evaluators.units.unit import UnitsFailed

        raise UnitsFailed(outputs.failed)
    if not rolling:  # a scheduled run's new window may be quiet; the next one is evaluated
        from sweval.flows.cli.summary import check_something_scored

        check_something_scored(outputs.results, u_min=cfg.u_min)


def _run_flow(cfg: EvalConfig, *, rolling: bool) -> Any:
    """Call the flow, turning an unreachable Prefect API into one clear error."""
    from sweval.flows.settings import flow_run_settings, hide_reported_errors_in_terminal
    from sweval.flows.sliding_window import sliding_window_eval
    from sweval.flows.startup import finish_preloading, prepare_side_by_side

    with _reaching_prefect("Start it (`sweval up`, or `prefect server start`), unset "
                           "PREFECT_API_URL to use a temporary local one, or run with "
                           "--no-prefect."):
        hide_reported_errors_in_terminal()
        prepare_side_by_side(cfg)
        try:
            with flow_run_settings():
                return sliding_window_eval(config=cfg, rolling=rolling)
        finally:
            finish_preloading()


@contextmanager
def _reaching_prefect(remedy: str) -> Iterator[None]:
    """Turn a Prefect API that does not answer, raised in the block (httpx's errors, or
    Prefect's own "Failed to reach API"), into one SwevalError naming the API, then ``remedy``;
    any other error passes through."""
    try:
        yield
    except SwevalError:
        raise
    except Exception as exc:
        import httpx

        if not isinstance(exc, httpx.HTTPError) and not any(
            text in str(exc) for text in ("Prefect API", "Failed to reach API")  # Prefect's own
        ):
            raise
        from sweval.flows.serve import api_url
        from sweval.flows.tracking import shown_uri

        where = api_url() or (
            f"the ephemeral API (PREFECT_HOME={os.environ.get('PREFECT_HOME', '?')})")
        raise UnreachablePrefectApi(
            shown_uri(f"cannot reach the Prefect API at {where}: {exc}. {remedy}")) from exc


class UnreachablePrefectApi(SwevalError):
    """The Prefect API did not answer: at the start, or gone in the middle of a run (``sweval
    down``, a crash). The command's exit then leaves Prefect's queued logs and events behind
    (:func:`entry_point`)."""


def _print_tracking(cfg: EvalConfig) -> None:
    """Where the run is in MLflow (from the run record in the output directory)."""
    if not cfg.tracking:
        return
    from sweval.flows.tracking import STATE_FILE, shown_uri

    record = Path(cfg.output) / STATE_FILE
    try:
        state = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    uri = state["tracking_uri"]
    if uri.split(":", 1)[0] in ("http", "https"):  # a server (`sweval up`'s): its UI is there
        from sweval.flows.tracking.view import comparison_url

        browse = comparison_url(uri, state["experiment_id"], state["parent_run_id"])
    else:
        browse = "sweval ui" + (f" --tracking-uri {uri}" if cfg.tracking_uri else "")
    message_console(stderr=False).print(  # stdout, under the summary's "results:" line
        f"MLflow: experiment {state['experiment_id']}, parent run {state['parent_run_id']} "
        f"in {shown_uri(uri)} (browse: {shown_uri(browse)})",
        markup=False,
    )


@app.command()
@with_eval_options
def serve(
    ctx: typer.Context,
    cron: Annotated[str, typer.Option(help="Cron schedule of the runs (5 fields).")] = "0 3 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of the cron schedule.")] = "UTC",
    name: Annotated[str, typer.Option(help="Deployment name: sliding-window-eval/NAME.")] = "rolling",
    rolling: Annotated[bool, typer.Option("--rolling/--full", help="Each run evaluates only the new complete windows (rolling), or re-evaluates the whole configuration (full).")] = True,
    **options: Any,
) -> None:
    """Serve a scheduled deployment of the flow (needs a Prefect server, PREFECT_API_URL).

    Registers [bold]sliding-window-eval/NAME[/bold] with the cron schedule and runs its flow runs from this process until interrupted. Each run re-reads --data; in rolling mode it evaluates the windows completed since the previous run and appends them to the same MLflow runs. Without --start, the first run fixes the series' start so it evaluates the last --folds complete windows. Trigger a run now with:

    prefect deployment run 'sliding-window-eval/NAME'"""
    verbose = options["verbose"]
    _setup_logging(verbose)
    apply_env_defaults(verbose=verbose)
    cfg = build_config(ctx, options)
    from sweval.evaluators.run.plan import precheck
    from sweval.flows.serve import serve as serve_deployment

    precheck(cfg)

    with _reaching_prefect("Start it (`sweval up`, or `prefect server start`), or point "
                           "PREFECT_API_URL at a running Prefect server."):
        serve_deployment(
            cfg, name=name, cron=cron, timezone=timezone, rolling=rolling,
            announce=lambda: console.print(
                f"serving sliding-window-eval/{name} ({'rolling' if rolling else 'full'}"
                f", cron {cron!r} {timezone}); trigger a run now with `prefect "
                f"deployment run 'sliding-window-eval/{name}'`; stop with Ctrl-C",
                markup=False))


@app.command()
def algorithms() -> None:
    """List every algorithm, built-in and plugin, with its parameters, defaults and origin.

    The table ends with where device=auto runs ALS and BPR here (the GPU, or the CPU and why) and their default devices (BPR: the CPU, on any machine). Plugins: entry points in the group [bold]sweval.algorithms[/bold]; any other class can be named by its import path (--algorithms pop,my_pkg.models:MyModel). A plugin that cannot be used is reported after the table, with exit status 2."""
    from rich.table import Table

    from sweval.algorithms.implicit_device import OnDevice, cuda_unavailable_reason
    from sweval.algorithms.registry import available

    _setup_logging(False)
    found, problems = available()
    table = Table(title="Algorithms (--algorithms NAME, --set NAME.PARAM=VALUE)")
    for column in ("name", "parameters (default)", "origin"):
        table.add_column(column, overflow="fold")
    for name, (cls, origin) in found.items():
        params = "\n".join(
            f"{param}={field.default!r}" + (f": {field.description}" if field.description else "")
            for param, field in cls.Config.model_fields.items()
        )
        table.add_row(escape(name), escape(params) or "—", escape(origin.describe()))
    table_console().print(table)
    on_device = [name for name, (cls, _origin) in found.items() if issubclass(cls, OnDevice)]
    if on_device:
        reason = cuda_unavailable_reason()
        where = "the GPU" if reason is None else f"the CPU here: {reason}"
        defaults = ", ".join(
            f"{name}.device={found[name][0].Config.model_fields['device'].default}"
            for name in on_device
        )
        message_console(stderr=False).print(
            f"device=auto ({', '.join(on_device)}) runs on {where}; defaults: {defaults}",
            markup=False,
        )
    if problems:
        raise SwevalError("\n".join(problems))


@app.command()
def ui(
    tracking_uri: Annotated[str | None, typer.Option(help="The MLflow store to show. \\[default: $MLFLOW_TRACKING_URI, else sqlite:///$SWEVAL_HOME/mlflow.db]")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 5000,
    browser: Annotated[bool, typer.Option("--browser/--no-browser", help="Open the latest evaluation's comparison chart in the default browser ($BROWSER) once the server answers; its address is printed either way.")] = True,
) -> None:
    """Open the MLflow UI on the local tracking store, on the latest evaluation's chart.

    Starts mlflow server on 127.0.0.1 and opens the run comparison chart of the latest evaluation."""
    from sweval.evaluators.config.model import EvalConfig
    from sweval.flows.processes import run_server, stop_handled
    from sweval.flows.servers import mlflow_server_of, port_holder
    from sweval.flows.tracking import (
        announce_when_ready,
        latest_comparison_url,
        resolve_tracking_uri,
        server_command,
        server_env,
        shown_uri,
    )
    from sweval.flows.tracking.client import prepare_sqlite_store

    uri = resolve_tracking_uri(EvalConfig(tracking_uri=tracking_uri))
    if uri.split(":", 1)[0] in ("http", "https"):
        console.print(shown_uri(f"{uri} is a tracking server already: open "
                                + (latest_comparison_url(uri, uri) or uri)), markup=False)
        return
    serving = mlflow_server_of(uri)
    if serving is not None:  # `sweval up`'s server has this store open: no second server
        console.print(f"the MLflow server of `sweval up` serves {shown_uri(uri)}: open "
                      + (latest_comparison_url(uri, serving) or serving), markup=False)
        return
    held = port_holder(port)
    if held is not None:  # else the announcement could point at another server there
        raise SwevalError(f"port {port} on 127.0.0.1 is taken ({held}): stop that process or "
                          "choose another port with --port.")
    from sweval.flows.settings import sweval_home

    log = sweval_home() / "logs" / "mlflow-ui.log"
    console.print(
        f"MLflow UI for {shown_uri(uri)} on http://127.0.0.1:{port} (takes ~20 s to start); "
        f"stop with Ctrl-C; the server's output goes to {log}", markup=False
    )
    prepare_sqlite_store(uri)  # built whole before the server opens it
    announce_when_ready(uri, f"http://127.0.0.1:{port}", browser=browser,
                        say=lambda line: console.print(line, markup=False))
    try:  # Ctrl-C, SIGTERM or SIGHUP stop the server's whole process group
        status = run_server(server_command(uri, port=port), server_env(), log=log)
    except KeyboardInterrupt:
        stop_handled()  # the UI's normal end: exit 0
        return
    if status != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise SwevalError(f"the MLflow server exited with status {status}; its last lines "
                          f"({log}): {' | '.join(tail)}")


@app.command()
def generate(
    out: Annotated[Path, typer.Argument(help="Output file: .csv, .csv.gz or .parquet.")],
    scale: Annotated[float, typer.Option(help="1.0 ≈ 735k interactions, 189k users, 10.7k items, 120 days.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same log).")] = 0,
    days: Annotated[int, typer.Option(help="Length of the log in days.")] = 120,
    bias: Annotated[float, typer.Option(help="Share of clicks driven by the user's A/B bucket policy (presentation bias), 0..1.")] = 0.3,
) -> None:
    """Write a synthetic retail-like log with an A/B policy column."""
    from sweval.data.synthetic import generate_log

    _setup_logging(False)
    if scale <= 0:
        raise SwevalError(f"--scale must be > 0, got {scale}.")
    frame = generate_log(scale=scale, seed=seed, days=days, bias=bias)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    else:
        frame.to_csv(out, index=False)
    console.print(
        f"wrote {out}: {len(frame):,} interactions, {frame['user'].nunique():,} users, "
        f"{frame['item'].nunique():,} items", markup=False
    )


def _setup_logging(verbose: bool) -> None:
    """Our log lines on stderr: warnings, or INFO with -v. The handler's own level also keeps
    Prefect's INFO records (which propagate to the root logger) off the terminal; MLflow's
    retries show as one line (:class:`~flows.settings.RetriesInOneLine`), as does a unit
    failure whose traceback was shown already
    (:class:`~flows.settings.RepeatedFailuresInOneLine`); the HTTP clients' request lines stay
    off even with -v."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RetriesInOneLine())
    handler.addFilter(RepeatedFailuresInOneLine())
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    for chatty in ("httpx", "httpcore"):  # a line per request to the Prefect API, under -v
        logging.getLogger(chatty).setLevel(logging.WARNING)


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

    # the interpreter's own two calls, in its order: threading's exit hooks (thread pools
    # told to stop) and the join of non-daemon threads, then the atexit handlers
    threading._shutdown()  # type: ignore[attr-defined]
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
        console.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
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
                           "bootstrap", "bootstrap_seed", "stratify_by", "stratify_mode"}

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
    omit=_SPLIT_ONLY | {"start"}))

from sweval.flows.cli.gap import DEFAULT_OUTPUT as gap_output  # noqa: E402
from sweval.flows.cli.gap import gap_command  # noqa: E402

app.command(name="gap")(with_eval_options(
    gap_command(build_config, _setup_logging),
    defaults={"output": gap_output}, omit=_SPLIT_ONLY))

from sweval.flows.cli.cache import app as _cache_app  # noqa: E402

app.add_typer(_cache_app, name="cache")

from sweval.flows.cli import servers as _servers_cli  # noqa: E402

app.command(name="up")(_servers_cli.up)
app.command(name="down")(_servers_cli.down)
app.command(name="status")(_servers_cli.status)


if __name__ == "__main__":
    entry_point()
