"""The logging-policy effect (paper §2.5, Table 3) appears on a generated log with presentation
bias, and disappears without it.

Effect statistics, from per-stratum means over folds of Recall@10 (mode ``subset``):

    knn_effect = (item-kNN / POP in the item-kNN bucket) − (item-kNN / POP in the POP bucket)
    pop_effect = (POP-N / POP in the POP bucket)       − (POP-N / POP in the item-kNN bucket)

Noise is the bootstrap standard deviation of each statistic over folds (folds resampled with
replacement, seeded).

The same effect as SW-EVAL reports it (``significance_strata.csv``, mode ``test``): the per-fold
difference of an algorithm's lead between two buckets, its bootstrap interval and Holm-corrected
Wilcoxon p-value: significant with bias, not without.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweval.data.log import InteractionLog
from sweval.data.synthetic import generate_log
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.report.significance import stars
from sweval.evaluators.run.evaluate import evaluate_config


def effects(table: pd.DataFrame, folds: np.ndarray) -> tuple[float, float]:
    ratio = {}
    for stratum in ("item-knn", "pop"):
        part = table.loc[stratum].reindex(folds).dropna()
        ratio[stratum] = (
            part["item-knn"].mean() / part["pop"].mean(),
            part["pop-n"].mean() / part["pop"].mean(),
        )
    return ratio["item-knn"][0] - ratio["pop"][0], ratio["pop"][1] - ratio["item-knn"][1]


def measure(bias: float, tmp_path) -> tuple[np.ndarray, np.ndarray]:
    log = InteractionLog.from_frame(generate_log(scale=0.05, seed=0, bias=bias), policy_col="policy")
    config = EvalConfig.build(
        algorithms=["pop", "pop-n", "item-knn"], folds=20, u_min=5, stratify_by="policy",
        output=str(tmp_path / f"bias{bias}"), progress=False,
    )
    results = evaluate_config(config, log=log).results
    recall = results[(results["metric"] == "recall") & (results["k"] == 10) & ~results["skipped"]]
    table = recall.pivot_table(index=["stratum", "fold"], columns="algorithm", values="value")
    folds = table.index.get_level_values("fold").unique().to_numpy()
    rng = np.random.default_rng(0)
    boot = np.array([effects(table, rng.choice(folds, len(folds))) for _ in range(300)])
    return np.array(effects(table, folds)), boot.std(axis=0)


@pytest.mark.slow
def test_policy_bias_shows_in_strata_and_vanishes_without_it(tmp_path):
    effect, noise = measure(0.3, tmp_path)
    # item-kNN looks better (relative to POP) on data logged by item-kNN; POP-N on data logged by POP
    assert (effect > 2 * noise).all(), (effect, noise)
    effect, noise = measure(0.0, tmp_path)
    assert (np.abs(effect) < 2 * noise).all(), (effect, noise)


def policy_effect(bias: float, tmp_path) -> pd.DataFrame:
    """significance_strata.csv of a run in mode ``test`` (every model trains on all of D_t, so
    only the presentation bias can make the strata differ), at Recall@10, Wilcoxon; and the
    report written from the same directory."""
    from sweval.evaluators.report.page import write_report

    log = InteractionLog.from_frame(generate_log(scale=0.05, seed=0, bias=bias), policy_col="policy")
    config = EvalConfig.build(
        algorithms=["pop", "pop-n", "item-knn"], folds=20, u_min=5, stratify_by="policy",
        stratify_mode="test", output=str(tmp_path / f"test-bias{bias}"), progress=False,
    )
    evaluate_config(config, log=log)
    write_report(config.output)
    table = pd.read_csv(tmp_path / f"test-bias{bias}" / "significance_strata.csv")
    table = table[(table["metric"] == "recall") & (table["k"] == 10)
                  & (table["test"] == "wilcoxon")]
    return table.set_index(["algorithm_a", "algorithm_b", "stratum_a", "stratum_b"])


@pytest.mark.slow
def test_policy_effect_is_significant_with_bias_and_not_without(tmp_path):
    # item-kNN's lead over POP, bucket item-knn minus bucket pop (rows are a − b = POP − item-kNN,
    # so the effect is negative); POP-N's lead over POP, bucket pop minus bucket item-knn
    knn = ("pop", "item-knn", "item-knn", "pop")
    popn = ("pop", "pop-n", "item-knn", "pop")
    with_bias = policy_effect(0.3, tmp_path)
    assert with_bias.loc[knn, "ci_high"] < 0 and with_bias.loc[knn, "p_holm"] < 0.05
    assert with_bias.loc[popn, "ci_low"] > 0 and with_bias.loc[popn, "p_holm"] < 0.05
    report = (tmp_path / "test-bias0.3" / "report.html").read_text(encoding="utf-8")
    assert "Policy effect: Recall@10" in report
    assert f"{with_bias.loc[knn, 'mean_diff']:+.4f}" in report
    # significance is Holm's: stars on the corrected p-value, none on the raw one
    raw, corrected = with_bias.loc[knn, "p_value"], with_bias.loc[knn, "p_holm"]
    assert f"<td>{raw:.3g}</td>" in report and f"<td>{corrected:.3g}{stars(corrected)}</td>" in report
    without = policy_effect(0.0, tmp_path)
    assert (without["n_folds"] == 20).all()
    # no (algorithm pair, stratum pair) differs, the two effects included
    assert (without["p_holm"] > 0.05).all(), without
    assert without.loc[knn, "ci_low"] < 0 < without.loc[knn, "ci_high"]
    assert without.loc[popn, "ci_low"] < 0 < without.loc[popn, "ci_high"]
