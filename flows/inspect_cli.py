"""``sweval inspect [DATA]``: dataset diagnostics to look at before choosing tΔ and u_min.

Reads the log as ``sweval run`` would (same data options, same generated default), prints the
candidate window widths' usable folds and the users' and items' active time, and writes
``inspect.html`` with figures (see :mod:`evaluators.diagnostics_page`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from sweval.data.errors import SwevalError

console = Console(stderr=True)
out = Console()


def inspect(
    data: Annotated[str | None, typer.Argument(help="Log file (CSV/TSV/Parquet/MovieLens, gzip ok) or bundled dataset name. Default: the generated log of `sweval run` (--scale, --seed).", show_default=False)] = None,
    windows: Annotated[str, typer.Option(help="Candidate window widths tΔ, comma-separated.")] = "1h,1D,7D,30D",
    window: Annotated[str, typer.Option(help="Width of the per-window figures and table.")] = "7D",
    u_min: Annotated[int, typer.Option(help="The u_min to check the widths against (as `sweval run --u-min`).")] = 100,
    output: Annotated[Path, typer.Option(help="Directory of inspect.html, its figures and inspect-windows.csv.")] = Path("runs/inspect"),
    format: Annotated[Literal["auto", "csv", "parquet", "movielens"], typer.Option(help="auto | csv | parquet | movielens.")] = "auto",
    user_col: Annotated[str | None, typer.Option(help="User column. [default: user]", show_default=False)] = None,
    item_col: Annotated[str | None, typer.Option(help="Item column. [default: item]", show_default=False)] = None,
    time_col: Annotated[str | None, typer.Option(help="Timestamp column. [default: timestamp]", show_default=False)] = None,
    time_unit: Annotated[Literal["s", "ms"], typer.Option(help="Unit of numeric timestamps: s | ms.")] = "s",
    dedup: Annotated[Literal["first", "none"], typer.Option(help="first: keep the earliest (user, item) transaction | none: keep repeats.")] = "first",
    on_invalid: Annotated[Literal["error", "drop"], typer.Option(help="Rows with a missing user/item/time: error | drop.")] = "error",
    scale: Annotated[float, typer.Option(help="Scale of the generated log when DATA is not given.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Seed of the generated log.")] = 0,
) -> None:
    """Dataset diagnostics: usable folds per window width, active time, new items per window."""
    from sweval.evaluators.config import EvalConfig
    from sweval.evaluators.diagnostics_page import format_frame, inspect_log, write_inspection
    from sweval.evaluators.run import load_data
    from sweval.evaluators.windows import parse_duration

    if u_min < 0:
        raise SwevalError(f"--u-min must be ≥ 0, got {u_min}.")
    widths = [(w.strip(), parse_duration(w.strip(), option="--windows"))
              for w in windows.split(",") if w.strip()]  # fmt: skip
    if not widths:
        raise SwevalError("--windows: give at least one width, e.g. 1D,7D.")
    shown = (window.strip(), parse_duration(window, option="--window"))
    config = EvalConfig(
        data=data, format=format, user_col=user_col, item_col=item_col, time_col=time_col,
        time_unit=time_unit, dedup=dedup, on_invalid=on_invalid, scale=scale, seed=seed,
    )  # fmt: skip
    log = load_data(config)
    if len(log) == 0:
        raise SwevalError(f"{log.source}: the log is empty.")
    inspection = inspect_log(log, widths, shown, u_min)

    for term, text in inspection.facts:
        out.print(f"[bold]{term}[/bold]: {text}")
    out.print(_table(format_frame(inspection.eligibility),
                     f"Window widths against u_min = {u_min} (usable = windows with ≥ u_min "
                     "eligible users)"))
    out.print(_table(format_frame(inspection.active), "Active time (days from first to last "
                     "transaction)"))
    written = write_inspection(inspection, output)
    console.print(f"page: {written[0]}")


def _table(frame: pd.DataFrame, title: str) -> Table:
    table = Table(title=title, title_justify="left", padding=(0, 1))
    for i, column in enumerate(frame.columns):
        table.add_column(str(column), justify="left" if i == 0 else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*(str(v) for v in row))
    return table
