"""The contract every algorithm keeps (SPEC §3), checked on all six through the registry."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.algorithms.registry import ALGORITHMS, build_algorithm
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.engine import evaluate_unit
from sweval.evaluators.folds import build_folds
from sweval.evaluators.windows import WindowSpec


#: Small settings keep the suite fast; the contract does not depend on them.
PARAMS: dict[str, dict] = {
    "pop": {},
    "pop-n": {"n_recent": 7},
    "item-knn": {"n_neighbors": 3},
    "user-knn": {"n_neighbors": 2},
    "svd": {"factors": 4},
    "als": {"factors": 6, "iterations": 5, "device": "cpu"},
}

NAMES = list(PARAMS)


def test_suite_covers_every_registered_algorithm():
    assert set(NAMES) == set(ALGORITHMS)


def log_of(rows: list[tuple]) -> InteractionLog:
    return InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]))


def random_log(seed: int) -> InteractionLog:
    """Five days, 25 users, 20 items; items 15..19 appear only from day 3 on, users 20..24 have
    a single transaction, and several items have a single user."""
    rng = np.random.default_rng(seed)
    rows = []
    for user in range(20):
        n = int(rng.integers(1, 8))
        items = rng.choice(15, size=n, replace=False)
        rows += [(user, int(i), int(rng.integers(0, 5 * DAY))) for i in items]
    rows += [(20 + j, int(rng.integers(0, 15)), int(rng.integers(0, 5 * DAY))) for j in range(5)]
    late = rng.integers(3 * DAY, 5 * DAY, 5)
    rows += [(int(rng.integers(0, 25)), 15 + j, int(late[j])) for j in range(5)]
    return log_of(rows)


def folds_of(log: InteractionLog, n_folds: int = 3):
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=n_folds), u_min=0)
    return [f for f in folds if not f.skipped]


def run(name: str, log: InteractionLog, fold, k: int = 10, **overrides) -> np.ndarray:
    algo = build_algorithm(name, {**PARAMS[name], **overrides})
    result = evaluate_unit(log, fold, algo, ks=[5, k], keep_lists=True)
    assert result.recommended is not None
    return result.recommended


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [0, 1])
def test_lists_hold_only_unseen_training_items(name, seed):
    log = random_log(seed)
    folds = folds_of(log)
    assert folds
    for fold in folds:
        lists = run(name, log, fold)
        train_items = set(log.item[: fold.train_hi].tolist())
        for user, items in zip(fold.eligible_users, lists, strict=True):
            seen = set(log.item[: fold.train_hi][log.user[: fold.train_hi] == user].tolist())
            real = items[items >= 0]
            assert (items[len(real) :] == -1).all(), "padding only at the end"
            assert len(set(real.tolist())) == len(real), "no repeats"
            assert not set(real.tolist()) & seen, "a seen item was recommended"
            assert set(real.tolist()) <= train_items, "an item absent from training"
            # Lists are full unless the candidates run out.
            assert len(real) == min(lists.shape[1], len(train_items - seen))


@pytest.mark.parametrize("name", NAMES)
def test_lists_follow_own_scores_with_ties_by_item_id(name, lib):
    log = random_log(2)
    for fold in folds_of(log):
        train = fold.train_data(log)
        algo = build_algorithm(name, PARAMS[name]).fit(train)
        rows = train.rows_of(fold.eligible_users)
        scores = np.asarray(algo.score(rows), dtype=np.float64)
        seen = train.matrix[rows].toarray() > 0
        k = train.n_items
        expected = lib.reference_ranking(scores, seen, k, decimals=None)
        np.testing.assert_array_equal(algo.recommend(rows, k), expected)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "als"])
def test_all_tied_scores_come_in_item_id_order(name):
    # Six users with one distinct item each: no overlap, every count 1. POP, POP-N, both kNN
    # and SVD at full rank (f = 6) score every candidate alike, so the list is the id order.
    rows = [(u, 10 + u, 100 * u) for u in range(6)]
    rows += [(u, 10 + (u + 1) % 6, DAY + 5) for u in range(6)]
    log = log_of(rows)
    (fold,) = folds_of(log, n_folds=1)
    lists = run(name, log, fold, k=6, **({"factors": 6} if name == "svd" else {}))
    ids = log.item_ids
    for user, items in zip(fold.eligible_users, lists, strict=True):
        own = 10 + int(log.user_ids[user])
        expected = [i for i in range(10, 16) if i != own] + [None]
        assert [None if c < 0 else int(ids[c]) for c in items] == expected


@pytest.mark.parametrize("name", NAMES)
def test_single_interaction_users_and_single_user_items(name):
    rows = [(0, 1, 0), (1, 2, 10), (2, 3, 20), (3, 1, 30), (3, 4, 40), (4, 5, 50)]
    rows += [(u, 9, DAY + u) for u in range(5)]
    log = log_of(rows)
    (fold,) = folds_of(log, n_folds=1)
    train = fold.train_data(log)
    algo = build_algorithm(name, PARAMS[name]).fit(train)
    assert np.isfinite(algo.score(np.arange(train.n_users))).all()
    lists = run(name, log, fold, k=5)
    assert ((lists >= 0).sum(axis=1) == [4, 4, 4, 3, 4]).all()


@pytest.mark.parametrize("name", NAMES)
def test_deterministic(name):
    log = random_log(3)
    for fold in folds_of(log):
        np.testing.assert_array_equal(run(name, log, fold), run(name, log, fold))


@pytest.mark.parametrize("name", NAMES)
def test_fold_with_a_single_user(name):
    log = log_of([("a", 1, 0), ("a", 2, 10), ("a", 3, DAY + 1)])
    (fold,) = folds_of(log, n_folds=1)
    assert fold.train_data(log).n_users == 1
    lists = run(name, log, fold, k=5)
    assert lists.shape == (1, 5) and (lists == -1).all()


@pytest.mark.parametrize("name", NAMES)
def test_fold_with_a_single_item(name):
    log = log_of([("a", 1, 0), ("b", 1, 10), ("a", 2, DAY + 1), ("b", 3, DAY + 2)])
    (fold,) = folds_of(log, n_folds=1)
    assert fold.train_data(log).n_items == 1
    lists = run(name, log, fold, k=5)
    assert lists.shape == (2, 5) and (lists == -1).all()


@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameter_is_a_user_error(name):
    with pytest.raises(SwevalError, match="no_such_param"):
        build_algorithm(name, {"no_such_param": 1})


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_is_documented(name):
    for field_name, field in ALGORITHMS[name].Config.model_fields.items():
        assert field.description, f"{name}.{field_name} has no description"
