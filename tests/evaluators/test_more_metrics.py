"""--metrics beyond SPEC §4 (Precision, capped recall, MRR, Recency, coverage, popularity, Gini)
and --per-user: hand-computed values on tiny logs, slow references, and the t_f boundary."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from sweval_testing import make_log

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.metrics.exposure import ItemFacts, exposure_metrics, gini, recency
from sweval.evaluators.metrics.names import (
    ALL_METRICS,
    DEFAULT_METRICS,
    NEED_ITEMS,
    PER_FOLD,
    PER_USER,
    parse_metrics,
)
from sweval.evaluators.metrics.user_metrics import user_metrics
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.run.specs import window_spec

F = 0.3 ** (17 / 12)  # f(c) of the tiny log below: s = 30/80, 0.3 ** ((0.8 - 0.375) * 10/3)


def test_precision_capped_recall_mrr_recency_by_hand():
    # user 0: |Rel| = 3, hits at ranks 1 and 3; user 1: |Rel| = 1, no hit; user 2: |Rel| = 2,
    # hits at ranks 0 and 1
    hits = np.array([[0, 1, 0, 1, 0], [0, 0, 0, 0, 0], [1, 1, 0, 0, 0]], dtype=bool)
    n_rel = np.array([3, 1, 2])
    weights = np.array([[9, 0.5, 9, 0.25, 9], [1, 1, 1, 1, 1], [0.1, 0.2, 9, 9, 9]])
    values = user_metrics(hits, n_rel, [1, 2, 5], ["precision", "recall_capped", "mrr", "recency"],
                          recency=weights)
    assert values[("precision", 2)] == pytest.approx([1 / 2, 0, 1])
    assert values[("precision", 5)] == pytest.approx([2 / 5, 0, 2 / 5])
    # capped: ÷ min(k, |Rel|): user 0 at k=2 -> 1/2; at k=5 -> 2/3; user 2 at k=5 -> 2/2
    assert values[("recall_capped", 2)] == pytest.approx([1 / 2, 0, 1])
    assert values[("recall_capped", 5)] == pytest.approx([2 / 3, 0, 1])
    assert values[("mrr", 1)] == pytest.approx([0, 0, 1])
    assert values[("mrr", 2)] == pytest.approx([1 / 2, 0, 1])
    assert values[("mrr", 5)] == pytest.approx([1 / 2, 0, 1])
    # recency: Σ over the top-k hits of f(item)
    assert values[("recency", 2)] == pytest.approx([0.5, 0, 0.3])
    assert values[("recency", 5)] == pytest.approx([0.75, 0, 0.3])


def test_recency_function_follows_papers_003_eq_1():
    first_seen = np.array([0, 50, 80, 100, 94])
    # s = 0, 0.5, 0.8, 1, 0.94: 1 from s ≥ 0.8, else 0.3 ** ((0.8 - s) * 10/3)
    assert recency(first_seen) == pytest.approx([0.3 ** (8 / 3), 0.3, 1, 1, 1])
    assert recency(np.array([7, 7])) == pytest.approx([1, 1])  # one time: all equally recent


def test_exposure_metrics_by_hand():
    # training counts of items 0..4 (item 4 not in training: outside the catalogue I_f)
    facts = ItemFacts(counts=np.array([3, 1, 2, 1, 0]), first_seen=np.zeros(5, dtype=np.int64),
                      recency=np.zeros(5))
    lists = np.array([[0, 2, 1], [0, 1, -1], [0, 3, 2]])
    values = exposure_metrics(lists, facts, [1, 2], ["coverage", "popularity", "gini"])
    # k=1: every list shows item 0: exposure (3, 0, 0, 0) over |I_f| = 4
    assert values[("coverage", 1)] == pytest.approx(1 / 4)
    assert values[("popularity", 1)] == pytest.approx(3)
    assert values[("gini", 1)] == pytest.approx(0.75)  # (2·4 − 5)·3 / (4 · 3)
    # k=2: exposure (3, 1, 1, 1): all four shown; popularity (3+2+3+1+3+1)/6
    assert values[("coverage", 2)] == pytest.approx(1)
    assert values[("popularity", 2)] == pytest.approx(13 / 6)
    assert values[("gini", 2)] == pytest.approx(0.25)  # (-3 -1 +1 +9) / (4 · 6)


def test_gini_and_coverage_match_slow_references(rng):
    for _ in range(20):
        n_items = int(rng.integers(2, 30))
        counts = rng.integers(0, 4, n_items)
        counts[0] = 1
        facts = ItemFacts(counts=counts, first_seen=np.zeros(n_items, dtype=np.int64),
                          recency=np.zeros(n_items))
        catalogue = np.flatnonzero(counts > 0)
        lists = np.array([
            np.concatenate([rng.permutation(catalogue)[: int(rng.integers(0, 5))],
                            np.full(5, -1)])[:5]
            for _ in range(int(rng.integers(1, 12)))
        ])
        k = int(rng.integers(1, 6))
        values = exposure_metrics(lists, facts, [k], ["coverage", "gini"])
        shown = [set(int(i) for i in row[:k] if i >= 0) for row in lists]
        assert values[("coverage", k)] == pytest.approx(len(set().union(*shown)) / len(catalogue))
        exposure = [sum(int(item) in s for s in shown) for item in catalogue]
        total = sum(exposure)
        if total == 0:
            assert np.isnan(values[("gini", k)])
            continue
        # Gini as the mean absolute difference over all pairs / (2 · mean)
        mad = sum(abs(a - b) for a, b in itertools.product(exposure, exposure))
        reference = mad / (2 * len(exposure) ** 2 * (total / len(exposure)))
        assert values[("gini", k)] == pytest.approx(reference)
    assert gini(np.array([5, 5, 5])) == pytest.approx(0)


# A tiny log, one fold [100, 200), POP. Training: a@10 b@20 (u1), a@30 c@40 (u2),
# a@50 b@60 d@90 (u3): counts a=3, b=2, c=1, d=1 (c before d by id). Test: u1 c, d; u2 d; u3 c;
# u4 (no history, not eligible) brings the new item e at 150.
# Lists (seen items dropped): u1 [c, d], u2 [b, d], u3 [c].
ROWS = [
    ("u1", "a", 10), ("u1", "b", 20), ("u2", "a", 30), ("u2", "c", 40), ("u3", "a", 50),
    ("u3", "b", 60), ("u3", "d", 90), ("u1", "c", 110), ("u1", "d", 120), ("u2", "d", 130),
    ("u3", "c", 150), ("u4", "e", 150),
]


def tiny_run(tmp_path, rows=ROWS, **options):
    options = {"metrics": ["all"]} | options
    config = EvalConfig.build(
        window="100s", folds=1, start="100", u_min=1, algorithms=["pop"], k=[1, 2],
        output=str(tmp_path / "out"), progress=False, tracking=False, **options,
    )
    return evaluate_config(config, log=make_log(rows))


def values_of(results: pd.DataFrame) -> dict[tuple[str, int], float]:
    return {(row.metric, None if pd.isna(row.k) else int(row.k)): row.value
            for row in results.itertuples()}


def test_a_run_reports_every_metric_as_computed_by_hand(tmp_path):
    found = values_of(tiny_run(tmp_path).results)
    assert found[("precision", 1)] == pytest.approx(2 / 3)  # u1 c ✓, u2 b ✗, u3 c ✓
    assert found[("precision", 2)] == pytest.approx((1 + 1 / 2 + 1 / 2) / 3)
    assert found[("recall", 1)] == pytest.approx((1 / 2 + 0 + 1) / 3)
    assert found[("recall_capped", 1)] == pytest.approx((1 + 0 + 1) / 3)
    assert found[("recall_capped", 2)] == pytest.approx(1)
    assert found[("mrr", 1)] == pytest.approx(2 / 3)
    assert found[("mrr", 2)] == pytest.approx((1 + 1 / 2 + 1) / 3)
    # first seen in training: a 10, b 20, c 40, d 90 -> s(c) = 30/80, s(d) = 1 -> f(d) = 1
    assert found[("recency", 1)] == pytest.approx((F + 0 + F) / 3)
    assert found[("recency", 2)] == pytest.approx((F + 1 + 1 + F) / 3)
    # exposure over I_f = {a, b, c, d} (e arrives at t_f or later: not in the catalogue)
    assert found[("coverage", 1)] == pytest.approx(2 / 4)  # c, b
    assert found[("coverage", 2)] == pytest.approx(3 / 4)  # c, d, b
    assert found[("popularity", 1)] == pytest.approx((1 + 2 + 1) / 3)
    assert found[("popularity", 2)] == pytest.approx((1 + 1 + 2 + 1 + 1) / 5)
    assert found[("gini", 1)] == pytest.approx(7 / 12)  # exposure (0, 1, 2, 0)
    assert found[("gini", 2)] == pytest.approx(7 / 20)  # exposure (0, 1, 2, 2)


def test_nothing_at_or_after_t_f_changes_item_facts():
    log = make_log(ROWS)
    later = make_log(ROWS + [("u5", "a", 100), ("u5", "f", 100), ("u1", "g", 199), ("u6", "a", 500)])
    facts = []
    for each in (log, later):
        fold = build_folds(each, window_spec(EvalConfig.build(window="100s", folds=1,
                                                              start="100")), u_min=1)[0]
        facts.append((each, ItemFacts.of_training(each, fold.train_lo, fold.train_hi)))
    by_id = [
        {str(each.item_ids[i]): (int(f.counts[i]), int(f.first_seen[i]), float(f.recency[i]))
         for i in np.flatnonzero(f.counts)}
        for each, f in facts
    ]
    assert by_id[0] == by_id[1]
    assert set(by_id[0]) == {"a", "b", "c", "d"}


def test_per_user_file_averages_to_results(tmp_path):
    outputs = tiny_run(tmp_path, per_user=True)
    table = pd.read_parquet(tmp_path / "out" / "per_user.parquet")
    assert list(table.columns) == ["fold", "algorithm", "stratum", "user", "metric", "k", "value"]
    assert sorted(table["user"].unique()) == ["u1", "u2", "u3"]  # raw ids, eligible users only
    mrr = table[(table["metric"] == "mrr") & (table["k"] == 2)].set_index("user")["value"]
    assert mrr.to_dict() == pytest.approx({"u1": 1, "u2": 1 / 2, "u3": 1})
    # every per-user metric but those that read --items (which tiny_run does not give)
    assert set(table["metric"]) == {m for m in PER_USER if m not in NEED_ITEMS}
    means = table.assign(k=table["k"].fillna(-1)).groupby(["metric", "k"])["value"].mean()
    for (metric, k), value in values_of(outputs.results).items():
        if metric in PER_FOLD:
            continue
        assert means.loc[(metric, -1 if k is None else k)] == pytest.approx(value)


def test_metrics_selection_and_default(tmp_path):
    assert parse_metrics(["all"]) == ALL_METRICS
    assert parse_metrics(["mrr", "Recall", "coverage"]) == ["recall", "mrr", "coverage"]
    assert EvalConfig.build().metrics == DEFAULT_METRICS
    with pytest.raises(SwevalError, match="unknown metric.*precison"):
        EvalConfig.build(metrics=["recall", "precison"])
    results = tiny_run(tmp_path, metrics=["ndcg", "gini"]).results
    assert set(results["metric"]) == {"ndcg", "gini"}


def test_tune_metric_must_be_measured():
    from sweval.evaluators.stats.tuning_candidates import tune_metric

    config = EvalConfig.build(metrics=["precision"], tune={"item-knn": {"n_neighbors": [5, 10]}})
    with pytest.raises(SwevalError, match="--tune-metric.*add it to --metrics"):
        tune_metric(config)


def test_exposure_per_policy_group_by_hand(tmp_path):
    # mode test: models train on all of D_{t_f}; groups by test policy: A = {u1, u3}, B = {u2}
    policy = {"u1": "A", "u2": "B", "u3": "A", "u4": "B"}
    rows = [(user, item, t, policy[user]) for user, item, t in ROWS]
    results = tiny_run(tmp_path, rows=rows, stratify_by="policy", stratify_mode="test").results
    found = {(r.stratum, r.metric, r.k): (r.value, r.n_users) for r in results.itertuples()
             if not pd.isna(r.k) and r.k == 1}
    # top-1: u1 c, u2 b, u3 c
    assert found[("A", "coverage", 1)] == pytest.approx((1 / 4, 2))
    assert found[("A", "popularity", 1)] == pytest.approx((1, 2))
    assert found[("A", "gini", 1)] == pytest.approx((0.75, 2))  # exposure (0, 0, 2, 0)
    assert found[("A", "precision", 1)] == pytest.approx((1, 2))
    assert found[("B", "coverage", 1)] == pytest.approx((1 / 4, 1))
    assert found[("B", "popularity", 1)] == pytest.approx((2, 1))
    assert found[("B", "precision", 1)] == pytest.approx((0, 1))
    assert found[("all", "coverage", 1)] == pytest.approx((2 / 4, 3))
