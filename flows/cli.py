"""The ``sweval`` command line.

``sweval run`` evaluates algorithms with the sliding-window protocol (as the Prefect flow
``sliding-window-eval``, tracked in MLflow), ``sweval serve`` serves it on a cron schedule,
``sweval ui`` opens the MLflow UI on the local store, ``sweval generate`` writes a synthetic
log. Every user error is printed as one red line naming the problem, with exit status 2 and no
traceback.
"""

from __future__ import annotations

import functools
import gc
import inspect
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from sweval.data.errors import SwevalError
from sweval.flows.settings import apply_env_defaults

if TYPE_CHECKING:
    from sweval.evaluators.config import EvalConfig

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="SW-EVAL: sliding-window offline evaluation of recommender systems.",
)
console = Console(stderr=True)
_log = logging.getLogger(__name__)


def _split(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_settings(settings: list[str]) -> dict[str, dict[str, Any]]:
    """Turn ``--set als.factors=32 --set pop-n.n_recent=1000`` into ``{algo: {param: value}}``.

    Values are read as JSON when they parse (numbers, booleans), as text otherwise; each
    algorithm's config then validates and coerces them.
    """
    params: dict[str, dict[str, Any]] = {}
    for setting in settings:
        key, sep, raw = setting.partition("=")
        name, dot, param = key.strip().rpartition(".")
        if not sep or not dot or not name or not param:
            raise SwevalError(
                f"--set {setting!r}: expected ALGORITHM.PARAMETER=VALUE, e.g. pop-n.n_recent=1000."
            )
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        params.setdefault(name, {})[param] = value
    return params


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


def _eval_options(
    data: Annotated[str | None, typer.Option(help="Log file (CSV/TSV/Parquet/MovieLens, gzip ok) or bundled dataset name (movielens-latest-small). Default: a generated log (--scale, --seed).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="auto | csv | parquet | movielens.")] = "auto",
    user_col: Annotated[str | None, typer.Option(help="User column. \\[default: user]")] = None,
    item_col: Annotated[str | None, typer.Option(help="Item column. \\[default: item]")] = None,
    time_col: Annotated[str | None, typer.Option(help="Timestamp column. \\[default: timestamp]")] = None,
    policy_col: Annotated[str | None, typer.Option(help="Logging-policy column (kept for stratification).")] = None,
    time_unit: Annotated[str, typer.Option(help="Unit of numeric timestamps: s | ms.")] = "s",
    dedup: Annotated[str, typer.Option(help="first: keep the earliest (user, item) transaction | none: keep repeats.")] = "first",
    on_invalid: Annotated[str, typer.Option(help="Rows with a missing user/item/time: error | drop.")] = "error",
    scale: Annotated[float, typer.Option(help="Scale of the generated log when --data is not given.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Seed of the generated log.")] = 0,
    window: Annotated[str, typer.Option(help="Window width tΔ: 1D, 12h, 7D, 3600s, ...")] = "1D",
    folds: Annotated[int, typer.Option(help="Number of windows (folds).")] = 30,
    start: Annotated[str | None, typer.Option(help="Start of the first window (ISO date/time or epoch s). Default: windows aligned to end after the last event.")] = None,
    train_window: Annotated[str | None, typer.Option(help="Sliding training window (e.g. 30D). Default: all history before the window.")] = None,
    k: Annotated[str, typer.Option(help="List cut-offs, comma-separated.")] = "5,10,15,20",
    u_min: Annotated[int, typer.Option(help="Skip folds with fewer eligible users.")] = 100,
    relevance: Annotated[str, typer.Option(help="all: every test item is relevant | first: only the first.")] = "all",
    stratify_by: Annotated[str | None, typer.Option(help="Report results per value of this column (the logging policy).")] = None,
    stratify_mode: Annotated[str, typer.Option(help="subset: whole protocol per stratum | test: group test users.")] = "subset",
    algorithms: Annotated[str, typer.Option(help="Comma-separated: pop,pop-n,item-knn,user-knn,svd,als.")] = "pop,pop-n,item-knn,user-knn,svd,als",
    set_: Annotated[list[str] | None, typer.Option("--set", help="Hyper-parameter, ALGORITHM.PARAM=VALUE (repeatable).")] = None,
    output: Annotated[str, typer.Option(help="Output directory (results.csv, folds.csv, config.json, ...). Rerunning into it resumes.")] = "runs/latest",
    cache: Annotated[str | None, typer.Option(help="Unit store shared by runs and commands: a finished (fold, algorithm) unit is reused by every run that needs it. \\[default: $SWEVAL_CACHE, else <output>/units]")] = None,
    experiment: Annotated[str | None, typer.Option(help="MLflow experiment. \\[default: sweval/<dataset>]")] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI. \\[default: $MLFLOW_TRACKING_URI, else sqlite:///$SWEVAL_HOME/mlflow.db, SWEVAL_HOME=~/.sweval]")] = None,
    tracking: Annotated[bool, typer.Option("--tracking/--no-tracking", help="Log the run to MLflow.")] = True,
    task_runner: Annotated[str, typer.Option(help="Where the fold tasks run: sequential | threads | dask.")] = "sequential",
    workers: Annotated[int, typer.Option(help="Threads (threads) or local Dask worker processes (dask). \\[default: the CPU count]")] = 1,
    dask_address: Annotated[str | None, typer.Option(help="Scheduler of an existing Dask cluster (tcp://host:8786) for --task-runner dask; its workers need this code and the data path. Default: a local cluster.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
    config: Annotated[Path | None, typer.Option(help="TOML/YAML/JSON file with these options (the EvalConfig fields); command-line options given explicitly win.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details (and Prefect's INFO lines).")] = False,
) -> None:
    """The options every evaluation command takes (the fields of EvalConfig)."""


def _with_eval_options(func: Any) -> Any:
    """Give ``func`` (which takes ``**options``) every option of :func:`_eval_options` too."""
    own = [
        p for p in inspect.signature(func, eval_str=True).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    shared = list(inspect.signature(_eval_options, eval_str=True).parameters.values())
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own + shared]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        return func(**kwargs)

    del wrapper.__wrapped__
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def build_config(ctx: typer.Context, options: dict[str, Any]) -> EvalConfig:
    """The EvalConfig of the shared options (a --config file, overridden by explicit options)."""
    from sweval.evaluators.config import EvalConfig

    values: dict[str, Any] = {
        "data": options["data"], "format": options["fmt"], "user_col": options["user_col"],
        "item_col": options["item_col"], "time_col": options["time_col"],
        "policy_col": options["policy_col"], "time_unit": options["time_unit"],
        "dedup": options["dedup"], "on_invalid": options["on_invalid"],
        "scale": options["scale"], "seed": options["seed"], "window": options["window"],
        "folds": options["folds"], "start": options["start"],
        "train_window": options["train_window"],
        "k": [_int(v, "--k") for v in _split(options["k"]) or []],
        "u_min": options["u_min"], "relevance": options["relevance"],
        "stratify_by": options["stratify_by"], "stratify_mode": options["stratify_mode"],
        "algorithms": _split(options["algorithms"]),
        "params": parse_settings(options["set_"] or []), "output": options["output"],
        "cache": options["cache"],
        "experiment": options["experiment"], "tracking_uri": options["tracking_uri"],
        "tracking": options["tracking"], "task_runner": options["task_runner"],
        "workers": options["workers"], "dask_address": options["dask_address"],
        "progress": options["progress"],
    }
    if options["config"] is not None:
        explicit = {name: value for name, value in values.items() if _given(ctx, name)}
        return EvalConfig.load(options["config"], **explicit)
    return EvalConfig.build(**values)


@app.command(
    epilog="[bold]Algorithm parameters[/bold] (set with --set NAME.PARAM=VALUE):\n\n"
    + _algorithm_help()
)
@_with_eval_options
def run(
    ctx: typer.Context,
    rolling: Annotated[bool, typer.Option(help="Rolling mode: evaluate only the complete windows from --start that no earlier run into --output evaluated (what scheduled runs do).")] = False,
    prefect: Annotated[bool, typer.Option("--prefect/--no-prefect", help="Run as the Prefect flow sliding-window-eval (ephemeral local API unless PREFECT_API_URL is set); --no-prefect computes in this process without Prefect.")] = True,
    **options: Any,
) -> None:
    """Evaluate algorithms with the sliding-window protocol (SW-EVAL) and print the summary.

    Runs the Prefect flow [bold]sliding-window-eval[/bold] and logs to MLflow. Rerunning the same
    command resumes: finished (fold, algorithm) units in --output are not recomputed.
    """
    verbose = options["verbose"]
    _setup_logging(verbose)
    apply_env_defaults(verbose=verbose)
    cfg = build_config(ctx, options)
    from sweval.flows.pipeline import precheck
    from sweval.flows.summary import print_summary

    precheck(cfg)

    if prefect:
        outputs = _run_flow(cfg, rolling=rolling)
    else:
        from sweval.flows.execute import execute

        outputs = execute(cfg, rolling=rolling, tracking=cfg.tracking)
    if outputs is None:
        console.print(
            f"rolling: no complete {cfg.window} window yet in {cfg.data or cfg.dataset_name}; "
            "nothing to evaluate."
        )
        return
    print_summary(outputs, cfg)
    _print_tracking(cfg)


def _run_flow(cfg: EvalConfig, *, rolling: bool) -> Any:
    """Call the flow, turning an unreachable Prefect API into one clear error."""
    try:
        from sweval.flows.settings import hide_user_errors_in_terminal
        from sweval.flows.sliding_window import sliding_window_eval
        from sweval.flows.startup import prepare_side_by_side

        hide_user_errors_in_terminal()
        prepare_side_by_side(cfg)
        return sliding_window_eval(config=cfg, rolling=rolling)
    except SwevalError:
        raise
    except Exception as exc:
        import httpx

        if isinstance(exc, httpx.HTTPError) or "Prefect API" in str(exc):
            from sweval.flows.serve import api_url

            where = api_url() or "the ephemeral API (PREFECT_HOME=" + os.environ.get("PREFECT_HOME", "?") + ")"
            raise SwevalError(
                f"cannot reach the Prefect API at {where}: {exc}. Start it (`prefect server "
                "start`), unset PREFECT_API_URL to use a temporary local one, or run with "
                "--no-prefect."
            ) from exc
        raise


def _print_tracking(cfg: EvalConfig) -> None:
    """Where the run is in MLflow (from the run record in the output directory)."""
    if not cfg.tracking:
        return
    record = Path(cfg.output) / "tracking.json"
    try:
        state = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    Console().print(  # stdout, under the summary's "results:" line
        f"MLflow: experiment {state['experiment_id']}, parent run {state['parent_run_id']} "
        f"in {state['tracking_uri']} (browse: sweval ui"
        + (f" --tracking-uri {state['tracking_uri']}" if cfg.tracking_uri else "")
        + ")",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
@_with_eval_options
def serve(
    ctx: typer.Context,
    cron: Annotated[str, typer.Option(help="Cron schedule of the runs (5 fields).")] = "0 3 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of the cron schedule.")] = "UTC",
    name: Annotated[str, typer.Option(help="Deployment name: sliding-window-eval/NAME.")] = "rolling",
    rolling: Annotated[bool, typer.Option("--rolling/--full", help="Each run evaluates only the new complete windows (rolling), or re-evaluates the whole configuration (full).")] = True,
    **options: Any,
) -> None:
    """Serve a scheduled deployment of the flow (needs a Prefect server, PREFECT_API_URL).

    Registers [bold]sliding-window-eval/NAME[/bold] with the cron schedule and runs its flow runs
    from this process until interrupted. Each run re-reads --data; in rolling mode it evaluates
    the windows completed since the previous run and appends them to the same MLflow runs.
    Without --start, the first run fixes the series' start so it evaluates the last --folds
    complete windows. Trigger a run now with:
    prefect deployment run 'sliding-window-eval/NAME'
    """
    verbose = options["verbose"]
    _setup_logging(verbose)
    apply_env_defaults(verbose=verbose)
    cfg = build_config(ctx, options)
    from sweval.flows.pipeline import precheck
    from sweval.flows.serve import serve as serve_deployment

    precheck(cfg)

    console.print(
        f"serving sliding-window-eval/{name} ({'rolling' if rolling else 'full'}, cron "
        f"{cron!r} {timezone}); stop with Ctrl-C"
    )
    serve_deployment(cfg, name=name, cron=cron, timezone=timezone, rolling=rolling)


@app.command()
def ui(
    tracking_uri: Annotated[str | None, typer.Option(help="The MLflow store to show. \\[default: $MLFLOW_TRACKING_URI, else sqlite:///$SWEVAL_HOME/mlflow.db]")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 5000,
) -> None:
    """Open the MLflow UI on the local tracking store (mlflow server on 127.0.0.1)."""
    import subprocess

    from sweval.evaluators.config import EvalConfig
    from sweval.flows.tracking import resolve_tracking_uri, server_command, server_env

    uri = resolve_tracking_uri(EvalConfig(tracking_uri=tracking_uri))
    if uri.split(":", 1)[0] in ("http", "https"):
        console.print(f"{uri} is a tracking server already: open it in a browser.")
        return
    console.print(
        f"MLflow UI for {uri} on http://127.0.0.1:{port} (takes ~20 s to start; experiments "
        "are under 'Model training'); stop with Ctrl-C"
    )
    try:
        subprocess.run(server_command(uri, port=port), env=server_env(), check=False)
    except KeyboardInterrupt:
        pass


def _given(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source({"format": "fmt", "params": "set_"}.get(name, name))
    return source is not None and source.name == "COMMANDLINE"


def _int(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise SwevalError(f"{option}: {text!r} is not an integer.") from None


@app.command()
def generate(
    out: Annotated[Path, typer.Argument(help="Output file: .csv, .csv.gz or .parquet.")],
    scale: Annotated[float, typer.Option(help="1.0 ≈ 735k interactions, 189k users, 10.7k items, 120 days.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same log).")] = 0,
    days: Annotated[int, typer.Option(help="Length of the log in days.")] = 120,
    bias: Annotated[float, typer.Option(help="Share of clicks driven by the user's A/B bucket policy (presentation bias), 0..1.")] = 0.3,
) -> None:
    """Write a synthetic retail-like log with an A/B ``policy`` column."""
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
        f"{frame['item'].nunique():,} items"
    )


def _setup_logging(verbose: bool) -> None:
    """Our log lines on stderr: warnings, or INFO with -v. The handler's own level also keeps
    Prefect's INFO records (which propagate to the root logger) off the terminal."""
    handler = logging.StreamHandler()
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def entry_point() -> None:
    """The ``sweval`` console script: :func:`main`, then an exit without the long final sweep.

    Before the interpreter shuts down, every object still alive is moved out of the garbage
    collector's reach (``gc.freeze``). The collections that otherwise run while Prefect, MLflow
    and their dependencies are torn down cost about 1.1 s at every exit (2 cores). atexit
    handlers (Prefect stopping its temporary server, logging's flush), thread joins and the
    standard streams' flush run as usual; only objects caught in reference cycles are left
    for the operating system to reclaim. SW-EVAL's own files are closed when written, so
    nothing they hold waits for a collection.
    """
    try:
        main()
    finally:
        gc.freeze()


def main() -> None:
    """Run the command line: user errors become one clear line and exit status 2."""
    apply_env_defaults()  # before any command imports Prefect
    try:
        app(standalone_mode=False)
    except SwevalError as exc:
        console.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]: finished units are saved; rerun to resume.")
        sys.exit(130)
    except Exception as exc:  # click's own usage errors
        exceptions = _click_exceptions()
        if isinstance(exc, exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, typer.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, typer.Abort):
            sys.exit(1)
        raise


def _click_exceptions() -> Any:
    """The click exceptions typer raises: typer >= 0.20 vendors click as ``typer._click``."""
    try:
        from typer._click import exceptions
    except ImportError:  # older typer uses click itself
        from click import exceptions
    return exceptions


from sweval.flows.report_cli import report as _report  # noqa: E402
app.command(name="report")(_report)

from sweval.flows.compare import compare_command  # noqa: E402
app.command(name="compare")(_with_eval_options(compare_command(build_config, _setup_logging)))

from sweval.flows.cache_cli import app as _cache_app  # noqa: E402
app.add_typer(_cache_app, name="cache")


if __name__ == "__main__":
    entry_point()
