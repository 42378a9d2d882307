"""Shared builders for the algorithm tests: random binary matrices and a reference ranking.

They reach the test modules through the ``lib`` fixture (this directory is not a package, so
importing ``conftest`` by name could pick up another directory's conftest).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from numpy.typing import NDArray

from sweval.algorithms.train_data import TrainData

#: Reference scores are compared after rounding to this many decimals (the models' own rounding
#: is 10 decimals; the references sum in another order, so they may differ in the last bits).
REFERENCE_DECIMALS = 9


def train_from_dense(dense: NDArray[np.bool_]) -> TrainData:
    """TrainData of a binary matrix whose every row and column is non-empty."""
    users, items = np.nonzero(dense)
    # one transaction per pair, one second apart, in row-major order; "now" is after the last
    times = np.arange(len(users), dtype=np.int64)
    train = TrainData.from_codes(
        users, items, n_users=dense.shape[0], n_items=dense.shape[1],
        timestamps=times, cutoff=len(users),
    )
    assert train.matrix.shape == dense.shape, "every row and column must be non-empty"
    return train


def random_binary(rng: np.random.Generator, n_users: int, n_items: int, density: float):
    """A random binary matrix with no empty row or column, plus some duplicated columns/rows
    (identical items and users make exact ties in similarities and scores)."""
    dense = rng.random((n_users, n_items)) < density
    if n_items >= 4:
        dense[:, 1] = dense[:, 3]
    if n_users >= 4:
        dense[2] = dense[0]
    for r in np.flatnonzero(~dense.any(axis=1)):
        dense[r, rng.integers(0, n_items)] = True
    for c in np.flatnonzero(~dense.any(axis=0)):
        dense[rng.integers(0, n_users), c] = True
    return dense


def block_matrix(n_blocks: int = 3, size: int = 8) -> NDArray[np.bool_]:
    """Users and items in ``n_blocks`` blocks; user u consumed its block minus item u."""
    n = n_blocks * size
    dense = np.zeros((n, n), dtype=bool)
    for b in range(n_blocks):
        dense[b * size : (b + 1) * size, b * size : (b + 1) * size] = True
    dense[np.arange(n), np.arange(n)] = False
    return dense


def reference_ranking(
    scores: NDArray[np.float64],
    seen: NDArray[np.bool_],
    k: int,
    decimals: int | None = REFERENCE_DECIMALS,
) -> NDArray[np.int64]:
    """Per row: unseen columns by (score desc, column asc), first k, padded with -1.

    Scores are compared after rounding to ``decimals`` (None: exactly as given).
    """
    out = np.full((len(scores), k), -1, dtype=np.int64)
    rounded = scores if decimals is None else np.round(scores, decimals)
    for r in range(len(scores)):
        candidates = [c for c in range(scores.shape[1]) if not seen[r, c]]
        candidates.sort(key=lambda c: (-rounded[r, c], c))
        out[r, : min(k, len(candidates))] = candidates[:k]
    return out


@pytest.fixture(scope="session")
def lib() -> SimpleNamespace:
    """The helpers above, as attributes."""
    return SimpleNamespace(
        train_from_dense=train_from_dense,
        random_binary=random_binary,
        block_matrix=block_matrix,
        reference_ranking=reference_ranking,
        REFERENCE_DECIMALS=REFERENCE_DECIMALS,
    )
