"""When to retrain: staleness and cadence tables, read from a run's plain and served units.

A run with ``--horizon J`` or ``--cadence c1,c2,...`` plans served units (a fold's model on a
later window, :mod:`evaluators.units.serving`) beside its plain units; nothing here fits a model.
Schedules: :mod:`evaluators.protocols.retraining`.

``staleness.csv``: one row per (algorithm, fit fold f, served window w, metric, k)::

    value   the model fitted on D_{t_f} measured on window w (age w − f windows, age_s seconds),
            on w's eligible users U_w, given each user's history before t_w (its items known
            at t_f only; algorithms/serving.py)
    fresh   the model fitted on D_{t_w} on the same window and users: the plain run's value

``staleness_summary.csv``: per (algorithm, metric, k, age): the mean over fit folds with its
bootstrap interval, the fresh models' mean on the same windows, ``loss`` = mean / fresh − 1 and
the paired difference (value − fresh) with its interval. The age at which a model has lost 10 %
and 50 % of the fresh value, ``windows_to_lose_10pct`` / ``_50pct`` (first age with
loss ≤ −x; empty when not within the horizon), is repeated on each of the series' rows.

``cadence.csv``: per (algorithm, cadence c, window w, metric, k): the value of the model of the
latest retrain r_c(w) on w (the staleness unit (r_c(w), w); cadence 1 is the plain run, value for
value), its age, whether w is a retrain, and on retrain windows the fit's seconds (from the
fitted unit's timings). Its ``policy`` is ``retrain``; with ``--update`` each cadence c > 1 has
a second series, ``update``: on the windows between two retrains the model of r_c(w) updated by
the interactions in [t_{r_c(w)}, t_w) (:meth:`~algorithms.base.Algorithm.update`), with the
update's seconds (``update_s``). ``cadence_summary.csv``: per (algorithm, policy, cadence,
metric, k): mean and interval over the windows, fits, fit and update seconds, ``fit_share`` =
(fit + update seconds) / cadence 1's fit seconds, and the paired difference to cadence 1 over
the same windows with its interval and the Wilcoxon and paired t-test p-values
(:func:`~evaluators.stats.significance.paired_tests`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sweval.evaluators.metrics.measures import fold_level
from sweval.evaluators.metrics.names import UNRANKED
from sweval.evaluators.protocols.retraining import retrain_folds, serving_fold
from sweval.evaluators.run.results import unit_rows
from sweval.evaluators.run.work import Measurer
from sweval.evaluators.stats.significance import Bootstrap, interval, paired_tests
from sweval.evaluators.units.engine import UnitResult
from sweval.evaluators.units.unit import Unit

if TYPE_CHECKING:
    from sweval.evaluators.run.plan import Plan

#: The losses whose age the summary gives (10 % and 50 % of the fresh model's value).
LOSSES = (0.1, 0.5)
STALENESS_COLUMNS = ["fit_fold", "fold", "t_start", "t_end", "age", "age_s", "algorithm",
                     "metric", "k", "value", "fresh", "n_users", "config_hash"]
CADENCE_COLUMNS = ["cadence", "policy", "fold", "t_start", "algorithm", "metric", "k", "value",
                   "fit_fold", "age", "retrained", "fit_s", "update_s", "n_users"]
#: The policies of cadence.csv: refit every c windows and serve the fit in between, or update
#: it in between (``--update``).
POLICIES = ("retrain", "update")
FILES = ("staleness.csv", "staleness_summary.csv", "cadence.csv", "cadence_summary.csv")


@dataclass(frozen=True)
class RetrainingTables:
    """A run's staleness and cadence tables (see the module docstring); None where the run
    did not ask for them."""

    staleness: pd.DataFrame | None = None
    staleness_summary: pd.DataFrame | None = None
    cadence: pd.DataFrame | None = None
    cadence_summary: pd.DataFrame | None = None

    def files(self) -> dict[str, str]:
        """The tables as CSV text, by file name."""
        tables = dict(zip(FILES, (self.staleness, self.staleness_summary, self.cadence,
                                  self.cadence_summary), strict=True))
        return {name: table.to_csv(index=False, float_format="%.10g")
                for name, table in tables.items() if table is not None}


def retraining_tables(plan: Plan, result_of: Callable[[Unit], UnitResult | None],
                      measurer: Measurer) -> RetrainingTables | None:
    """The staleness and cadence tables of a run with ``--horizon`` or ``--cadence``; None
    without them, or when no unit has a result (every fold skipped or failed)."""
    config = plan.config
    if not (config.horizon or config.cadence):
        return None
    settings = Bootstrap.of(config)
    pairs = _pair_rows(plan, result_of, measurer)
    if pairs is None:
        return None
    served = pairs[~pairs["updated"]]
    horizon = served[served["age"] <= config.horizon] if config.horizon else None
    staleness = summary = cadence = cadence_summary = None
    if horizon is not None:
        staleness = horizon[STALENESS_COLUMNS].reset_index(drop=True)
        summary = staleness_summary(staleness, settings)
    if config.cadence:
        cadence = cadence_series(plan, pairs, config.cadence, update=config.update)
        cadence_summary = summarise_cadences(cadence, settings)
    return RetrainingTables(staleness, summary, cadence, cadence_summary)


def _pair_rows(plan: Plan, result_of: Callable[[Unit], UnitResult | None],
               measurer: Measurer) -> pd.DataFrame | None:
    """The rows of every (fit fold, served window) the run has, age 0 (the plain units)
    included, with the fresh value beside each and the fit's seconds; None when it has none."""
    config = plan.config
    plain = [unit for unit in plan.units if unit.split is plan.splits[unit.split.index]]
    rows: list[dict[str, Any]] = []
    for unit in [*plain, *plan.served]:
        result = result_of(unit)
        if result is None:  # a failed unit
            continue
        fitted = unit.fitted or unit
        fold, fit = plan.folds[unit.split.index], plan.folds[fitted.split.index]
        facts = measurer.facts_of(unit.split)
        for row in unit_rows(fold, result, config_hash=plan.key,
                             fold_level=fold_level(result, facts, config.k, config.metrics)):
            rows.append(row | {"fit_fold": fit.index, "age": fold.index - fit.index,
                               "age_s": fold.t_start - fit.t_start,
                               "fit_s": float(result.timings.get("fit", np.nan)),
                               "updated": unit.updated,
                               "update_s": float(result.timings.get("update", 0.0))})
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    frame["k"] = frame["k"].astype("Int64")
    fresh = frame[frame["age"] == 0].set_index(["fold", "algorithm", "metric", "k"])["value"]
    index = pd.MultiIndex.from_frame(frame[["fold", "algorithm", "metric", "k"]])
    frame["fresh"] = fresh.reindex(index).to_numpy()
    order = {spec.label: i for i, spec in enumerate(plan.specs)}
    frame["_order"] = frame["algorithm"].map(order)
    return frame.sort_values(["_order", "fit_fold", "fold", "metric", "k"],
                             kind="stable").drop(columns="_order").reset_index(drop=True)


def staleness_summary(staleness: pd.DataFrame, settings: Bootstrap) -> pd.DataFrame:
    """Per (algorithm, metric, k, age): the model's value against its age (module docstring)."""
    rows = []
    for (algorithm, metric, k, age), part in staleness.groupby(
            ["algorithm", "metric", "k", "age"], sort=False, dropna=False):
        value, fresh = part["value"].to_numpy(float), part["fresh"].to_numpy(float)
        low, high = interval(value, settings)
        difference = np.round(value - fresh, 12)
        diff_low, diff_high = interval(difference, settings)
        rows.append({
            "algorithm": algorithm, "metric": metric, "k": k, "age": int(age),
            "age_s": int(part["age_s"].iloc[0]), "n_fits": len(part),
            "mean": value.mean(), "ci_low": low, "ci_high": high, "fresh_mean": fresh.mean(),
            "loss": _loss(value, fresh), "mean_diff": difference.mean(),
            "diff_ci_low": diff_low, "diff_ci_high": diff_high,
        })
    summary = pd.DataFrame(rows)
    for share in LOSSES:
        summary[f"windows_to_lose_{round(share * 100)}pct"] = summary.apply(
            lambda row, share=share: _age_of_loss(summary, row, share), axis=1).astype("Int64")
    return summary


def _loss(value: np.ndarray, fresh: np.ndarray) -> float:
    """Σ value / Σ fresh − 1 (NaN when the fresh models score 0)."""
    total = float(fresh.sum())
    return float(value.sum()) / total - 1.0 if total > 0 else np.nan


def _age_of_loss(summary: pd.DataFrame, row: pd.Series, share: float) -> float:
    """The first age ≥ 1 of ``row``'s series with loss ≤ −share (NaN: none, or a metric where
    more is not better)."""
    if row["metric"] in UNRANKED:
        return np.nan
    series = summary[(summary["algorithm"] == row["algorithm"])
                     & (summary["metric"] == row["metric"])
                     & (summary["k"].isna() if pd.isna(row["k"]) else summary["k"] == row["k"])
                     & (summary["age"] >= 1)].sort_values("age")
    lost = series[series["loss"] <= -share]
    return float(lost["age"].iloc[0]) if len(lost) else np.nan


def cadence_series(plan: Plan, pairs: pd.DataFrame, cadences: list[int], *,
                   update: bool = False) -> pd.DataFrame:
    """Per cadence (and policy), the series of the model of each window's latest retrain,
    served as fitted or, with ``update``, updated to the window (module docstring)."""
    evaluated = [split.index for split in plan.splits if not split.skipped]
    keyed = {flag: part.set_index(["fit_fold", "fold"]).sort_index()
             for flag, part in pairs.groupby("updated")}
    parts = []
    policies = POLICIES if update else POLICIES[:1]
    for policy, cadence in [(p, c) for p in policies for c in cadences]:
        if policy == "update" and cadence == 1:  # nothing between two retrains
            continue
        served = serving_fold(evaluated, cadence)
        retrains = set(retrain_folds(evaluated, cadence))
        for window, fit in served.items():
            source = keyed.get(policy == "update" and fit != window)
            if source is None or (fit, window) not in source.index:
                continue
            part = source.loc[[(fit, window)]].reset_index()
            part["cadence"], part["policy"] = cadence, policy
            part["retrained"] = window in retrains and fit == window
            part.loc[~part["retrained"], "fit_s"] = 0.0
            parts.append(part)
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CADENCE_COLUMNS)
    order = {spec.label: i for i, spec in enumerate(plan.specs)}
    frame["_order"] = frame["algorithm"].map(order)
    frame["_policy"] = frame["policy"].map(POLICIES.index)
    frame = frame.sort_values(["_order", "_policy", "cadence", "fold", "metric", "k"],
                              kind="stable")
    return frame[CADENCE_COLUMNS].reset_index(drop=True)


def summarise_cadences(cadence: pd.DataFrame, settings: Bootstrap) -> pd.DataFrame:
    """Per (algorithm, cadence, metric, k): value, cost and the paired comparison with cadence 1
    (module docstring)."""
    rows = []
    keys = ["algorithm", "metric", "k"]
    for (algorithm, metric, k), series in cadence.groupby(keys, sort=False, dropna=False):
        base = series[(series["cadence"] == 1)
                      & (series["policy"] == "retrain")].set_index("fold")
        base_fit_s = float(base["fit_s"].sum()) if len(base) else np.nan
        for (policy, cadence_value), part in series.groupby(["policy", "cadence"], sort=False):
            value = part["value"].to_numpy(float)
            low, high = interval(value, settings)
            cost = float(part["fit_s"].sum()) + float(part["update_s"].sum())
            row = {"algorithm": algorithm, "cadence": int(cadence_value), "policy": policy,
                   "metric": metric, "k": k, "n_windows": len(part), "mean": value.mean(),
                   "ci_low": low, "ci_high": high, "fits": int(part["retrained"].sum()),
                   "fit_s": float(part["fit_s"].sum()),
                   "update_s": float(part["update_s"].sum()),
                   "fit_share": cost / base_fit_s
                   if base_fit_s and base_fit_s > 0 else np.nan}
            row |= _against_cadence_1(part.set_index("fold"), base, settings)
            rows.append(row)
    return pd.DataFrame(rows)


def _against_cadence_1(part: pd.DataFrame, base: pd.DataFrame,
                       settings: Bootstrap) -> dict[str, float]:
    """The paired difference of a cadence's series to cadence 1's over the windows both have:
    mean, interval, relative loss, Wilcoxon's and the paired t-test's p-values."""
    empty = {"loss": np.nan, "mean_diff": np.nan, "diff_ci_low": np.nan,
             "diff_ci_high": np.nan, "p_wilcoxon": np.nan, "p_ttest": np.nan}
    if base.empty:
        return empty
    common = part.index.intersection(base.index)
    x = part.loc[common, "value"].to_numpy(float)
    y = base.loc[common, "value"].to_numpy(float)
    tests = {row["test"]: row for row in paired_tests(x, y, settings)}
    any_row = next(iter(tests.values()))
    return {"loss": _loss(x, y), "mean_diff": any_row["mean_diff"],
            "diff_ci_low": any_row["ci_low"], "diff_ci_high": any_row["ci_high"],
            "p_wilcoxon": tests["wilcoxon"]["p_value"], "p_ttest": tests["t-test"]["p_value"]}
