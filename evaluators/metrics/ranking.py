"""Ranking metrics per user (SPEC §4).

For an eligible user u with relevant set Rel_u and list Rec_u (top-K, K ≥ every k asked for):

- Recall@k      = |Rel_u ∩ Rec_u,k| / |Rel_u|                (denominator |Rel_u|, not min(k, |Rel_u|))
- HitRate@k     = 1 if |Rel_u ∩ Rec_u,k| > 0 else 0
- NDCG@k        = DCG@k / IDCG@k,  DCG@k = Σ_{j<k} hit_j / log2(j + 2),
                  IDCG@k = Σ_{j < min(k, |Rel_u|)} 1 / log2(j + 2)
- R-precision   = |Rel_u ∩ Rec_u,|Rel_u|| / |Rel_u|          (k = |Rel_u| per user)

A fold's value is the mean over its eligible users; a run's value is the mean of its folds.

``--metrics`` adds (docs/protocol.md §4b; :mod:`evaluators.metrics.user_metrics`, :mod:`evaluators.metrics.exposure`),
with hit_j = 1[Rec_u[j] ∈ Rel_u], ranks j = 0..K−1:

- Precision@k         = Σ_{j<k} hit_j / k
- Recall (capped)@k   = Σ_{j<k} hit_j / min(k, |Rel_u|)
- MRR@k               = 1 / (r + 1), r the first j < k with hit_j = 1; 0 without one
- Recency@k           = Σ_{j<k} hit_j · f(Rec_u[j]), f = papers/003 Eq. 1 on the fold's catalogue:
                        s_i = (t_i − t_min)/(t_max − t_min), t_i = i's first training interaction;
                        f = 1 if s_i ≥ 0.8 else 0.3 ** ((0.8 − s_i)·10/3)
- per fold, from all top-k lists L_u over the catalogue I_f (items with training interactions):
  Coverage@k   = |∪ L_u| / |I_f|;  Popularity@k = mean training count of a recommended slot;
  Gini@k       = Σ_r (2r − n − 1) e_(r) / (n Σ e), e_i = lists holding i, sorted, n = |I_f|

Relevance: ``all`` takes every item u interacted with in the test window; ``first`` only the
first one (ties by row order), so |Rel_u| = 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog

Relevance = Literal["all", "first"]
#: Display labels, e.g. ``Recall@10``.

@dataclass(frozen=True, slots=True)
class RelevantSets:
    """The relevant items of a set of users, as a CSR-like structure.

    Attributes:
        users: global user codes, ascending.
        indptr: user j's items are ``items[indptr[j]:indptr[j+1]]``.
        items: global item codes, ascending and distinct within each user (:func:`hit_matrix`
            finds the hits by binary search).

    Raises:
        ValueError: a user's items out of order or repeated.
    """

    users: NDArray[np.int64]
    indptr: NDArray[np.int64]
    items: NDArray[np.int64]

    def __post_init__(self) -> None:
        step = np.diff(self.items)
        starts = self.indptr[1:-1]  # where a user's items begin (the step into them is free)
        ordered = step > 0
        ordered[starts[(starts > 0) & (starts < len(self.items))] - 1] = True
        if not ordered.all():
            raise ValueError("RelevantSets: each user's items must be ascending and distinct")

    @property
    def sizes(self) -> NDArray[np.int64]:
        return np.diff(self.indptr)


def relevant_sets(
    log: InteractionLog, lo: int, hi: int, users: NDArray[np.int64], relevance: Relevance
) -> RelevantSets:
    """Rel_u for the given (ascending) users from the test transactions at positions [lo, hi)."""
    if relevance not in ("all", "first"):
        raise SwevalError(f"--relevance must be 'all' or 'first', not {relevance!r}.")
    user = log.user[lo:hi]
    item = log.item[lo:hi]
    wanted = np.isin(user, users)
    user, item = user[wanted], item[wanted]
    if relevance == "first":
        _, first = np.unique(user, return_index=True)  # log order = time, then row order
        user, item = user[first], item[first]
    else:
        key = np.unique(user * np.int64(log.n_items) + item)
        user, item = key // log.n_items, key % log.n_items
    order = np.lexsort((item, user))
    user, item = user[order], item[order]
    counts = np.bincount(np.searchsorted(users, user), minlength=len(users))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return RelevantSets(users=users, indptr=indptr, items=item)


def hit_matrix(
    recommended: NDArray[np.int64], relevant: RelevantSets, n_items: int
) -> NDArray[np.bool_]:
    """hits[j, r] = whether the r-th recommended item (global code, -1 = none) of user j is relevant."""
    n, width = recommended.shape
    owner = np.repeat(np.arange(len(relevant.users), dtype=np.int64), relevant.sizes)
    relevant_keys = owner * np.int64(n_items) + relevant.items  # sorted (lexsort above)
    rec_keys = np.arange(n, dtype=np.int64)[:, None] * np.int64(n_items) + recommended
    pos = np.searchsorted(relevant_keys, rec_keys)
    pos = np.minimum(pos, max(len(relevant_keys) - 1, 0))
    if len(relevant_keys) == 0:
        return np.zeros((n, width), dtype=bool)
    return (relevant_keys[pos] == rec_keys) & (recommended >= 0)


def per_user_metrics(
    hits: NDArray[np.bool_], n_relevant: NDArray[np.int64], ks: list[int]
) -> dict[tuple[str, int | None], NDArray[np.float64]]:
    """Every SPEC §4 metric per user.

    Args:
        hits: (n, K) hit indicators of the ranked lists, K ≥ max(ks).
        n_relevant: |Rel_u| per user (≥ 1).
        ks: cut-offs.

    Returns:
        ``{(metric, k): values}``; R-precision has k = None.
    """
    n, width = hits.shape
    if width < max(ks):
        raise ValueError("lists are shorter than the largest k")
    n_rel = n_relevant.astype(np.float64)
    cumulative = np.cumsum(hits, axis=1, dtype=np.float64)
    discount = 1.0 / np.log2(np.arange(width) + 2.0)
    dcg_cumulative = np.cumsum(hits * discount, axis=1)
    ideal_cumulative = np.cumsum(discount)
    values: dict[tuple[str, int | None], NDArray[np.float64]] = {}
    for k in ks:
        hits_at_k = cumulative[:, k - 1] if k > 0 else np.zeros(n)
        values[("recall", k)] = hits_at_k / n_rel
        values[("hit_rate", k)] = (hits_at_k > 0).astype(np.float64)
        ideal = ideal_cumulative[np.minimum(k, n_relevant) - 1]
        values[("ndcg", k)] = dcg_cumulative[:, k - 1] / ideal
    depth = np.minimum(n_relevant, width) - 1
    values[("r_precision", None)] = cumulative[np.arange(n), depth] / n_rel
    return values
