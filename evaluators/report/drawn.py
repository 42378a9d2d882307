"""The report's figures drawn once per tables: a report of the same tables (a rerun of the
same units into another directory) takes the PNG bytes from the unit store's memo
(:mod:`evaluators.units.memo`) instead of drawing them with matplotlib again.

A figure's key covers the tables the report read (results, summary, folds), the run's
configuration but where it was written (``output``, ``cache``), its data facts, what the
figure shows (metric, k) and the code; the PNG is kept as a one-row table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweval.evaluators.units.memo import Memo, memo_key

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sweval.evaluators.report.data import ReportData

#: Where a run was written: not what its figures show.
_PLACES = ("output", "cache")


def tables_fingerprint(data: ReportData) -> str:
    """A hash of what the report's figures are drawn from (module docstring)."""
    config = dict(data.config)
    config["config"] = {name: value for name, value in config.get("config", {}).items()
                        if name not in _PLACES}
    shown = {name: config.get(name) for name in ("config", "data", "resolved_params")}
    return memo_key("report-data", data.results, data.summary,
                    data.folds if data.folds is not None else "no folds",
                    json.dumps(shown, sort_keys=True, default=str), data.strata_total,
                    data.table_file)


def png(memo: Memo | None, what: str, inputs: tuple[Any, ...],
        draw: Callable[[], Figure | None]) -> bytes | None:
    """The PNG of ``draw()``'s figure (None without one), read from ``memo`` when the same
    ``inputs`` drew it before."""
    from sweval.evaluators.report.figures import figure_png

    if memo is None:
        fig = draw()
        return None if fig is None else figure_png(fig)

    def drawn() -> pd.DataFrame | None:
        fig = draw()
        return None if fig is None else pd.DataFrame({"png": [figure_png(fig)]})

    table = memo.table(f"report:{what}", inputs, drawn)
    return None if table is None else bytes(table["png"].iloc[0])
