"""What a fold's lists expose: per-fold exposure metrics, and the item facts they and Recency@k
read, all from the fold's training data (log positions before t_f; nothing at or after).

Item facts of fold f (training data D_{t_f}, or the sliding training window)::

    I_f            the items with at least one training interaction (the candidate catalogue)
    c_i            the number of training interactions of i (POP's score)
    t_i            the time of i's first training interaction (age at t_f: t_f − t_i)
    s_i            = (t_i − t_min) / (t_max − t_min), t_min, t_max = min, max of t_i over I_f
                     (1 for every item when all t_i are equal)
    f(i)           = 1                                   if s_i ≥ 0.8
                     0.3 ** ((0.8 − s_i) · 10/3)          otherwise
                   papers/003 §4.1, Eq. 1: the newest 20 % of the catalogue's time span weigh 1,
                   older items decay to 0.3^(8/3) ≈ 0.040 for the oldest (THRESHOLD, BASE, SLOPE)

Per-fold metrics at cut-off k, from the top-k lists L_u of the fold's users U (empty slots
left out)::

    Coverage@k     = |∪_u L_u| / |I_f|
    Popularity@k   = Σ_u Σ_{i ∈ L_u} c_i / Σ_u |L_u|      (mean popularity of a recommended slot)
    Gini@k         = Σ_{r=1..n} (2r − n − 1) e_(r) / (n Σ_r e_(r)),  n = |I_f|,
                     e_i = |{u : i ∈ L_u}| the exposure of i, e_(1) ≤ ... ≤ e_(n) sorted;
                     0 = every item shown equally often, → 1 = all exposure on one item
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from sweval.data.log import InteractionLog
from sweval.evaluators.metrics.item_side import category_coverage

#: The recency function's parameters (papers/003 Eq. 1).
THRESHOLD, BASE, SLOPE = 0.8, 0.3, 10.0 / 3.0
#: The per-fold metrics this module computes.
NAMES = ("coverage", "popularity", "gini", "category_coverage")


@dataclass(frozen=True)
class ItemFacts:
    """The training facts of every item code of one fold's log.

    Attributes:
        counts: c_i per item code (0 outside the training data).
        first_seen: t_i per item code (int64 max outside the training data).
        recency: f(i) per item code (0 outside the training data).
        features: (n_items, n_categories) 0/1 categories per item code (``--items``; None
            without).
    """

    counts: NDArray[np.int64]
    first_seen: NDArray[np.int64]
    recency: NDArray[np.float64]
    features: sparse.csr_matrix | None = None

    @property
    def catalogue(self) -> NDArray[np.bool_]:
        """Which item codes are in I_f."""
        return self.counts > 0

    @classmethod
    def of_training(cls, log: InteractionLog, lo: int, hi: int) -> ItemFacts:
        """The facts of the training transactions at log positions [lo, hi) (all before t_f)."""
        item = log.item[lo:hi]
        counts = np.bincount(item, minlength=log.n_items).astype(np.int64)
        first_seen = np.full(log.n_items, np.iinfo(np.int64).max, dtype=np.int64)
        codes, first = np.unique(item, return_index=True)  # the log is time-sorted
        first_seen[codes] = log.timestamp[lo:hi][first]
        weights = np.zeros(log.n_items, dtype=np.float64)
        weights[codes] = recency(first_seen[codes])
        return cls(counts=counts, first_seen=first_seen, recency=weights)


def recency(first_seen: NDArray[np.int64]) -> NDArray[np.float64]:
    """f of items first seen at ``first_seen`` (the whole catalogue I_f): papers/003 Eq. 1."""
    if len(first_seen) == 0:
        return np.zeros(0, dtype=np.float64)
    t_min, t_max = int(first_seen.min()), int(first_seen.max())
    if t_max == t_min:
        return np.ones(len(first_seen), dtype=np.float64)
    scaled = (first_seen - t_min) / float(t_max - t_min)
    return np.where(scaled >= THRESHOLD, 1.0, BASE ** ((THRESHOLD - scaled) * SLOPE))


def recommended_recency(facts: ItemFacts, recommended: NDArray[np.int64]) -> NDArray[np.float64]:
    """f of every recommended item (global codes, −1 = empty slot → 0)."""
    return np.where(recommended >= 0, facts.recency[np.maximum(recommended, 0)], 0.0)


def exposure_metrics(
    recommended: NDArray[np.int64], facts: ItemFacts, ks: list[int], metrics: list[str]
) -> dict[tuple[str, int | None], float]:
    """The chosen metrics of :data:`NAMES` at every k, from the top-k lists of a fold's users.

    Args:
        recommended: (n_users, K) global item codes, best first, −1 = empty slot; K ≥ max(ks).
        facts: the fold's item facts.
        ks: cut-offs.
        metrics: which of :data:`NAMES` (others are ignored; category coverage:
            :mod:`evaluators.metrics.item_side`).
    """
    catalogue = facts.catalogue
    n_catalogue = int(catalogue.sum())
    values: dict[tuple[str, int | None], float] = {}
    for k in ks:
        top = recommended[:, :k]
        shown = top[top >= 0]
        exposure = np.bincount(shown, minlength=len(facts.counts))[catalogue]
        if "coverage" in metrics:
            values[("coverage", k)] = (
                float((exposure > 0).sum()) / n_catalogue if n_catalogue else np.nan
            )
        if "popularity" in metrics:
            values[("popularity", k)] = float(facts.counts[shown].mean()) if len(shown) else np.nan
        if "gini" in metrics:
            values[("gini", k)] = gini(exposure)
    if "category_coverage" in metrics:
        if facts.features is None:
            raise ValueError("category_coverage needs the item features (--items)")
        covered = category_coverage(recommended, facts.features, catalogue, ks)
        values |= {("category_coverage", k): value for k, value in covered.items()}
    return values


def gini(exposure: NDArray[np.int64]) -> float:
    """The Gini coefficient of ``exposure`` (NaN when nothing is exposed)."""
    n = len(exposure)
    total = float(exposure.sum())
    if n == 0 or total == 0:
        return np.nan
    ranked = np.sort(exposure).astype(np.float64)
    weights = 2.0 * np.arange(1, n + 1) - n - 1
    return float((weights * ranked).sum() / (n * total))
