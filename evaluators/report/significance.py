"""The report's significance views: who beats whom at one (metric, k), and the policy effect.

The matrices are ``significance.csv``'s rows when the directory has that table with its ``unit``
column (users-level rows need the units' per-user values, which only the run had), else they
are computed from the report's long table with :mod:`evaluators.stats.significance` (the run's
bootstrap settings; the folds); the policy effect is computed so, and equals
``significance_strata.csv``.

- :func:`significance_matrices`: per (protocol, stratum), a matrix whose cell (row a, column b)
  is a's mean paired lead over b (over users with ``--test-unit users``, else over folds) with
  stars for the corrected Wilcoxon p-values (``*`` < 0.05, ``**`` < 0.01, ``***`` < 0.001);
  green when a is significantly better, red when worse, amber where the design cannot tell;
  below it, what each design can show (:func:`~evaluators.stats.leads.power_statement`);
- :func:`policy_effect`: per pair of algorithms and pair of strata, the difference of leads with
  its interval and p-values (the logging-policy effect, papers/001 Table 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweval.evaluators.metrics.names import LABELS
from sweval.evaluators.report.data import ReportData
from sweval.evaluators.report.facts import PlainTable
from sweval.evaluators.stats.leads import design_power, power_statement, table_unit
from sweval.evaluators.stats.power import CORRECTION_NAMES
from sweval.evaluators.stats.significance import (
    ALPHA,
    Comparisons,
    compare_algorithms,
    compare_strata,
)
from sweval.evaluators.wording import interval_text, plural


@dataclass(frozen=True)
class MatrixCell:
    """One cell: its text, its kind (``win``, ``loss``, ``ns``, ``cannot``, ``self``, ``na``;
    the CSS class) and its tooltip."""

    text: str
    kind: str
    title: str = ""


@dataclass(frozen=True)
class SignificanceMatrix:
    """Who beats whom in one (protocol, stratum) at one (metric, k)."""

    protocol: str
    stratum: str
    algorithms: list[str]
    rows: list[list[MatrixCell]]
    no_power: bool
    unit: str = "folds"
    correction: str = "Holm"
    #: what each design can show: (sentence, whether it cannot tell)
    power: tuple[tuple[str, bool], ...] = ()


def stars(p: float) -> str:
    """``***`` p < 0.001, ``**`` p < 0.01, ``*`` p < 0.05, else empty."""
    if not np.isfinite(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < ALPHA else ""


def _at(results: pd.DataFrame, metric: str, k: int | None) -> pd.DataFrame:
    part = results[results["metric"] == metric]
    return part[part["k"].isna()] if k is None else part[(part["k"] == k).fillna(False)]


def _matrix_cell(table: pd.DataFrame, a: str, b: str) -> MatrixCell:
    """Cell (row a, column b) of ``table`` (one unit's Wilcoxon rows): a's mean paired lead
    over b with its stars, the interval, p-values and power in the tooltip; a lead that rounds
    to 0 prints +0.000 (format ``z``), never -0.000."""
    if a == b:
        return MatrixCell("", "self")
    for first, second, sign in ((a, b, 1.0), (b, a, -1.0)):
        row = table[(table["algorithm_a"] == first) & (table["algorithm_b"] == second)]
        if len(row):
            r = row.iloc[0]
            break
    else:
        return MatrixCell("", "na")
    diff = sign * float(r["mean_diff"])
    low, high = sorted((sign * float(r["ci_low"]), sign * float(r["ci_high"])))
    unit = str(r.get("unit", "folds"))
    n = int(r.get("n_units", r["n_folds"]))
    title = (f"{a} − {b}: {diff:+z.4g}, interval {interval_text(low, high, '+z.4g', ' to ')}, "
             f"{plural(n, f'paired {unit[:-1]}')}")
    if str(r["note"]).startswith("fewer than"):
        return MatrixCell(f"{diff:+z.3f}", "ns", f"{title}; {r['note']}")
    p = float(r.get("p_adjusted", r["p_holm"]))
    if not np.isfinite(p):
        p = float(r["p_holm"])
    correction = CORRECTION_NAMES.get(str(r.get("correction", "holm")), "Holm")
    title += f"; Wilcoxon p = {float(r['p_value']):.3g}, {correction} {p:.3g}"
    floor = float(r.get("min_p_reachable", np.nan))
    if np.isfinite(floor):
        title += f"; smallest reachable {floor:.3g}"
    detectable = float(r.get("mde", np.nan))
    if np.isfinite(detectable):
        title += f"; detectable at 80% power: {detectable:.3g}"
    if p < ALPHA:
        kind = "win" if diff > 0 else "loss"
    else:
        kind = "cannot" if np.isfinite(floor) and floor >= ALPHA else "ns"
    return MatrixCell(f"{diff:+z.3f}{stars(p)}", kind, title)


def _file_rows(data: ReportData, protocol: str, metric: str, k: int | None
               ) -> pd.DataFrame | None:
    """``significance.csv``'s rows of one protocol at ``metric``@``k`` (None: no such table)."""
    table = data.significance
    if table is None:
        return None
    if "protocol" in table.columns:
        table = table[table["protocol"].astype(str) == protocol]
    return _at(table, metric, k)


def significance_matrices(data: ReportData, metric: str, k: int | None) -> list[SignificanceMatrix]:
    """The matrices of every (protocol, stratum) at ``metric``@``k`` (Wilcoxon, corrected)."""
    matrices = []
    comparisons = Comparisons.of(data.config.get("config", {}))
    what = LABELS.get(metric, metric) + (f"@{k}" if k is not None else "")
    for protocol, part in _at(data.results, metric, k).groupby("protocol", sort=False):
        table = _file_rows(data, str(protocol), metric, k)
        if table is None:
            table = compare_algorithms(part.drop(columns="protocol"), data.bootstrap,
                                       order=data.algorithms)
        unit = table_unit(table, comparisons.unit)
        for stratum in data.strata:
            here = table[(table["stratum"] == stratum) & (table["test"] == "wilcoxon")]
            if "unit" in here.columns:
                here = here[here["unit"] == unit]
            names = [a for a in data.algorithms
                     if a in set(here["algorithm_a"]) | set(here["algorithm_b"])]
            if len(names) < 2:
                continue
            powers = [design_power(table, stratum=stratum, metric=metric, k=k, unit=name)
                      for name in dict.fromkeys(["folds", unit])]
            matrices.append(SignificanceMatrix(
                protocol=str(protocol), stratum=stratum, algorithms=names,
                rows=[[_matrix_cell(here, a, b) for b in names] for a in names],
                no_power=bool(here["note"].astype(str).str.startswith("fewer than").any()),
                unit=unit, correction=CORRECTION_NAMES[str(here["correction"].iloc[0])]
                if "correction" in here.columns else "Holm",
                power=tuple((power_statement(power, what), power.cannot_tell)
                            for power in powers if power is not None),
            ))
    return matrices


def _p(value: float, *, starred: bool = False) -> str:
    """A p-value to 3 significant digits (``—`` when absent), with :func:`stars` if ``starred``
    (only Holm-corrected p-values decide significance, so only they are starred)."""
    if not np.isfinite(value):
        return "—"
    return f"{value:.3g}{stars(value) if starred else ''}"


def policy_effect(data: ReportData, metric: str, k: int | None) -> PlainTable | None:
    """Is a's lead over b different between two strata? (None without strata.)"""
    if len([s for s in data.strata if s != "all"]) < 2:
        return None
    rows = []
    for protocol, part in _at(data.results, metric, k).groupby("protocol", sort=False):
        table = compare_strata(part.drop(columns="protocol"), data.bootstrap,
                               order=data.algorithms)
        for _, pair in table.groupby(["algorithm_a", "algorithm_b", "stratum_a", "stratum_b"],
                                     sort=False):
            w = pair[pair["test"] == "wilcoxon"].iloc[0]
            t = pair[pair["test"] == "t-test"].iloc[0]
            rows.append([
                *([str(protocol)] if data.labelled_protocols else []),
                f"{w['algorithm_a']} − {w['algorithm_b']}", f"{w['stratum_a']} vs {w['stratum_b']}",
                str(int(w["n_folds"])), f"{w['mean_diff']:+z.4f}",
                interval_text(w["ci_low"], w["ci_high"], "+z.4f", " to "),
                _p(w["p_value"]), _p(w["p_holm"], starred=True),
                _p(t["p_value"]), _p(t["p_holm"], starred=True),
            ])
    if not rows:
        return None
    columns = [*(["protocol"] if data.labelled_protocols else []), "lead of", "strata",
               "folds", "lead difference", f"{100 * data.bootstrap.level:g}% interval",
               "Wilcoxon p", "Holm", "t-test p", "Holm "]
    return PlainTable(columns=columns, rows=rows)
