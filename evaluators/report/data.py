"""The input of a report: an output directory of ``sweval run`` or ``sweval compare``, read.

:func:`load` reads the long table (``compare.csv`` when the directory has one: the long table plus
a ``protocol`` column, else ``results.csv``), the run record (``compare.json`` / ``config.json``),
``folds.csv`` and ``units.csv`` into a :class:`ReportData`. Means, Δ% and fold counts are
recomputed from the long table with :func:`evaluators.run.results.summarise` (per protocol), so they
match ``summary.csv``; so are the bootstrap intervals, with the run's ``--ci``, ``--ci-method``,
``--bootstrap`` and ``--bootstrap-seed`` read from its record (defaults when it has none), except
a run's two-level intervals (``--summary-bootstrap two-level``, which need the per-user values),
read from its ``summary.csv``. ``significance.csv`` is read when it has the ``unit`` column.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.run.output_dir import verify
from sweval.evaluators.run.results import largest_strata, summarise
from sweval.evaluators.stats.significance import Bootstrap, attach_intervals, with_intervals

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportData:
    """What a report is built from.

    Attributes:
        directory: the output directory read.
        table_file: the long table read (``results.csv`` or ``compare.csv``).
        results: the long table, with a ``protocol`` column ("" when the input has none).
        summary: per (protocol, algorithm, stratum, metric, k): mean, std, n_folds, n_skipped,
            delta, as :func:`~evaluators.run.results.summarise` computes them per protocol, and the
            bootstrap interval ci_low, ci_high.
        config: ``config.json`` (``compare.json`` next to ``compare.csv``; empty when absent).
        folds: ``folds.csv`` (None when absent).
        units: ``units.csv`` (None when absent or empty).
        significance: ``significance.csv`` (None when absent or written before it had a
            ``unit`` column).
        strata_total: the strata of the table other than ``all``, when the report shows only
            the largest of them (:func:`~evaluators.run.results.largest_strata`), else None.
    """

    directory: Path
    table_file: str
    results: pd.DataFrame
    summary: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)
    folds: pd.DataFrame | None = None
    units: pd.DataFrame | None = None
    significance: pd.DataFrame | None = None
    strata_total: int | None = None

    @property
    def bootstrap(self) -> Bootstrap:
        """The run's interval settings (its record's configuration; defaults without one)."""
        return Bootstrap.of(self.config.get("config", {}))

    @property
    def protocols(self) -> list[str]:
        return unique_in_order(self.results["protocol"])

    @property
    def labelled_protocols(self) -> bool:
        """Whether protocols get their own headers (the input had a protocol column)."""
        return self.protocols != [""]

    @property
    def strata(self) -> list[str]:
        strata = unique_in_order(self.results["stratum"])
        return sorted(strata, key=lambda s: s != "all")  # stable: "all" first, then as found

    @property
    def algorithms(self) -> list[str]:
        return unique_in_order(self.results["algorithm"])

    @property
    def metrics(self) -> list[str]:
        return unique_in_order(self.results["metric"])

    def ks(self, metric: str) -> list[int]:
        part = self.results.loc[self.results["metric"] == metric, "k"].dropna()
        return sorted({int(k) for k in part})


def unique_in_order(values: pd.Series) -> list[str]:
    """The distinct values as strings, in order of first appearance."""
    return [str(v) for v in dict.fromkeys(values.tolist())]


def read_results(path: str | Path) -> pd.DataFrame:
    """Read a long results table (``results.csv`` / ``compare.csv``) with its proper types.

    Strings stay strings (a policy called "NA" is not missing); ``k`` is nullable (R-precision
    has none), ``value`` is empty for skipped folds.
    """
    frame = pd.read_csv(
        path, keep_default_na=False, na_values={"value": [""], "k": [""]},
        dtype={"algorithm": str, "stratum": str, "metric": str, "skip_reason": str,
               "protocol": str},
    )
    required = {"fold", "algorithm", "stratum", "metric", "k", "value", "skipped"}
    missing = required - set(frame.columns)
    if missing:
        raise SwevalError(f"{path}: not a results table (missing {', '.join(sorted(missing))}).")
    frame["k"] = pd.to_numeric(frame["k"]).astype("Int64")
    frame["value"] = pd.to_numeric(frame["value"]).astype(np.float64)
    if frame["skipped"].dtype != bool:
        frame["skipped"] = frame["skipped"].astype(str).str.lower().isin(["true", "1"])
    if "protocol" not in frame.columns:
        frame["protocol"] = ""
    return frame


def summarise_protocols(results: pd.DataFrame) -> pd.DataFrame:
    """:func:`~evaluators.run.results.summarise` per protocol (Δ% is to the best within a protocol)."""
    parts = []
    for protocol, part in results.groupby("protocol", sort=False):
        summary = summarise(part.drop(columns="protocol").reset_index(drop=True))
        summary.insert(0, "protocol", str(protocol))
        parts.append(summary)
    return pd.concat(parts, ignore_index=True)


def load(directory: str | Path, *, intervals: pd.DataFrame | None = None) -> ReportData:
    """Read an output directory.

    ``intervals``: the bootstrap intervals of this ``results.csv``'s means, when the run that
    wrote it has them (its summary: the same intervals, from the same written values), so that
    they are not computed a second time.

    Raises:
        SwevalError: no such directory, a ``sweval leakage`` output, files that are not one
            run's set (:func:`evaluators.run.output_dir.verify`), or it holds neither
            ``compare.csv`` nor ``results.csv``.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise SwevalError(f"{directory}: no such directory.")
    if (directory / "leakage.json").is_file():
        raise SwevalError(
            f"{directory}: a `sweval leakage` output, which has no report of its own: its figure "
            "is severity.png, its tables change.csv, ranking.csv and future_items.csv."
        )
    verify(directory)
    for name in ("compare.csv", "results.csv"):
        if (directory / name).is_file():
            break
    else:
        raise SwevalError(
            f"{directory}: no results.csv or compare.csv here; give the output directory of "
            "`sweval run` or `sweval compare`."
        )
    results = read_results(directory / name)
    if results.empty:
        raise SwevalError(f"{directory / name}: the table has no rows.")
    strata_total = None
    kept = largest_strata(results)
    if kept is not None:  # hundreds of strata: a report of the largest, not of every one
        strata_total = results.loc[results["stratum"] != "all", "stratum"].nunique()
        results = results[results["stratum"].isin(["all", *kept])].reset_index(drop=True)
    config: dict[str, Any] = {}
    record = directory / ("compare.json" if name == "compare.csv" else "config.json")
    if record.is_file():
        try:
            config = json.loads(record.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            _log.warning("%s unreadable (%s); the report omits the run facts", record, exc)
    folds = _read_optional(directory / "folds.csv")
    units = _read_optional(directory / "units.csv")
    summary = summarise_protocols(results)
    two_level = config.get("config", {}).get("summary_bootstrap") == "two-level"
    if intervals is None and two_level and name == "results.csv":
        intervals = _read_optional(directory / "summary.csv")
    if intervals is not None and name == "results.csv":
        summary = attach_intervals(summary, intervals)
    else:
        summary = with_intervals(summary, results, Bootstrap.of(config.get("config", {})))
    return ReportData(
        directory=directory, table_file=name, results=results,
        summary=summary, config=config, folds=folds, units=units, strata_total=strata_total,
        significance=read_significance(directory / "significance.csv"),
    )


def read_significance(path: Path) -> pd.DataFrame | None:
    """``significance.csv`` with its proper types (names stay text, empty numbers are NaN),
    or None when absent, unreadable or without the ``unit`` column (an older table)."""
    if not path.is_file():
        return None
    text = {"algorithm_a": str, "algorithm_b": str, "stratum": str, "metric": str,
            "test": str, "note": str, "unit": str, "correction": str, "protocol": str}
    try:
        frame = pd.read_csv(path, keep_default_na=False, dtype=text,
                            na_values={c: [""] for c in ("k", "statistic", "p_value", "p_holm",
                                                         "ci_low", "ci_high", "mean_diff")})
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError):
        return None
    if "unit" not in frame.columns:
        return None
    for column in frame.columns:
        if column not in text:
            frame[column] = pd.to_numeric(frame[column].replace("", np.nan))
    frame["k"] = frame["k"].astype("Int64")
    return frame


def _read_optional(path: Path) -> pd.DataFrame | None:
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=False, na_values={"t_start": [""]})
    except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError):
        return None
    return None if frame.empty else frame
