"""What the report says about a run besides its metrics: the run facts, the folds and compute time.

Plain text and tables of strings, read from a :class:`~evaluators.report.data.ReportData`; the
HTML is in ``templates/report.html.j2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from sweval.evaluators.metrics.reachable import ceiling_words
from sweval.evaluators.report.data import ReportData
from sweval.evaluators.wording import plural


@dataclass(frozen=True)
class PlainTable:
    """A table of text: header cells and rows of cells."""

    columns: list[str]
    rows: list[list[str]]

    @classmethod
    def of(cls, frame: pd.DataFrame) -> PlainTable:
        """Every column name and value of ``frame`` as ``str()`` writes it."""
        return cls(columns=[str(c) for c in frame.columns],
                   rows=[[str(v) for v in row] for row in frame.itertuples(index=False)])


@dataclass(frozen=True)
class FoldsSummary:
    """The folds of a run: how many were used and skipped, why, and ``folds.csv`` itself.

    Attributes:
        n_folds, n_used, n_skipped: fold counts (for all users).
        skip_reasons: (reason, number of folds), most frequent first.
        strata: whether the run has strata (a stratum also skips folds of its own).
        table: ``folds.csv`` with its times as UTC dates.
        ceiling: the used folds' ``unreachable_share`` in words (None without the column).
    """

    n_folds: int
    n_used: int
    n_skipped: int
    skip_reasons: list[tuple[str, int]]
    strata: bool
    table: PlainTable
    ceiling: str | None = None


def format_date(t: Any) -> str:
    """Unix seconds as "YYYY-MM-DD HH:MM" (UTC), "—" when not a time."""
    try:
        return datetime.fromtimestamp(int(t), tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError, OSError):
        return "—"


def run_facts(data: ReportData, origin: str | None) -> list[tuple[str, str]]:
    """The run facts as (term, description): data, time span, protocol, strata, protocols,
    folds, each algorithm's parameters and device, run key, and where the results came from."""
    config = data.config.get("config", {})
    facts: list[tuple[str, str]] = []
    d = data.config.get("data", {})
    if d:
        counts = ", ".join(f"{d[key]:,} {noun}" for key, noun in (
            ("n_interactions", "interactions"), ("n_users", "users"), ("n_items", "items"))
            if isinstance(d.get(key), int))
        facts.append(("data", f"{d.get('source', '?')}" + (f": {counts}" if counts else "")))
        if "t_min" in d:
            span = f"{format_date(d['t_min'])} → {format_date(d.get('t_max'))} UTC"
            facts.append(("time span", span))
    if config:
        protocol = (f"window {config.get('window')}, {plural(config.get('folds'), 'fold')}, "
                    f"u_min = {config.get('u_min')}, k = {config.get('k')}, "
                    f"relevance {config.get('relevance')}, dedup {config.get('dedup')}")
        if config.get("train_window"):
            protocol += f", training window {config['train_window']}"
        facts.append(("protocol", protocol))
        if config.get("stratify_by") == "user-history":
            facts.append(("strata", "by user-history (training transactions before the "
                          f"window; bins from {config.get('user_bins')})"))
        elif config.get("stratify_by") == "returning":
            facts.append(("strata", "returning vs first-time users"))
        elif config.get("stratify_by"):
            shown = "" if data.strata_total is None else (
                f"; {data.strata_total} strata: this report shows the "
                f"{sum(s != 'all' for s in data.strata)} with the most eligible users, every "
                "stratum is in "
                "results.csv and summary.csv")
            facts.append(("strata", f"by {config['stratify_by']} "
                          f"(mode {config.get('stratify_mode')}){shown}"))
        if config.get("cold_users"):
            facts.append(("cold users", "evaluated as stratum first-time; fallback "
                          f"{config.get('fallback')} for the models that cannot score them"))
    if data.config.get("protocols"):
        protocols = ", ".join(map(str, data.config["protocols"]))
        if "loocv_repeats" in data.config:
            protocols += f" (LOOCV: {data.config['loocv_repeats']} repetitions)"
        facts.append(("protocols", protocols))
    if "folds_used" in data.config:
        facts.append(("folds", f"{data.config['folds_used']} used, "
                      f"{data.config.get('folds_skipped', 0)} skipped"))
    params = data.config.get("resolved_params")
    devices = data.config.get("devices", {})
    tuned = data.config.get("tuning_candidates") or {}
    entries = {_label(entry): entry for entry in config.get("algorithms") or []}
    for algorithm in data.algorithms if params is not None else []:
        if algorithm not in params and algorithm in tuned:
            facts.append((algorithm, f"tuned: per fold, the best of {len(tuned[algorithm])} "
                          "candidates on the windows before it (tuning.csv)"))
            continue
        values = ", ".join(f"{p}={v}" for p, v in params.get(algorithm, {}).items())
        bits = [values or "defaults"]
        if entries.get(algorithm, algorithm) != algorithm:  # an alias: what it names
            bits.insert(0, entries[algorithm])
        if isinstance(devices.get(algorithm), str):
            bits.append(f"device {devices[algorithm]}")
        facts.append((algorithm, "; ".join(bits)))
    if data.config.get("run_key"):
        facts.append(("run key", str(data.config["run_key"])))
    facts.append(("source", origin or str(data.directory / data.table_file)))
    return facts


def _label(entry: object) -> str:
    """An ``--algorithms`` entry's label (its alias, or the entry); an entry this version
    cannot read is its own label."""
    from sweval.data.errors import SwevalError
    from sweval.evaluators.config.text import entry_label

    try:
        return entry_label(str(entry))
    except SwevalError:
        return str(entry)


def folds_summary(data: ReportData) -> FoldsSummary | None:
    """The folds of ``folds.csv`` (None when the directory has none)."""
    folds = data.folds
    if folds is None or "skipped" not in folds:
        return None
    skipped = folds["skipped"].astype(str).str.lower() == "true"
    shown = folds.copy()
    for column in ("t_start", "t_end"):
        if column in shown:
            shown[column] = shown[column].map(format_date)
    reasons = folds.loc[skipped, "skip_reason"].astype(str).value_counts()
    return FoldsSummary(
        n_folds=len(folds), n_used=int((~skipped).sum()), n_skipped=int(skipped.sum()),
        skip_reasons=[(str(r), int(n)) for r, n in reasons.items()],
        strata=len(data.strata) > 1, table=PlainTable.of(shown),
        ceiling=ceiling_words(folds[~skipped]),
    )


def failed_units(data: ReportData) -> PlainTable | None:
    """The units whose algorithm raised, from the run record's ``failed_units``: fold, stratum,
    algorithm and error of each (None when none failed)."""
    failures = data.config.get("failed_units")
    if not failures:
        return None
    return PlainTable(
        columns=["fold", "stratum", "algorithm", "error"],
        rows=[[str(f.get("fold")), str(f.get("stratum", "all")), str(f.get("label")),
               str(f.get("error"))] for f in failures],
    )


def compute_times(data: ReportData) -> PlainTable | None:
    """Seconds per algorithm and stage, summed over folds, with a total (None without
    ``units.csv`` or timings in it)."""
    units = data.units
    if units is None or "algorithm" not in units:
        return None
    stages = [c for c in units.columns if c.endswith("_s")]
    if not stages:
        return None
    total = units.groupby("algorithm", sort=False)[stages].sum()
    total["total_s"] = total.sum(axis=1)
    return PlainTable.of(total.reset_index().round(2))


def tuning_summary(data: ReportData) -> PlainTable | None:
    """``optimism.csv`` of a tuned run (tuned mean, oracle, optimism per k), or None."""
    path = data.directory / "optimism.csv"
    if not path.exists():
        return None
    frame = pd.read_csv(path)
    shown = pd.DataFrame({
        "tuned algorithm": frame["algorithm"],
        "Recall@k": frame["k"],
        "tuned mean": frame["tuned_mean"].map("{:.4f}".format),
        "test folds": frame["n_folds"],
        "oracle (best on the test folds)": frame["oracle"],
        "oracle mean": frame["oracle_mean"].map("{:.4f}".format),
        "optimism": frame["optimism"].map(lambda v: "—" if pd.isna(v) else f"{100 * v:+z.1f}%"),
    })
    return PlainTable.of(shown)
