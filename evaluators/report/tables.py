"""The report's metric tables (the layout of the paper's Tables 2–3) and how values are written.

:func:`metric_table` arranges a per-protocol summary as mean metric@k per algorithm (columns) and
k (rows), one row block per stratum and one column block per protocol, with Δ% to the best (in
bold) at the same (protocol, stratum, k). The functions below it turn cells into the text the
report shows; the HTML itself is in ``templates/_tables.html.j2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.metrics.names import LABELS
from sweval.evaluators.report.data import unique_in_order
from sweval.evaluators.run.results import is_best
from sweval.evaluators.wording import interval_text, plural

MAX_TABLE_ALGORITHMS = 10  # value columns per table: protocols side by side up to this many


@dataclass(frozen=True)
class Cell:
    """One algorithm's summary at one (protocol, stratum, metric, k)."""

    mean: float
    delta: float
    std: float
    n_folds: int
    n_skipped: int
    best: bool
    ci_low: float = np.nan
    ci_high: float = np.nan


@dataclass(frozen=True)
class MetricTable:
    """The Table 2/3 layout of one metric.

    Attributes:
        metric: the metric name (``recall``, ...).
        strata: row blocks, in order.
        ks: rows within each block (``None`` for a metric without k, R-precision).
        columns: column blocks and columns: (protocol, algorithm), in order.
        cells: ``{(protocol, stratum, algorithm, k): Cell}``; a missing key is an algorithm the
            protocol does not run (e.g. POP-N under LOOCV).
    """

    metric: str
    strata: list[str]
    ks: list[int | None]
    columns: list[tuple[str, str]]
    cells: dict[tuple[str, str, str, int | None], Cell]

    def folds_used(self, protocol: str, stratum: str, algorithm: str) -> tuple[int, int] | None:
        """(used, skipped) folds of a column in a block, the most over its k."""
        found = [c for (p, s, a, _), c in self.cells.items()
                 if (p, s, a) == (protocol, stratum, algorithm)]
        if not found:
            return None
        return max(c.n_folds for c in found), max(c.n_skipped for c in found)

    def algorithms_by_protocol(self, protocols: Sequence[str]) -> list[tuple[str, list[str]]]:
        """Each of ``protocols`` with its columns' algorithms, in table order (read by the
        template)."""
        return [(p, [a for q, a in self.columns if q == p]) for p in protocols]

def metric_table(summary: pd.DataFrame, metric: str) -> MetricTable:
    """The Table 2/3 layout of ``metric`` from a per-protocol summary.

    A cell is best when it is the summary's best (:func:`~evaluators.run.results.is_best`: Δ% = 0 on
    the most folds of its (protocol, stratum, k), the highest mean among the algorithms scored
    on them); ties are all best. Where no cell of the group has a Δ% (an unranked metric, all
    means 0) the largest mean (> 0) is.
    """
    part = summary[summary["metric"] == metric]
    if part.empty:
        raise SwevalError(f"metric {metric!r} is not in the results.")
    part = part.assign(key_k=[None if pd.isna(k) else int(k) for k in part["k"]])
    groups = part.groupby(["protocol", "stratum", "metric", "k"], dropna=False)
    top = groups["mean"].transform("max")
    ranked = groups["delta"].transform(lambda delta: delta.notna().any())
    summary_best = is_best(part)
    strata = sorted(unique_in_order(part["stratum"]), key=lambda s: s != "all")
    ks = sorted(set(part["key_k"]), key=lambda k: (k is None, k or 0))
    columns = list(dict.fromkeys(zip(part["protocol"].astype(str), part["algorithm"].astype(str))))
    cells = {}
    for row, top_mean, has_delta, is_summary_best in zip(
        part.itertuples(index=False), top, ranked, summary_best, strict=True
    ):
        mean = float(row.mean)
        cells[(str(row.protocol), str(row.stratum), str(row.algorithm), row.key_k)] = Cell(
            mean=mean, delta=float(row.delta), std=float(row.std), n_folds=int(row.n_folds),
            n_skipped=int(row.n_skipped),
            best=bool(is_summary_best) if has_delta else _largest(mean, top_mean),
            ci_low=float(getattr(row, "ci_low", np.nan)),
            ci_high=float(getattr(row, "ci_high", np.nan)),
        )
    return MetricTable(metric=metric, strata=strata, ks=ks, columns=columns, cells=cells)


def _largest(mean: float, top: float) -> bool:
    """Best where the group has no Δ%: the largest mean, when it is above 0."""
    return bool(np.isfinite(mean) and top > 0 and mean >= top)


def protocol_groups(table: MetricTable, limit: int = MAX_TABLE_ALGORITHMS) -> list[list[str]]:
    """Protocols side by side in one table (the paper's Table 2) while their columns fit in
    ``limit`` algorithms; more start another table below."""
    groups: list[list[str]] = []
    width = 0
    for protocol in dict.fromkeys(p for p, _ in table.columns):
        n = sum(p == protocol for p, _ in table.columns)
        if groups and width + n <= limit:
            groups[-1].append(protocol)
            width += n
        else:
            groups.append([protocol])
            width = n
    return groups


def metric_label(metric: str, k: int | None = None) -> str:
    """``Recall@10``, ``R-precision``, or the raw name for an unknown metric."""
    label = LABELS.get(metric, metric)
    return label if k is None else f"{label}@{k}"


def format_mean(value: float) -> str:
    """A mean as shown in a table: 4 decimals, "—" when there is none (every fold skipped)."""
    return "—" if not np.isfinite(value) else f"{value:.4f}"


def format_delta(cell: Cell) -> str:
    """A cell's Δ% to the best: "best", "−12.3%", or "—" when there is none."""
    if cell.best:
        return "best"
    if not np.isfinite(cell.delta):
        return "—"
    return f"{100 * cell.delta:+z.1f}%".replace("-", "−")


def format_interval(cell: Cell) -> str:
    """A cell's bootstrap interval, "0.013–0.057", empty when there is none (one fold)."""
    if not (np.isfinite(cell.ci_low) and np.isfinite(cell.ci_high)):
        return ""
    return interval_text(cell.ci_low, cell.ci_high)


def format_k(k: int | None) -> str:
    """A row's k as shown in the table ("—" for a metric without k)."""
    return "—" if k is None else str(k)


def cell_title(metric: str, algorithm: str, k: int | None, cell: Cell) -> str:
    """A value cell's tooltip: its full-precision mean, std, fold counts and bootstrap interval
    (``n/a (one fold)`` where there is none); without a mean, that no fold was scored."""
    head = f"{algorithm}, {metric_label(metric, k)}: "
    if not np.isfinite(cell.mean):
        return head + f"no fold scored ({cell.n_skipped} skipped)"
    return (head + f"mean {cell.mean:.6g}, "
            + (f"std {cell.std:.4g}" if np.isfinite(cell.std) else "no std")
            + f" over {plural(cell.n_folds, 'fold')} ({cell.n_skipped} skipped), bootstrap "
            + f"interval {interval_text(cell.ci_low, cell.ci_high)}")


def format_folds(used: tuple[int, int] | None) -> str:
    """A column's row "folds": "used / skipped", empty for an algorithm the protocol lacks."""
    return "" if used is None else f"{used[0]} / {used[1]}"
