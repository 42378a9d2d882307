"""Per-user metrics beyond SPEC §4's four (``--metrics``), from a unit's hit matrix.

For an eligible user u with relevant set Rel_u, top-K list Rec_u and hit_j = 1[Rec_u[j] ∈ Rel_u]
(ranks j = 0..K−1, best first; an empty slot is never a hit)::

    Precision@k        = Σ_{j<k} hit_j / k
    Recall (capped)@k  = Σ_{j<k} hit_j / min(k, |Rel_u|)     (1.0 when the top-k is all hits
                                                              or holds all of Rel_u)
    MRR@k              = 1 / (r + 1), r = the first j < k with hit_j = 1; 0 without a hit in
                         the top-k (reciprocal rank of the first hit, cut at k)
    Recency@k          = Σ_{j<k} hit_j · f(Rec_u[j])          (papers/003 §5.4, Eq. 2)

f is the recency function of papers/003 §4.1 (Eq. 1), :func:`evaluators.metrics.exposure.recency`.
Each value is averaged over the fold's users, then over folds, like SPEC §4's metrics.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: The per-user metrics this module computes.
NAMES = ("precision", "recall_capped", "mrr", "recency")


def user_metrics(
    hits: NDArray[np.bool_],
    n_relevant: NDArray[np.int64],
    ks: list[int],
    metrics: list[str],
    *,
    recency: NDArray[np.float64] | None = None,
) -> dict[tuple[str, int | None], NDArray[np.float64]]:
    """The chosen metrics of :data:`NAMES`, per user and k.

    Args:
        hits: (n, K) hit indicators of the ranked lists, K ≥ max(ks).
        n_relevant: |Rel_u| per user (≥ 1).
        ks: cut-offs.
        metrics: which of :data:`NAMES` (others are ignored).
        recency: (n, K) f of each recommended item (0 for an empty slot); needed for
            ``recency``.

    Returns:
        ``{(metric, k): values}``.
    """
    n, width = hits.shape
    if width < max(ks):
        raise ValueError("lists are shorter than the largest k")
    cumulative = np.cumsum(hits, axis=1, dtype=np.float64)
    # rank of the first hit, or K when there is none
    first_hit = np.where(hits.any(axis=1), hits.argmax(axis=1), width)
    values: dict[tuple[str, int | None], NDArray[np.float64]] = {}
    for k in ks:
        hits_at_k = cumulative[:, k - 1]
        if "precision" in metrics:
            values[("precision", k)] = hits_at_k / k
        if "recall_capped" in metrics:
            values[("recall_capped", k)] = hits_at_k / np.minimum(k, n_relevant)
        if "mrr" in metrics:
            values[("mrr", k)] = np.where(first_hit < k, 1.0 / (first_hit + 1.0), 0.0)
        if "recency" in metrics:
            if recency is None:
                raise ValueError("recency needs the recommended items' f values")
            values[("recency", k)] = (hits[:, :k] * recency[:, :k]).sum(axis=1)
    return values
