"""PureSVD against a dense numpy.linalg.svd reference (scores are sign/rotation invariant)."""

from __future__ import annotations

import numpy as np
import pytest

import algorithms.svd as svd_module
from algorithms.svd import PureSVD


def reference_scores(dense: np.ndarray, factors: int) -> np.ndarray | None:
    """R V_f V_fᵀ from the exact SVD, or None when σ_f = σ_{f+1} (V_f not unique)."""
    r = dense.astype(float)
    _, sigma, vt = np.linalg.svd(r, full_matrices=False)
    if factors < len(sigma) and sigma[factors - 1] - sigma[factors] < 1e-6:
        return None
    v = vt[:factors].T
    return r @ v @ v.T


@pytest.mark.parametrize("factors", [1, 2, 5])
def test_exact_path_matches_dense_svd(lib, factors):
    checked = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        dense = lib.random_binary(rng, int(rng.integers(6, 25)), int(rng.integers(6, 15)), 0.3)
        expected = reference_scores(dense, factors)
        if expected is None:
            continue
        train = lib.train_from_dense(dense)
        model = PureSVD(factors=factors).fit(train)
        rows = np.arange(train.n_users)
        np.testing.assert_allclose(model.score(rows), expected, atol=1e-8)
        k = train.n_items
        ranking = lib.reference_ranking(expected, dense, k)
        np.testing.assert_array_equal(model.recommend(rows, k), ranking, err_msg=f"{seed=}")
        checked += 1
    assert checked >= 15


def test_lanczos_path_matches_dense_svd(lib, monkeypatch):
    # The sparse (Lanczos) path on a planted rank-6 structure plus noise.
    monkeypatch.setattr(svd_module, "DENSE_SVD_CELLS", 0)
    rng = np.random.default_rng(0)
    users = rng.integers(0, 6, 300)
    items = rng.integers(0, 6, 120)
    affinity = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    p = np.where(users[:, None] == items[None, :], affinity[users][:, None], 0.03)
    dense = rng.random(p.shape) < p
    dense[:, 0] |= ~dense.any(axis=1)
    dense[0] |= ~dense.any(axis=0)
    expected = reference_scores(dense, 6)
    assert expected is not None
    train = lib.train_from_dense(dense)
    rows = np.arange(train.n_users)
    scores = PureSVD(factors=6, seed=3).fit(train).score(rows)
    np.testing.assert_allclose(scores, expected, atol=1e-9)
    again = PureSVD(factors=6, seed=3).fit(train).score(rows)
    np.testing.assert_array_equal(scores, again)


def test_factors_clamped_to_rank_bound(lib):
    # With f ≥ min(n_users, n_items) the projection keeps every history: unseen items score 0
    # and come in item id order.
    dense = np.array([[1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 0, 1, 1]], dtype=bool)
    train = lib.train_from_dense(dense)
    model = PureSVD(factors=50).fit(train)
    assert model.components_.shape == (5, 3)
    rows = np.arange(3)
    np.testing.assert_array_equal(model.score(rows), dense.astype(float))
    assert model.recommend(rows, 5).tolist() == [
        [2, 3, 4, -1, -1],
        [0, 3, 4, -1, -1],
        [0, 1, 2, -1, -1],
    ]
