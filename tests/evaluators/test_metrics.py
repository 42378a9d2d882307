"""Hand-computed metric values on tiny logs (SPEC §4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweval_testing import DAY, make_log

from sweval.evaluators.metrics.ranking import (
    RelevantSets,
    hit_matrix,
    per_user_metrics,
    relevant_sets,
)


def lists(rows):
    return np.array(rows, dtype=np.int64)


def rel(sets):
    users = np.arange(len(sets), dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    items = np.array([i for s in sets for i in sorted(s)], dtype=np.int64)
    return RelevantSets(users=users, indptr=indptr, items=items)


def test_recall_hit_rate_ndcg_r_precision_by_hand():
    # user 0: Rel = {3, 7}; list 3, 5, 7, 9  -> hits at positions 0 and 2
    # user 1: Rel = {1, 2, 4, 6, 8} (more relevant items than k=2); list 2, 0, 8, 9
    # user 2: Rel = {5}; list 0, 1, 2, 3 -> no hit
    recommended = lists([[3, 5, 7, 9], [2, 0, 8, 9], [0, 1, 2, 3]])
    relevant = rel([{3, 7}, {1, 2, 4, 6, 8}, {5}])
    hits = hit_matrix(recommended, relevant, n_items=10)
    assert hits.tolist() == [
        [True, False, True, False],
        [True, False, True, False],
        [False, False, False, False],
    ]
    values = per_user_metrics(hits, relevant.sizes, ks=[2, 4])
    # Recall@2: 1/2, 1/5 (denominator |Rel| = 5, NOT min(k, |Rel|) = 2), 0
    assert values[("recall", 2)] == pytest.approx([0.5, 0.2, 0.0])
    # Recall@4: 2/2, 2/5, 0
    assert values[("recall", 4)] == pytest.approx([1.0, 0.4, 0.0])
    assert values[("hit_rate", 2)] == pytest.approx([1, 1, 0])
    # NDCG@2 user 0: DCG = 1/log2(2) = 1; IDCG over min(2, 2) = 1 + 1/log2(3)
    idcg2 = 1 + 1 / math.log2(3)
    assert values[("ndcg", 2)][0] == pytest.approx(1 / idcg2)
    # NDCG@4 user 0: DCG = 1 + 1/log2(4) = 1.5; IDCG over min(4, 2) items = 1 + 1/log2(3)
    assert values[("ndcg", 4)][0] == pytest.approx(1.5 / idcg2)
    # NDCG@4 user 1: DCG = 1.5; IDCG over min(4, 5) = 4 items
    idcg4 = sum(1 / math.log2(j + 2) for j in range(4))
    assert values[("ndcg", 4)][1] == pytest.approx(1.5 / idcg4)
    # R-precision: user 0 looks at the top |Rel| = 2 -> 1 hit / 2; user 1 top 5 (only 4 listed,
    # padded as misses) -> 2/5; user 2 top 1 -> 0
    assert values[("r_precision", None)] == pytest.approx([0.5, 0.4, 0.0])


def test_padding_never_counts_as_a_hit():
    recommended = lists([[4, -1, -1]])
    relevant = rel([{4, 0}])
    hits = hit_matrix(recommended, relevant, n_items=5)
    assert hits.tolist() == [[True, False, False]]


def test_relevance_all_and_first_from_a_log():
    # Test window is day 1. User 1 interacts with items 30 then 20 (same second: row order),
    # then 10. With `first`, only item 30 is relevant.
    log = make_log(
        [
            (1, 5, 0),
            (1, 30, DAY + 100),
            (1, 20, DAY + 100),
            (1, 10, DAY + 200),
            (2, 5, 10),
            (2, 10, DAY + 50),
        ]
    )
    lo, hi = log.position(DAY), log.position(2 * DAY)
    users = np.array([0, 1], dtype=np.int64)  # codes of users 1 and 2
    every = relevant_sets(log, lo, hi, users, "all")
    assert [log.item_ids[every.items[every.indptr[j] : every.indptr[j + 1]]].tolist() for j in range(2)] == [
        [10, 20, 30],
        [10],
    ]
    first = relevant_sets(log, lo, hi, users, "first")
    assert log.item_ids[first.items].tolist() == [30, 10]
    assert first.sizes.tolist() == [1, 1]
