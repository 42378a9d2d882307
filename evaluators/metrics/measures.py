"""A unit's metrics as the run chose them (``--metrics``), measured from its stored lists.

::

    measure_chosen(lists, split, ks, metrics, facts)
        SPEC §4's metrics (evaluators.units.engine.measure), kept when chosen,
        + the chosen per-user metrics of evaluators.metrics.user_metrics     -> UnitResult
    fold_level(result, facts, ks, metrics)
        the chosen exposure metrics of evaluators.metrics.exposure, for all users or a group of them

With the default metrics this is :func:`~evaluators.units.engine.measure` alone: the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from sweval.data.errors import SwevalError
from sweval.evaluators.metrics.exposure import ItemFacts, exposure_metrics, recommended_recency
from sweval.evaluators.metrics.item_side import ild, novelty
from sweval.evaluators.metrics.names import DEFAULT_METRICS, PER_FOLD
from sweval.evaluators.metrics.ranking import hit_matrix
from sweval.evaluators.metrics.reachable import reachable_sizes, recall_reachable
from sweval.evaluators.metrics.user_metrics import NAMES as USER_METRICS
from sweval.evaluators.metrics.user_metrics import user_metrics
from sweval.evaluators.protocols.splits import Split
from sweval.evaluators.units.engine import UnitLists, UnitResult, measure

#: ``{(metric, k): value}`` of a group of users (None: all of them), per fold.
#: The per-user metrics that read the split's item facts.
FACT_METRICS = ("recency", "recall_reachable", "ild", "novelty")
FoldLevel = Callable[[NDArray[np.bool_] | None], dict[tuple[str, int | None], float]]


def needs_facts(metrics: list[str]) -> bool:
    """Whether the metrics read the fold's item facts (recency, the reachable items,
    the item-side metrics, exposure)."""
    return any(metric in PER_FOLD or metric in FACT_METRICS for metric in metrics)


def split_facts(split: Split) -> ItemFacts:
    """The item facts of a window split's training data (positions before t_f).

    Raises:
        SwevalError: a hold-out split (no t_f to measure item ages against).
    """
    if split.fold is None:
        raise SwevalError(
            "--metrics recency/coverage/popularity/gini need time windows: the split "
            f"{split.definition.get('kind')!r} has no t_f."
        )
    return ItemFacts.of_training(split.log, split.fold.train_lo, split.fold.train_hi)


def measure_chosen(
    lists: UnitLists,
    split: Split,
    ks: list[int],
    metrics: list[str],
    *,
    algorithm: str,
    facts: ItemFacts | None = None,
) -> UnitResult:
    """The chosen per-user metrics of one unit (its lists' first ``list_length`` columns).

    Args:
        lists: the unit's stored lists.
        split: its split.
        ks: cut-offs.
        metrics: the run's ``--metrics``.
        algorithm: the label of the rows.
        facts: the split's item facts (needed for recency).
    """
    result = measure(lists, split.relevant, ks, n_items=split.log.n_items, index=split.index,
                     algorithm=algorithm)
    if metrics == DEFAULT_METRICS:
        return result
    values = {key: value for key, value in result.values.items() if key[0] in metrics}
    extra = [metric for metric in metrics if metric in USER_METRICS]
    if extra:
        assert result.recommended is not None
        hits = hit_matrix(result.recommended, split.relevant, split.log.n_items)
        weights = None
        if "recency" in extra:
            if facts is None:
                raise ValueError("recency needs the split's item facts")
            weights = recommended_recency(facts, result.recommended)
        values |= user_metrics(hits, split.relevant.sizes, ks, extra, recency=weights)
    if "recall_reachable" in metrics:
        if facts is None or split.fold is None or result.recommended is None:
            raise ValueError("recall_reachable needs a window split's item facts")
        fold = split.fold
        reachable = reachable_sizes(
            split.relevant, facts.catalogue, split.log, fold.train_lo, fold.train_hi,
            seen_reachable=bool(split.definition.get("repeats", False)))
        hits = hit_matrix(result.recommended, split.relevant, split.log.n_items)
        values |= recall_reachable(hits, reachable, ks)
    values |= item_side(result.recommended, facts, ks, metrics)
    result.values = values
    return result


def item_side(
    recommended: NDArray[np.int64] | None, facts: ItemFacts | None, ks: list[int],
    metrics: list[str],
) -> dict[tuple[str, int | None], NDArray[np.float64]]:
    """The chosen per-user item-side metrics (ILD@k, Novelty@k) of the lists ``recommended``."""
    values: dict[tuple[str, int | None], NDArray[np.float64]] = {}
    if "ild" not in metrics and "novelty" not in metrics:
        return values
    if facts is None or recommended is None:
        raise ValueError("ild and novelty need the lists and the split's item facts")
    if "ild" in metrics:
        if facts.features is None:
            raise ValueError("ild needs the item features (--items)")
        values |= ild(recommended, facts.features, ks)
    if "novelty" in metrics:
        values |= novelty(recommended, facts.counts, ks)
    return values


def fold_level(
    result: UnitResult, facts: ItemFacts | None, ks: list[int], metrics: list[str]
) -> FoldLevel | None:
    """The chosen exposure metrics of ``result``'s lists, for all users or a mask of them
    (None when no exposure metric is chosen)."""
    chosen = [metric for metric in metrics if metric in PER_FOLD]
    if not chosen:
        return None
    if facts is None or result.recommended is None:
        raise ValueError("exposure metrics need the lists and the split's item facts")
    recommended = result.recommended

    def values(mask: NDArray[np.bool_] | None) -> dict[tuple[str, int | None], float]:
        chosen_lists = recommended if mask is None else recommended[mask]
        return exposure_metrics(chosen_lists, facts, ks, chosen)

    return values
