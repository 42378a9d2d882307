"""PureSVD against a dense numpy.linalg.svd reference (scores are sign/rotation invariant)."""

from __future__ import annotations

import numpy as np
import pytest

import sweval.algorithms.svd as svd_module
from sweval.algorithms.svd import PureSVD


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


def planted(seed: int = 0) -> np.ndarray:
    """A planted rank-6 structure plus noise, 300 users × 120 items, no empty row or column."""
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 6, 300)
    items = rng.integers(0, 6, 120)
    affinity = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    p = np.where(users[:, None] == items[None, :], affinity[users][:, None], 0.03)
    dense = rng.random(p.shape) < p
    dense[:, 0] |= ~dense.any(axis=1)
    dense[0] |= ~dense.any(axis=0)
    return dense


@pytest.mark.parametrize("shape", ["tall", "wide"])
@pytest.mark.parametrize("solver", ["lanczos", "dense-gram"])
def test_sparse_paths_match_dense_svd(lib, monkeypatch, shape, solver):
    # Tall R: eigenvectors of RᵀR. Wide R (fewer users than items): eigenpairs of R Rᵀ mapped
    # through Rᵀ. Either side by ARPACK's Lanczos method or by a dense eigh of the Gram matrix.
    monkeypatch.setattr(svd_module, "DENSE_SVD_CELLS", 0)
    monkeypatch.setattr(svd_module, "DENSE_GRAM_SIDE", 0 if solver == "lanczos" else 10_000)
    dense = planted() if shape == "tall" else planted().T.copy()
    expected = reference_scores(dense, 6)
    assert expected is not None
    train = lib.train_from_dense(dense)
    rows = np.arange(train.n_users)
    scores = PureSVD(factors=6, seed=3).fit(train).score(rows)
    np.testing.assert_allclose(scores, expected, atol=1e-9)
    again = PureSVD(factors=6, seed=3).fit(train).score(rows)
    np.testing.assert_array_equal(scores, again)


def test_wide_rank_deficient_matrix_drops_null_directions(lib, monkeypatch):
    # 4 users, 8 items, two identical users: rank 3 < 4 users. f = 4 asks for a direction with
    # σ = 0, which is dropped; the projection still keeps every history exactly.
    monkeypatch.setattr(svd_module, "DENSE_SVD_CELLS", 0)
    dense = np.zeros((4, 8), dtype=bool)
    dense[0, [0, 1, 2]] = dense[1, [0, 1, 2]] = dense[2, [3, 4]] = dense[3, [5, 6, 7]] = True
    train = lib.train_from_dense(dense)
    model = PureSVD(factors=4).fit(train)
    assert model.components_.shape == (8, 3)
    np.testing.assert_allclose(model.score(np.arange(4)), dense.astype(float), atol=1e-12)


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
