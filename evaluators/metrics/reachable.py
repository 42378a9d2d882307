r"""What a fold's models can hit at all: the ceiling of each window (docs/protocol.md §4c).

A model for fold f ranks the items of its training data only (SPEC §3), so a relevant item
that first appears at or after t_f can never be hit, whatever the model::

    I_f                   the items with a training interaction (log positions before t_f, or
                          in the --train-window): the candidate catalogue
    unreachable_share_f   = Σ_{u ∈ U_f} |Rel_u \ I_f| / Σ_{u ∈ U_f} |Rel_u|      (folds.csv)
    Reach_u               = Rel_u ∩ I_f, minus u's own training items (the engine drops them;
                          with --repeats they stay candidates, and reachable)
    Recall_reachable@k    = |Rel_u ∩ Rec_u,k| / |Reach_u|    (Recall against the reachable
                          items only; undefined, and left out of the mean, when Reach_u = ∅)

With ``--dedup first`` (the default) Rel_u never holds a training item of u, so Reach_u is
Rel_u ∩ I_f. 1 − unreachable_share_f bounds the fold's micro-averaged recall (relevant
interactions hit over relevant interactions), not the per-user mean Recall@k.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.log import InteractionLog
from sweval.evaluators.metrics.ranking import RelevantSets


def in_catalogue(log: InteractionLog, lo: int, hi: int) -> NDArray[np.bool_]:
    """Per item code, whether it has a training interaction at log positions [lo, hi)."""
    mask = np.zeros(log.n_items, dtype=bool)
    mask[log.item[lo:hi]] = True
    return mask


def unreachable_share(relevant: RelevantSets, catalogue: NDArray[np.bool_]) -> float:
    """Σ_u |Rel_u \\ I_f| / Σ_u |Rel_u| (NaN without any relevant item)."""
    if len(relevant.items) == 0:
        return float("nan")
    return float((~catalogue[relevant.items]).sum() / len(relevant.items))


def reachable_sizes(
    relevant: RelevantSets,
    catalogue: NDArray[np.bool_],
    log: InteractionLog,
    lo: int,
    hi: int,
    *,
    seen_reachable: bool,
) -> NDArray[np.int64]:
    """|Reach_u| per user of ``relevant``: their relevant items in the catalogue, minus their
    own training items at positions [lo, hi) unless ``seen_reachable`` (``--repeats``)."""
    reachable = catalogue[relevant.items]
    if not seen_reachable and len(relevant.items):
        owner = np.repeat(relevant.users, relevant.sizes)
        width = np.int64(max(log.n_items, 1))
        trained = np.unique(log.user[lo:hi] * width + log.item[lo:hi])
        reachable &= ~np.isin(owner * width + relevant.items, trained)
    per_user = np.repeat(np.arange(len(relevant.users)), relevant.sizes)
    return np.bincount(per_user[reachable], minlength=len(relevant.users)).astype(np.int64)


def recall_reachable(
    hits: NDArray[np.bool_], reachable: NDArray[np.int64], ks: list[int]
) -> dict[tuple[str, int | None], NDArray[np.float64]]:
    """Recall_reachable@k per user (NaN where |Reach_u| = 0)."""
    cumulative = np.cumsum(hits, axis=1, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {("recall_reachable", k): np.where(reachable > 0,
                                                  cumulative[:, k - 1] / reachable, np.nan)
                for k in ks}


def ceiling_words(folds: pd.DataFrame) -> str | None:
    """The windows' ceiling: the mean, lowest and highest ``unreachable_share`` of the used
    folds as percentages (None without the column or a value)."""
    if "unreachable_share" not in folds:
        return None
    shares = pd.to_numeric(folds["unreachable_share"], errors="coerce").dropna()
    if shares.empty:
        return None
    return (f"{shares.mean():.1%} of the eligible users' relevant interactions are on items "
            f"new in their window (per fold {shares.min():.1%} to {shares.max():.1%}, "
            "folds.csv's unreachable_share): no model can hit them")
