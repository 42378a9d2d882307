"""EASE against the dense textbook formula (Steck 2019), and its item-count guard."""

from __future__ import annotations

import numpy as np
import pytest

from sweval.algorithms.ease import EASE, check_item_budget
from sweval.algorithms.scores import snap_scores
from sweval.data.errors import SwevalError


def reference_weights(dense: np.ndarray, l2: float) -> np.ndarray:
    """B = I − P·diagMat(1/diag(P)), P = (XᵀX + λI)⁻¹, by numpy's general inverse."""
    x = dense.astype(np.float64)
    p = np.linalg.inv(x.T @ x + l2 * np.eye(x.shape[1]))
    return np.eye(x.shape[1]) - p @ np.diag(1.0 / np.diag(p))


@pytest.mark.parametrize(("seed", "n_users", "n_items", "density", "l2"), [
    (0, 12, 7, 0.4, 500.0),
    (1, 30, 20, 0.2, 1.0),
    (2, 9, 25, 0.3, 10.0),  # more items than users: XᵀX singular, λ makes it invertible
    (3, 40, 1100, 0.05, 2.0),  # more rows than one mirrored block
])
def test_equals_the_dense_formula(lib, seed, n_users, n_items, density, l2):
    rng = np.random.default_rng(seed)
    dense = lib.random_binary(rng, n_users, n_items, density)  # duplicated columns: exact ties
    train = lib.train_from_dense(dense)
    model = EASE(l2=l2).fit(train)
    weights = reference_weights(dense, l2)
    np.testing.assert_allclose(model.weights_, weights, rtol=0, atol=1e-12)
    assert (np.diag(model.weights_) == 0).all()

    rows = np.arange(n_users)
    expected_scores = snap_scores(dense.astype(np.float64) @ weights)  # the model's rounding
    np.testing.assert_array_equal(model.score(rows), expected_scores)
    k = min(n_items, 30)
    expected = lib.reference_ranking(expected_scores, dense, k, decimals=None)
    np.testing.assert_array_equal(model.recommend(rows, k), expected)


def test_duplicated_items_tie_exactly_and_come_by_id(lib, rng):
    dense = lib.random_binary(rng, 20, 8, 0.3)
    dense[:, 3] = dense[:, 1]  # items 1 and 3: consumed by the same users
    dense[~dense.any(axis=1), 0] = True
    assert dense[:, 1].any() and not dense[:, 1].all()
    model = EASE(l2=5.0).fit(lib.train_from_dense(dense))
    scores = model.score(np.arange(20))
    both_unseen = ~dense[:, 1]
    np.testing.assert_array_equal(scores[both_unseen, 1], scores[both_unseen, 3])
    assert len(np.unique(scores[both_unseen, 1])) > 1  # not merely all zero
    lists = model.recommend(np.flatnonzero(both_unseen), 8)
    for row in lists:
        where = {c: j for j, c in enumerate(row.tolist())}
        assert where[3] == where[1] + 1  # tied: adjacent, the lower id first


def test_hand_computed_two_items():
    """Two items consumed by u0 both, u1 only item 0: XᵀX = [[2, 1], [1, 1]], λ = 1.

    G = [[3, 1], [1, 2]], P = G⁻¹ = [[2, −1], [−1, 3]] / 5, so B_01 = −P_01/P_11 = 1/3 and
    B_10 = −P_10/P_00 = 1/2: u1 (history {0}) scores item 1 as B_01 = 1/3.
    """
    from sweval.algorithms.train_data import TrainData

    train = TrainData.from_codes(np.array([0, 0, 1]), np.array([0, 1, 0]), n_users=2, n_items=2,
                                 timestamps=np.array([0, 1, 2]), cutoff=3)
    model = EASE(l2=1.0).fit(train)
    np.testing.assert_allclose(model.weights_, [[0, 1 / 3], [1 / 2, 0]], atol=1e-15)
    assert model.score(np.array([1]))[0, 1] == round(1 / 3, 10)


def test_item_count_over_the_budget_is_a_clear_error(lib, rng):
    train = lib.train_from_dense(lib.random_binary(rng, 10, 40, 0.3))
    budget = 39 * 39 * 8 / 2**30  # room for 39 items, the fold has 40
    with pytest.raises(SwevalError, match=r"has 40 items; .* over the budget "
                       r"ease\.max_matrix_gb=1\.13.*e-05 \(at most 39 items\)"):
        EASE(max_matrix_gb=budget).fit(train)
    EASE(max_matrix_gb=40 * 40 * 8 / 2**30).fit(train)  # exactly the size: fits


def test_default_budget_is_4_gib():
    check_item_budget(23_170, 4.0)  # 23,170² · 8 B = 3.9999 GiB
    with pytest.raises(SwevalError, match="23,171 items.*4.0 GiB.*at most 23,170 items"):
        check_item_budget(23_171, 4.0)
