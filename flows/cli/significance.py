"""What the summary says of ``significance.csv``: the best's lead cell, what each design can
show (the power statements), why some pairs have no fold-level test, the policy effect's count
(printed by :func:`flows.cli.summary.print_summary` and ``sweval compare``)."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.markup import escape

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.metrics.names import LABELS, shown_k
from sweval.evaluators.run.outputs import Outputs
from sweval.evaluators.run.sources import policy_column
from sweval.evaluators.stats.leads import design_power, power_statement, table_unit
from sweval.evaluators.stats.power import CORRECTION_NAMES
from sweval.evaluators.stats.significance import ALPHA, MIN_FOLDS, NO_POWER, best_lead
from sweval.evaluators.wording import NO_INTERVAL


def shown_metric(summary: pd.DataFrame) -> str:
    """The metric of the terminal tables: Recall, else the first metric with a k."""
    metrics = list(summary.loc[summary["k"].notna(), "metric"].unique())
    return "recall" if "recall" in metrics or not metrics else str(metrics[0])


def lead_cell(
    summary: pd.DataFrame, significance: pd.DataFrame, *, stratum: str, metric: str, k: int,
    unit: str | None = None, baseline: str | None = None,
) -> str:
    """``p=0.002 ✓`` (significant), ``p=0.41 n.s.``, ``cannot tell`` (the design cannot reach
    α: see the power statement below the table), ``no power`` (too few units), ``behind`` (the
    runner-up, scored on fewer folds, or the baseline is ahead of the best on them; over users,
    each weighing the same, the order of the fold means can turn) or ``—``."""
    lead = best_lead(summary, significance, stratum=stratum, metric=metric, k=k, unit=unit,
                     baseline=baseline)
    if lead is None or pd.isna(lead.mean_diff):
        return "—"
    if lead.mean_diff < 0:  # over users, each user weighs the same: the order can differ
        over = " (users)" if lead.unit == "users" else ""
        return f"[yellow]behind {escape(lead.runner_up)}{over}[/]"
    if lead.note.startswith(f"fewer than {MIN_FOLDS} paired"):
        return "[yellow]no power[/]"
    if lead.significant:
        return f"[bold green]p={lead.p:.2g} ✓[/]"
    if lead.cannot_tell:
        return f"[yellow]cannot tell (p ≥ {lead.min_p_reachable:.2g})[/]"
    return f"[dim]p={lead.p:.2g} n.s.[/]"


def no_power_advice(powerless: pd.DataFrame, summary: pd.DataFrame, folds: pd.DataFrame) -> str:
    """Why some pairs have fewer than MIN_FOLDS paired folds (``powerless``: their rows of
    ``significance.csv``), and what to do: evaluate more folds when the run scored fewer than
    MIN_FOLDS; otherwise name the series scored on fewer of the run's folds (failed units) or
    the strata that skipped folds, for which more folds are not the remedy."""
    intervals = ("the intervals are rough" if (powerless["n_folds"] > 1).any()
                 else f"the intervals are {NO_INTERVAL}")
    said = f"the fold-level tests have no power and report no p-value; {intervals}"
    n_used = int((~folds["skipped"].astype(bool)).sum())
    if n_used < MIN_FOLDS:
        return (f"fewer than {MIN_FOLDS} paired folds: {said}. Evaluate more folds (--folds) "
                "before calling a difference real over time; --test-unit users tests over the "
                "users.")
    every = summary[summary["stratum"] == "all"]
    scored = every.groupby("algorithm", sort=False)["n_folds"].max()
    paired = set(powerless.loc[powerless["stratum"] == "all", ["algorithm_a", "algorithm_b"]]
                 .to_numpy().ravel().tolist())
    short = [f"{name} on {int(scored[name])}" for name in scored.index
             if name in paired and scored[name] < n_used]
    reasons = []
    if short:
        reasons.append(f"{', '.join(short)} of the {n_used} folds the run scored (its other "
                       "units failed or were skipped: see above)")
    strata = sorted(set(powerless["stratum"].astype(str)) - {"all"})
    if strata:
        reasons.append(f"folds skipped in stratum {', '.join(strata)} (u_min applies per "
                       "stratum)")
    why = "; ".join(reasons) or "see significance.csv"
    return f"fewer than {MIN_FOLDS} paired folds for some pairs: {why}. For those, {said}."


def power_lines(significance: pd.DataFrame, metric: str, k: int | None,
                unit: str) -> list[tuple[str, str]]:
    """The power statements (text, style) of the folds' design and, when the table has them,
    the users' at ``metric``@``k`` of stratum ``all``: yellow where the design cannot tell."""
    what = f"{LABELS.get(metric, metric)}" + (f"@{k}" if k is not None else "")
    lines = []
    units = ["folds", "users"] if unit == "users" else ["folds"]
    for name in units:
        power = design_power(significance, stratum="all", metric=metric, k=k, unit=name)
        if power is not None:
            lines.append((power_statement(power, what), "yellow" if power.cannot_tell else "dim"))
    return lines


def print_significance_notes(outputs: Outputs, config: EvalConfig, console: Console) -> None:
    """What the "best's lead" row means, what each design can show (the power statements),
    the warning when folds are too few for a test, and the policy effect's count of
    significant differences (``significance_strata.csv``)."""
    significance = outputs.significance
    if significance is None or significance.empty:
        return
    unit = table_unit(significance, config.test_unit)
    paired = ("users (each user's mean over the folds where it is eligible)"
              if unit == "users" else "folds")
    against = "the runner-up" if config.baseline is None else config.baseline
    correction = CORRECTION_NAMES[config.correction]
    console.print(
        f"best's lead: best vs {against}, paired over {paired}, Wilcoxon signed-rank, "
        f"{correction} over the algorithm pairs (✓: p < {ALPHA:g}); every pair, both units, "
        "the t-test, the permutation test and effect sizes: significance.csv",
        style="dim", highlight=False,
    )
    metric = shown_metric(outputs.summary)
    for line, style in power_lines(significance, metric, shown_k(config.k), unit):
        console.print(f"  {line}", style=style, highlight=False)
    folds_rows = significance[significance["unit"] == "folds"]
    powerless = folds_rows[folds_rows["note"] == NO_POWER]
    if len(powerless):
        console.print(no_power_advice(powerless, outputs.summary, outputs.folds),
                      style="yellow", highlight=False)
    strata = outputs.significance_strata
    if strata is not None and not strata.empty:
        at = strata[(strata["metric"] == metric) & (strata["test"] == "wilcoxon")]
        k = 10 if (at["k"] == 10).any() else at["k"].dropna().min()
        at = at[at["k"] == k]
        if len(at):
            tested = int(at["p_holm"].notna().sum())
            n_significant = int((at["p_adjusted"] < ALPHA).sum())
            untested = (f"; {len(at) - tested} untested (fewer than {MIN_FOLDS} paired folds)"
                        if tested < len(at) else "")
            effect = "policy" if policy_column(config) else "stratum"
            console.print(
                f"{effect} effect at {LABELS.get(metric, metric)}@{k:g}: {n_significant} of {tested} tested (algorithm "
                f"pair, stratum pair) leads differ between strata (p < {ALPHA:g}, "
                f"{correction}){untested}; see significance_strata.csv", highlight=False,
            )
