"""The logging-policy effect (paper §2.5, Table 3) appears on a generated log with presentation
bias, and disappears without it.

Effect statistics, from per-stratum means over folds of Recall@10 (mode ``subset``):

    knn_effect = (item-kNN / POP in the item-kNN bucket) − (item-kNN / POP in the POP bucket)
    pop_effect = (POP-N / POP in the POP bucket)       − (POP-N / POP in the item-kNN bucket)

Noise is the bootstrap standard deviation of each statistic over folds (folds resampled with
replacement, seeded).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweval.data.log import InteractionLog
from sweval.data.synthetic import generate_log
from sweval.evaluators.config import EvalConfig
from sweval.evaluators.outputs import collect
from sweval.evaluators.run import make_plan, run_units, unit_store


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
    plan = make_plan(config, log)
    store = unit_store(config)
    run_units(plan, store)
    results = collect(plan, store).results
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
