"""Is the difference real? The tables: ``significance.csv`` (algorithms paired over folds, and
over users), ``significance_strata.csv`` and ``significance_protocols.csv``.

**Folds** (``unit`` = folds): each fold is one more window of the timeline, scored by every
algorithm. For algorithms a and b at one (stratum, metric, k), over the folds F_ab where both
have a value (the values as ``results.csv`` writes them, 10 significant digits, so every number
is reproducible from the file), x and y are the two series' fold values: the paired tests,
differences, effect sizes and intervals of :mod:`evaluators.stats.paired` on them.

**Users** (``unit`` = users, ``--test-unit users``): the same on each user's mean over the folds
of F_ab where it is eligible, a user in several folds being one cluster
(:mod:`evaluators.stats.users`). With ``--test-unit users`` the file has both units' rows.

Pairs: every pair of algorithms (a before b in the run's order), or with ``--baseline B`` each
other algorithm a against B (m − 1 pairs). Families, corrections, ``min_p_reachable`` and ``mde``
(:mod:`evaluators.stats.power`): per (stratum, metric, k, unit, test); ``p_holm`` is Holm's,
``p_adjusted`` the ``--correction``'s. A row whose test cannot reach α whatever the data
(``min_p_reachable`` ≥ α) says so in ``note``: that design cannot tell.

Between strata s and s' (the logging-policy effect), the paired unit is the fold and the
difference is a difference of leads: x_f = value(a, s, f) − value(b, s, f), y_f the same in s'.

Between protocols of ``sweval compare`` (``significance_protocols.csv``): unpaired,
:mod:`evaluators.stats.between_protocols`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from sweval.evaluators.stats.between_protocols import (
    NO_POWER_UNPAIRED,
    PROTOCOL_COLUMNS,
    UNPAIRED_TESTS,
    compare_protocols,
    unpaired_tests,
)
from sweval.evaluators.stats.leads import ALPHA, Lead, best_lead, ranked_algorithms
from sweval.evaluators.stats.long_table import blocks, groups, ordered, rows_of, used_values
from sweval.evaluators.stats.paired import (
    CONSTANT_DIFFERENCE,
    DIFFERENCE_DECIMALS,
    MIN_UNITS,
    TESTS,
    Pair,
    no_power_note,
    paired_rows,
    wilcoxon_method,
)
from sweval.evaluators.stats.power import (
    CORRECTION_NAMES,
    Correction,
    adjust,
    detection_level,
    holm,
    mde,
    reachable,
)
from sweval.evaluators.stats.resampling import (
    Bootstrap,
    interval,
    mean_intervals,
    unpaired_interval,
)
from sweval.evaluators.stats.users import UserValues, user_pairs

__all__ = [
    "ALPHA", "CONSTANT_DIFFERENCE", "DIFFERENCE_DECIMALS", "MIN_FOLDS", "NO_POWER",
    "NO_POWER_UNPAIRED", "NO_POWER_USERS", "PROTOCOL_COLUMNS", "SIGNIFICANCE_COLUMNS",
    "STRATA_COLUMNS", "TESTS", "UNPAIRED_TESTS", "Bootstrap", "unpaired_tests",
    "Comparisons", "Lead", "best_lead", "compare_algorithms", "compare_protocols",
    "compare_strata", "holm", "interval", "paired_tests", "ranked_algorithms",
    "unpaired_interval", "wilcoxon_method", "with_intervals",
]

#: Fewer paired folds than this: the tests are not run.
MIN_FOLDS = MIN_UNITS
NO_POWER = no_power_note("folds")
NO_POWER_USERS = no_power_note("users")
#: The columns every paired table adds after its own (``significance.csv``'s first 14 and
#: ``significance_strata.csv``'s first 15 are as before).
POWER_COLUMNS = [
    "unit", "n_units", "rel_diff", "rel_ci_low", "rel_ci_high", "effect", "effect_ci_low",
    "effect_ci_high", "rank_biserial", "sd_diff", "correction", "p_adjusted", "p_floor",
    "min_p_reachable", "mde",
]
#: Columns of ``significance.csv``.
SIGNIFICANCE_COLUMNS = [
    "stratum", "metric", "k", "algorithm_a", "algorithm_b", "n_folds", "mean_diff", "ci_low",
    "ci_high", "test", "statistic", "p_value", "p_holm", "note", *POWER_COLUMNS,
]
#: Columns of ``significance_strata.csv`` (the same comparison between two strata).
STRATA_COLUMNS = [
    "metric", "k", "algorithm_a", "algorithm_b", "stratum_a", "stratum_b", "n_folds",
    "mean_diff", "ci_low", "ci_high", "test", "statistic", "p_value", "p_holm", "note",
    *POWER_COLUMNS,
]
_KEYS = ["stratum", "metric", "k"]


@dataclass(frozen=True)
class Comparisons:
    """Which pairs, on which unit, corrected how (``--test-unit``, ``--baseline``,
    ``--correction``)."""

    unit: str = "users"
    baseline: str | None = None
    correction: Correction = "holm"

    @classmethod
    def of(cls, config: Any) -> Comparisons:
        """The settings of an EvalConfig or of its dump; a missing field takes its default
        (a run recorded before the field existed tested folds)."""
        get = config.get if isinstance(config, Mapping) else (
            lambda name, default: getattr(config, name, default))
        return cls(unit=get("test_unit", "folds"), baseline=get("baseline", None),
                   correction=get("correction", "holm"))

    def pairs(self, names: Sequence[str]) -> list[tuple[str, str]]:
        """Every pair of ``names`` in order, or each name against the baseline."""
        if self.baseline is None:
            return list(combinations(names, 2))
        if self.baseline not in names:
            return []
        return [(name, self.baseline) for name in names if name != self.baseline]


def paired_tests(x: ArrayLike, y: ArrayLike, settings: Bootstrap) -> list[dict[str, Any]]:
    """The paired tests of x against y (same folds, same order), one row per test (no
    correction: ``floor`` is the test's smallest p)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return paired_rows([Pair({}, a, b, len(a))], settings)


def cannot_tell(min_p: float, correction: Correction, m: int) -> str:
    """The note of a row whose test cannot reach α."""
    how = "" if correction == "none" else f" after {CORRECTION_NAMES[correction]} over {m} pairs"
    return (f"this design cannot tell: the smallest p it can give{how} is {min_p:.3g} ≥ "
            f"{ALPHA:g}")


def finish(rows: list[dict[str, Any]], columns: list[str], family: list[str],
           correction: Correction) -> pd.DataFrame:
    """The paired rows as a table of ``columns``: per family (its keys + unit + test) the
    corrected p-values, ``min_p_reachable``, ``mde`` and the cannot-tell note."""
    frame = pd.DataFrame(rows, columns=[c for c in columns if c not in (
        "p_holm", "correction", "p_adjusted", "min_p_reachable", "mde")])
    p = frame["p_value"].to_numpy(dtype=float)
    floor = frame["p_floor"].to_numpy(dtype=float)
    sd = frame["sd_diff"].to_numpy(dtype=float)
    n_units = frame["n_units"].to_numpy(dtype=np.int64)
    notes = frame["note"].to_numpy(dtype=object)
    out = {name: np.full(len(frame), np.nan) for name in ("p_holm", "p_adjusted",
                                                           "min_p_reachable", "mde")}
    codes = frame.groupby([*family, "unit", "test"], dropna=False, sort=False).ngroup()
    for members in _members(codes.to_numpy()):
        m = int(np.sum(~np.isnan(p[members]))) or len(members)
        reach = reachable(floor[members], m, correction)
        level = detection_level(ALPHA, m, correction)
        detectable = np.array([float(mde(s, int(n), level))
                               for s, n in zip(sd[members], n_units[members], strict=True)])
        out["p_holm"][members] = holm(p[members])
        out["p_adjusted"][members] = adjust(p[members], correction)
        out["min_p_reachable"][members] = reach
        out["mde"][members] = np.where(reach >= ALPHA, np.inf, detectable)
        for i, value in zip(members, reach, strict=True):
            if value >= ALPHA and not np.isnan(p[i]) and notes[i] == "":
                notes[i] = cannot_tell(value, correction, m)
    frame = frame.assign(note=notes, correction=correction, **out)
    frame["k"] = frame["k"].astype("Int64")
    return frame[columns]


def _members(codes: Any) -> list[Any]:
    """The row positions of each group code, groups in order of first appearance."""
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    groups = np.split(order, bounds) if len(order) else []
    return sorted(groups, key=lambda members: members[0])


def with_intervals(
    summary: pd.DataFrame, results: pd.DataFrame, settings: Bootstrap
) -> pd.DataFrame:
    """``summary`` with ``ci_low`` and ``ci_high`` of each mean, from ``results``' values over the
    folds it averages (keys: algorithm, stratum, metric, k, and protocol when both have one)."""
    keys = [c for c in ("protocol", "algorithm", "stratum", "metric", "k")
            if c in summary.columns and c in results.columns]
    parts = list(groups(used_values(results), keys))
    low, high = mean_intervals([part["value"].to_numpy() for _, part in parts], settings)
    rows = [dict(zip(keys, key, strict=True)) | {"ci_low": lo, "ci_high": hi}
            for (key, _), lo, hi in zip(parts, low, high, strict=True)]
    return attach_intervals(summary, pd.DataFrame(rows, columns=[*keys, "ci_low", "ci_high"]))


def attach_intervals(summary: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with the ``ci_low`` and ``ci_high`` of ``intervals`` (another summary of the
    same results, or :func:`with_intervals`' own table), matched on the keys both have."""
    keys = [c for c in ("protocol", "algorithm", "stratum", "metric", "k")
            if c in summary.columns and c in intervals.columns]
    intervals = intervals[[*keys, "ci_low", "ci_high"]].copy()
    intervals["k"] = intervals["k"].astype("Int64")
    summary = summary.drop(columns=[c for c in ("ci_low", "ci_high") if c in summary.columns])
    return summary.assign(k=summary["k"].astype("Int64")).merge(intervals, on=keys, how="left")


def override_intervals(summary: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with the intervals of ``intervals`` (algorithm, stratum, metric, k, ci_low,
    ci_high: the two-level bootstrap's) where it has a row; the others keep theirs."""
    keys = ["algorithm", "stratum", "metric", "k"]
    other = intervals.rename(columns={"ci_low": "_low", "ci_high": "_high"})
    other["k"] = other["k"].astype("Int64")
    merged = summary.assign(k=summary["k"].astype("Int64")).merge(other, on=keys, how="left")
    found = merged.set_index(summary.index)[["_low", "_high"]].notna().all(axis=1)
    out = summary.copy()
    out.loc[found, "ci_low"] = merged.loc[found.to_numpy(), "_low"].to_numpy()
    out.loc[found, "ci_high"] = merged.loc[found.to_numpy(), "_high"].to_numpy()
    return out


def fold_pairs(results: pd.DataFrame, order: Sequence[str] | None,
               comparisons: Comparisons) -> list[Pair]:
    """The folds-level :class:`Pair` of every (stratum, metric, k) and pair of algorithms."""
    pairs = []
    used = used_values(results)
    for key, wide in blocks(used, _KEYS, ["algorithm"]):
        present = used.loc[rows_of(used, _KEYS, key), "algorithm"]
        names = ordered(list(dict.fromkeys(present)), order)
        values = {name: wide[name].to_numpy() for name in names}
        for first, second in comparisons.pairs(names):
            x, y = values[first], values[second]
            both = ~np.isnan(x) & ~np.isnan(y)
            pairs.append(Pair(dict(zip(_KEYS, key, strict=True))
                              | {"algorithm_a": first, "algorithm_b": second},
                              x[both], y[both], int(both.sum())))
    return pairs


def compare_algorithms(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None, *,
    comparisons: Comparisons = Comparisons(unit="folds"), users: UserValues | None = None,
) -> pd.DataFrame:
    """``significance.csv``: the pairs of ``comparisons`` at every (stratum, metric, k), paired
    over the folds both scored; with ``users`` (and ``comparisons.unit`` = users) also over the
    users (module docstring). ``order``: the algorithms' order (a before b); default: as they
    appear in ``results``."""
    rows = paired_rows(fold_pairs(results, order, comparisons), settings, unit="folds")
    if users and comparisons.unit == "users":
        rows += paired_rows(user_pairs(users, comparisons.pairs, order), settings, unit="users")
    return finish(rows, SIGNIFICANCE_COLUMNS, _KEYS, comparisons.correction)


def compare_strata(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None, *,
    correction: Correction = "holm",
) -> pd.DataFrame:
    """``significance_strata.csv``: is a's lead over b different in stratum s than in s'?
    Every pair of algorithms and every pair of strata other than ``all``, paired over the folds
    where all four values exist; corrected within each (metric, k, test)."""
    used = used_values(results)
    used = used[used["stratum"] != "all"]
    pairs: list[Pair] = []
    for (metric, k), part in groups(used, ["metric", "k"]):
        wide = part.pivot_table(index="fold", columns=["stratum", "algorithm"], values="value",
                                aggfunc="first")
        names = ordered(list(dict.fromkeys(part["algorithm"])), order)
        strata = list(dict.fromkeys(part["stratum"]))
        for first, second in combinations(names, 2):
            for s_a, s_b in combinations(strata, 2):
                columns = [(s_a, first), (s_a, second), (s_b, first), (s_b, second)]
                if not all(c in wide.columns for c in columns):
                    continue
                four = wide[columns].dropna()
                lead_a = four[(s_a, first)] - four[(s_a, second)]
                lead_b = four[(s_b, first)] - four[(s_b, second)]
                pairs.append(Pair({"metric": metric, "k": k, "algorithm_a": first,
                                   "algorithm_b": second, "stratum_a": s_a, "stratum_b": s_b},
                                  lead_a.to_numpy(), lead_b.to_numpy(), len(four)))
    return finish(paired_rows(pairs, settings, unit="folds"), STRATA_COLUMNS,
                  ["metric", "k"], correction)


def compare_algorithms_per_protocol(
    results: pd.DataFrame, settings: Bootstrap, order: Sequence[str] | None = None, *,
    comparisons: Comparisons = Comparisons(unit="folds"),
    users: Mapping[str, UserValues] | None = None,
    known: Mapping[str, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """:func:`compare_algorithms` within each protocol of a ``protocol`` column (first);
    ``users``: per protocol, its per-user values (users-level rows); ``known``: protocols
    whose table is already computed (the same rows, the same settings)."""
    parts = []
    for protocol, part in results.groupby("protocol", sort=False):
        table = (known or {}).get(str(protocol))
        if table is None:
            table = compare_algorithms(part.drop(columns="protocol"), settings, order,
                                       comparisons=comparisons,
                                       users=(users or {}).get(str(protocol)))
        table = table.copy()
        table.insert(0, "protocol", protocol)
        parts.append(table)
    if not parts:
        return pd.DataFrame(columns=["protocol", *SIGNIFICANCE_COLUMNS])
    return pd.concat(parts, ignore_index=True)
