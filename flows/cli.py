"""The ``sweval`` command line.

``sweval run`` evaluates algorithms with the sliding-window protocol, ``sweval generate`` writes a
synthetic log. Every user error is printed as one red line naming the problem, with exit
status 2 and no traceback.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from data.errors import SwevalError

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
    from algorithms.registry import ALGORITHMS

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
def run(
    data: Annotated[str | None, typer.Option(help="Log file (CSV/TSV/Parquet/MovieLens, gzip ok) or bundled dataset name (movielens-latest-small). Default: a generated log (--scale, --seed).")] = None,
    fmt: Annotated[str, typer.Option("--format", help="auto | csv | parquet | movielens.")] = "auto",
    user_col: Annotated[str | None, typer.Option(help="User column. [default: user]")] = None,
    item_col: Annotated[str | None, typer.Option(help="Item column. [default: item]")] = None,
    time_col: Annotated[str | None, typer.Option(help="Timestamp column. [default: timestamp]")] = None,
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
    output: Annotated[str, typer.Option(help="Output directory (results.csv, folds.csv, config.json, ...).")] = "runs/latest",
    config: Annotated[Path | None, typer.Option(help="TOML/YAML/JSON file with these options; command-line options given explicitly win.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details.")] = False,
) -> None:
    """Evaluate algorithms with the sliding-window protocol (SW-EVAL) and print the summary."""
    from evaluators.config import EvalConfig

    _setup_logging(verbose)
    options: dict[str, Any] = {
        "data": data, "format": fmt, "user_col": user_col, "item_col": item_col,
        "time_col": time_col, "policy_col": policy_col, "time_unit": time_unit, "dedup": dedup,
        "on_invalid": on_invalid, "scale": scale, "seed": seed, "window": window, "folds": folds,
        "start": start, "train_window": train_window, "k": [_int(v, "--k") for v in _split(k) or []],
        "u_min": u_min, "relevance": relevance, "stratify_by": stratify_by,
        "stratify_mode": stratify_mode, "algorithms": _split(algorithms),
        "params": parse_settings(set_ or []), "output": output,
    }
    if config is not None:
        ctx = typer.get_current_context()
        explicit = {
            name: value for name, value in options.items()
            if _given(ctx, name)
        }
        cfg = EvalConfig.load(config, **explicit)
    else:
        cfg = EvalConfig.build(**options)

    from flows.execute import execute
    from flows.summary import print_summary

    outputs = execute(cfg)
    print_summary(outputs, cfg)


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
    from data.synthetic import generate_log

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
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


def main() -> None:
    """Console-script entry point: user errors become one clear line and exit status 2."""
    try:
        app(standalone_mode=False)
    except SwevalError as exc:
        console.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]: finished units are saved; rerun to resume.")
        sys.exit(130)
    except Exception as exc:  # click's own usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(1)
        raise


from flows.report_cli import report as _report  # noqa: E402
app.command(name="report")(_report)


if __name__ == "__main__":
    main()
