"""``sweval inspect [DATA]``: dataset diagnostics to look at before choosing tΔ and u_min.

Reads the log as ``sweval run`` would: its data options are generated from the Data panel of
EvalConfig, as run's are (DATA is also positional), and the log comes from the same
:func:`~sweval.evaluators.run.sources.load_data`, with the same generated default. Prints the
candidate window widths' usable folds and the users' and items' active time, and writes
``inspect.html`` with figures (see :mod:`evaluators.report.inspect_page`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from sweval.data.errors import SwevalError
from sweval.evaluators.config.text import DATA
from sweval.flows.cli.options import build_config, with_eval_options
from sweval.flows.cli.terminal import message_console, table_console

if TYPE_CHECKING:
    import pandas as pd


console = message_console(markup=False)  # paths print as they are


@functools.partial(with_eval_options, group=DATA, extra=[], argument="data")
def inspect(
    ctx: typer.Context,
    windows: Annotated[str, typer.Option(help="Candidate window widths tΔ, comma-separated.")] = "1h,1D,7D,30D",
    window: Annotated[str, typer.Option(help="Width of the per-window figures and table.")] = "7D",
    u_min: Annotated[int, typer.Option(help="The u_min to check the widths against (as `sweval run --u-min`).")] = 100,
    output: Annotated[Path, typer.Option(help="Directory of inspect.html, its figures and inspect-windows.csv.")] = Path("runs/inspect"),
    **options: Any,
) -> None:
    """Dataset diagnostics: usable folds per window width, active time, new items per window."""
    from sweval.data.durations import parse_duration
    from sweval.evaluators.report.inspect_page import format_frame, inspect_log, write_inspection
    from sweval.evaluators.run.sources import load_data

    config = build_config(ctx, options, group=DATA)  # validated as `sweval run` validates them
    if u_min < 0:
        raise SwevalError(f"--u-min must be ≥ 0, got {u_min}.")
    widths = [(w.strip(), parse_duration(w.strip(), option="--windows"))
              for w in windows.split(",") if w.strip()]  # fmt: skip
    if not widths:
        raise SwevalError("--windows: give at least one width, e.g. 1D,7D.")
    shown = (window.strip(), parse_duration(window, option="--window"))
    log = load_data(config)
    if len(log) == 0:
        raise SwevalError(f"{log.source}: the log is empty.")
    inspection = inspect_log(log, widths, shown, u_min)

    out = table_console()
    for term, text in inspection.facts:
        out.print(f"[bold]{escape(term)}[/bold]: {escape(text)}")
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
        table.add_column(escape(str(column)), justify="left" if i == 0 else "right")
    for row in frame.itertuples(index=False):
        table.add_row(*(escape(str(v)) for v in row))
    return table
