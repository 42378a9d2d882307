"""What the terminal and the report say of a significance table: the best's lead over the
runner-up (or over ``--baseline``), and what a design can show (its power statement)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweval.evaluators.run.results import is_best, ranking_score

#: The level at which a lead is called significant (as :data:`.significance.ALPHA`).
ALPHA = 0.05
#: How the tests are named in sentences.
TEST_NAMES = {"wilcoxon": "Wilcoxon", "t-test": "paired t", "permutation": "permutation"}


@dataclass(frozen=True)
class Lead:
    """The best algorithm's lead over the runner-up (or the baseline) at one (stratum, metric,
    k), on one unit (folds or users)."""

    best: str
    runner_up: str
    n_folds: int
    mean_diff: float
    ci_low: float
    ci_high: float
    p_holm: float
    note: str
    unit: str = "folds"
    n_units: int = 0
    p_adjusted: float = np.nan
    min_p_reachable: float = np.nan
    mde: float = np.nan

    @property
    def p(self) -> float:
        """The corrected p-value that decides (``p_adjusted``; Holm's in older tables)."""
        return self.p_adjusted if np.isfinite(self.p_adjusted) else self.p_holm

    @property
    def significant(self) -> bool:
        return bool(np.isfinite(self.p) and self.p < ALPHA)

    @property
    def cannot_tell(self) -> bool:
        """The design cannot reach α, whatever the data."""
        return bool(np.isfinite(self.min_p_reachable) and self.min_p_reachable >= ALPHA)


def table_unit(significance: pd.DataFrame, unit: str | None = None) -> str:
    """``unit`` when the table has its rows, else users when it has them, else folds."""
    units = set(significance["unit"]) if "unit" in significance.columns else {"folds"}
    if unit in units:
        return str(unit)
    return "users" if "users" in units else "folds"


def at(frame: pd.DataFrame, *, stratum: str, metric: str, k: int | None) -> pd.DataFrame:
    """The rows of one (stratum, metric, k)."""
    return frame[(frame["stratum"] == stratum) & (frame["metric"] == metric)
                 & _k_is(frame["k"], k)]


def best_lead(
    summary: pd.DataFrame, significance: pd.DataFrame, *, stratum: str, metric: str,
    k: int | None, test: str = "wilcoxon", unit: str | None = None, baseline: str | None = None,
) -> Lead | None:
    """The lead of the best over the runner-up, or over ``baseline`` (None with fewer than two
    means or no row for the pair), on ``unit`` (:func:`table_unit`).

    The best is the summary's (:func:`~evaluators.run.results.is_best`; of ties, the first in
    :func:`ranked_algorithms`' order), the runner-up the next of
    :func:`ranked_algorithms`. That can be a series scored on fewer folds and ahead of the best
    on them (Δ% > 0): then ``mean_diff`` is negative, the best behind on the folds both have.
    With a baseline that is itself the best, the lead is the baseline's over the next."""
    part = at(summary, stratum=stratum, metric=metric, k=k)
    part = part[part["mean"].notna()]
    if len(part) < 2:
        return None
    ranked = ranked_algorithms(part)
    summary_best = (set(part.loc[is_best(part), "algorithm"].astype(str))
                    if "delta" in part else set())
    best = next((a for a in ranked if a in summary_best), ranked[0])
    second = next(a for a in ranked if a != best)
    if baseline is not None and baseline != best and baseline in ranked:
        second = baseline
    rows = at(significance, stratum=stratum, metric=metric, k=k)
    rows = rows[rows["test"] == test]
    if "unit" in rows.columns:
        rows = rows[rows["unit"] == table_unit(significance, unit)]
    for a, b, sign in ((best, second, 1.0), (second, best, -1.0)):
        row = rows[(rows["algorithm_a"] == a) & (rows["algorithm_b"] == b)]
        if len(row):
            r = row.iloc[0]
            low, high = sorted((sign * r["ci_low"], sign * r["ci_high"]))
            return Lead(best=best, runner_up=second, n_folds=int(r["n_folds"]),
                        mean_diff=sign * float(r["mean_diff"]), ci_low=low, ci_high=high,
                        p_holm=float(r["p_holm"]), note=str(r["note"]),
                        unit=str(r.get("unit", "folds")),
                        n_units=int(r.get("n_units", r["n_folds"])),
                        p_adjusted=float(r.get("p_adjusted", np.nan)),
                        min_p_reachable=float(r.get("min_p_reachable", np.nan)),
                        mde=float(r.get("mde", np.nan)))
    return None


@dataclass(frozen=True)
class Power:
    """What one design (a unit's rows of one test at one (stratum, metric, k)) can show."""

    unit: str
    test: str
    n_pairs: int
    n_units: tuple[int, int]  # fewest, most paired units over the pairs
    floor: float  # the smallest p the test gives on the fewest units, before correction
    min_p_reachable: float  # after correction
    correction: str
    mde: tuple[float, float]  # smallest, largest minimum detectable effect (the t-test's)

    @property
    def cannot_tell(self) -> bool:
        return bool(self.min_p_reachable >= ALPHA)


def design_power(significance: pd.DataFrame, *, stratum: str, metric: str, k: int | None,
                 unit: str, test: str = "wilcoxon") -> Power | None:
    """The power of ``unit``'s design at one (stratum, metric, k) (None without its rows or
    without the power columns)."""
    if "min_p_reachable" not in significance.columns:
        return None
    rows = at(significance, stratum=stratum, metric=metric, k=k)
    rows = rows[rows["unit"] == unit]
    chosen = rows[rows["test"] == test]
    t_rows = rows[(rows["test"] == "t-test") & np.isfinite(rows["mde"].astype(float))]
    if chosen.empty:
        return None
    floors = chosen["min_p_reachable"].astype(float)
    raw = chosen["p_value"].notna()
    m = int(raw.sum()) or len(chosen)
    base = chosen.loc[floors.idxmin()]
    mdes = t_rows["mde"].astype(float)
    return Power(
        unit=unit, test=test, n_pairs=m,
        n_units=(int(chosen["n_units"].min()), int(chosen["n_units"].max())),
        floor=float(base["p_floor"]),
        min_p_reachable=float(floors.min()), correction=str(base["correction"]),
        mde=(float(mdes.min()), float(mdes.max())) if len(mdes) else (np.nan, np.nan),
    )


def ranked_algorithms(part: pd.DataFrame) -> list[str]:
    """The algorithms of one (stratum, metric, k) of a summary, best first by
    :func:`~evaluators.run.results.ranking_score` compared to 12 decimals (float noise is no
    lead); ties keep their order."""
    score = np.round(ranking_score(part).to_numpy(dtype=float), 12)
    order = part.assign(_score=score).sort_values("_score", ascending=False, kind="stable")
    return order["algorithm"].astype(str).tolist()


def _k_is(column: pd.Series, k: int | None) -> pd.Series:
    return column.isna() if k is None else (column == k).fillna(False).astype(bool)


def _span(low: float, high: float) -> str:
    if not np.isfinite(low):
        return "—"
    return f"{low:.3g}" if f"{low:.3g}" == f"{high:.3g}" else f"{low:.3g}–{high:.3g}"


def power_statement(power: Power, what: str) -> str:
    """One sentence on what ``power``'s design can show (``what``: the metric, e.g.
    ``Recall@10``): the smallest p its test can give, after the correction, whether that can
    reach α at all, and the minimum detectable lead."""
    from sweval.evaluators.stats.power import CORRECTION_NAMES

    n = (f"{power.n_units[0]}" if power.n_units[0] == power.n_units[1]
         else f"{power.n_units[0]}–{power.n_units[1]}")
    design = f"{power.unit} ({n} paired {power.unit}, {power.n_pairs} "
    design += "pair)" if power.n_pairs == 1 else "pairs)"
    corrected = ("" if power.correction == "none"
                 else f", {power.min_p_reachable:.3g} after {CORRECTION_NAMES[power.correction]}")
    detect = (f"Minimum detectable lead at 80% power (paired t-test, from the observed "
              f"variance): {_span(*power.mde)} {what}.")
    test = TEST_NAMES.get(power.test, power.test)
    if power.cannot_tell:
        return (f"{design}: this design cannot tell. The {test} test cannot go below "
                f"p = {power.floor:.3g}{corrected}, not below {ALPHA:g} whatever the data. "
                f"{detect}")
    return (f"{design}: the {test} test can go down to p = {power.floor:.3g}{corrected}. "
            f"{detect}")
