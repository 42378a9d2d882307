"""The report's figures drawn once per tables: a report of the same tables (a rerun of the
same units into another directory) takes the PNG bytes from the unit store's memo
(:mod:`evaluators.units.memo`) instead of drawing them with matplotlib again (nor importing it).
:class:`ReportFigure` is a figure as a page holds it: file name, PNG bytes, alternative text.

A figure's key covers the tables the report read (results, summary, folds), the run's
configuration but where it was written (``output``, ``cache``), its data facts, what the
figure shows (metric, k) and the code; the PNG is kept as a one-row table.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweval.evaluators.units.memo import Memo, memo_key

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sweval.evaluators.report.data import ReportData

@dataclass(frozen=True)
class ReportFigure:
    """A figure of the report: its PNG file name and bytes, and its alternative text."""

    file_name: str
    png: bytes
    alt: str

    @property
    def base64(self) -> str:
        """The PNG for a ``data:`` URL (the page embeds its figures)."""
        return base64.b64encode(self.png).decode("ascii")


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
    ``inputs`` drew it before; matplotlib is imported only to draw."""
    if memo is None:
        return _png_of(draw())

    def drawn() -> pd.DataFrame | None:
        picture = _png_of(draw())
        return None if picture is None else pd.DataFrame({"png": [picture]})

    table = memo.table(f"report:{what}", inputs, drawn)
    return None if table is None else bytes(table["png"].iloc[0])


def _png_of(fig: Figure | None) -> bytes | None:
    from sweval.evaluators.report.figures import figure_png

    return None if fig is None else figure_png(fig)
