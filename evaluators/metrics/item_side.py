"""Item-side metrics: how diverse, novel and broad a fold's lists are (``--metrics ild,
novelty,category_coverage``; ILD and category coverage need ``--items``, :mod:`data.items`).

Per user u with top-k list L_u (empty slots left out), C(i) the categories of item i, c_i its
training interactions, N = Σ_i c_i (the fold's training data, before t_f)::

    d(i, j)              = 1 − |C(i) ∩ C(j)| / |C(i) ∪ C(j)|     (Jaccard distance)
    ILD@k (per user)     = mean of d(i, j) over the pairs {i, j} ⊂ L_u with C(i), C(j) ≠ ∅
                           (undefined, and left out of the mean over users, without such a pair)
    Novelty@k (per user) = mean over i ∈ L_u of −log2(c_i / N)  (self-information of i's
                           training popularity, in bits; undefined for an empty list)

Per fold (for all users or a stratum's, U)::

    CategoryCoverage@k   = |∪_{u ∈ U} ∪_{i ∈ L_u} C(i)| / |∪_{i ∈ I_f} C(i)|
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

#: The per-user item-side metrics, and the one per fold.
PER_USER_NAMES = ("ild", "novelty")
PER_FOLD_NAMES = ("category_coverage",)
#: The metrics that read the item features.
NEED_ITEMS = ("ild", "category_coverage")
#: At most this many list slots × categories in memory at once (ILD's chunks of users).
CHUNK_CELLS = 4_000_000


def ild(recommended: NDArray[np.int64], features: sparse.csr_matrix,
        ks: list[int]) -> dict[tuple[str, int | None], NDArray[np.float64]]:
    """ILD@k per user of ``recommended`` ((n_users, K) global item codes, −1 = empty slot) with
    ``features`` ((n_items, n_categories) 0/1), NaN where no pair counts."""
    n_users = len(recommended)
    top = max(ks)
    rec = recommended[:, :top]
    width = rec.shape[1]
    sums = {k: np.zeros(n_users) for k in ks}
    pairs = {k: np.zeros(n_users) for k in ks}
    n_categories = max(features.shape[1], 1)
    step = max(1, CHUNK_CELLS // max(width * n_categories, 1))
    sizes = np.asarray(features.sum(axis=1)).ravel()
    for lo in range(0, n_users, step):
        chunk = rec[lo:lo + step]
        filled = chunk >= 0
        codes = np.where(filled, chunk, 0)
        dense = features[codes.ravel()].toarray().reshape(len(chunk), width, -1)
        shared = np.einsum("ukc,ulc->ukl", dense, dense)
        size = np.where(filled, sizes[codes], 0.0)
        union = size[:, :, None] + size[:, None, :] - shared
        counted = (size[:, :, None] > 0) & (size[:, None, :] > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            distance = np.where(counted, 1.0 - shared / union, 0.0)
        upper = np.triu(np.ones((width, width), dtype=bool), 1)
        for k in ks:
            inside = upper.copy()
            inside[k:, :] = False
            inside[:, k:] = False
            sums[k][lo:lo + step] = (distance * inside).sum(axis=(1, 2))
            pairs[k][lo:lo + step] = (counted & inside).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return {("ild", k): np.where(pairs[k] > 0, sums[k] / pairs[k], np.nan) for k in ks}


def novelty(recommended: NDArray[np.int64], counts: NDArray[np.int64],
            ks: list[int]) -> dict[tuple[str, int | None], NDArray[np.float64]]:
    """Novelty@k per user from the training counts c_i (NaN for an empty list; an item
    without a training interaction, which no window list holds, is left out)."""
    total = float(counts.sum())
    known = recommended >= 0
    count = np.where(known, counts[np.maximum(recommended, 0)], 0)
    known &= count > 0
    with np.errstate(divide="ignore"):
        bits = np.where(known, -np.log2(np.maximum(count, 1) / max(total, 1.0)), 0.0)
    out = {}
    for k in ks:
        n = known[:, :k].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[("novelty", k)] = np.where(n > 0, bits[:, :k].sum(axis=1) / n, np.nan)
    return out


def category_coverage(recommended: NDArray[np.int64], features: sparse.csr_matrix,
                      catalogue: NDArray[np.bool_], ks: list[int]) -> dict[int, float]:
    """CategoryCoverage@k of the lists ``recommended`` over the categories of the catalogue
    I_f (NaN when the catalogue's items have no category)."""
    possible = np.asarray(features[np.flatnonzero(catalogue)].sum(axis=0)).ravel() > 0
    n_possible = int(possible.sum())
    out = {}
    for k in ks:
        shown = np.unique(recommended[:, :k][recommended[:, :k] >= 0])
        covered = np.asarray(features[shown].sum(axis=0)).ravel() > 0
        out[k] = float((covered & possible).sum()) / n_possible if n_possible else np.nan
    return out
