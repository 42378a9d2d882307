"""Evaluating one (fold, algorithm) unit: fit on D_{t_f}, recommend for U_f, measure.

The unit is the grain of parallelism, persistence and resume: a unit's result depends only on
the log, the fold bounds, the algorithm's config and the metric options, never on other units.

Timeline of a unit::

    fold.train_data(log)      D_{t_f}: positions [train_lo, train_hi), compact index space
    algorithm.fit(train)      sees nothing at or after t_f
    algorithm.recommend(U_f)  top-K columns, seen items excluded, SPEC tie-break
    metrics                   against Rel_u from positions [test_lo, test_hi)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from sweval.algorithms.base import Algorithm, TrainData
from sweval.data.log import InteractionLog
from sweval.evaluators.folds import Fold
from sweval.evaluators.metrics import (
    RelevantSets,
    Relevance,
    hit_matrix,
    per_user_metrics,
    relevant_sets,
)


@dataclass(slots=True)
class UnitResult:
    """Per-user metric values of one algorithm on one fold.

    Attributes:
        fold: the fold index.
        algorithm: the registry name.
        users: global codes of the evaluated (eligible) users, ascending.
        values: ``{(metric, k): per-user values}`` aligned with ``users``.
        device: where the model ran.
        timings: seconds spent in ``train_data``, ``fit``, ``recommend``, ``metrics``.
        recommended: the top-K global item codes per user (kept only when asked for).
    """

    fold: int
    algorithm: str
    users: NDArray[np.int64]
    values: dict[tuple[str, int | None], NDArray[np.float64]]
    device: str = "cpu"
    timings: dict[str, float] = field(default_factory=dict)
    recommended: NDArray[np.int64] | None = None


def list_length(ks: list[int], n_relevant: NDArray[np.int64]) -> int:
    """K: long enough for every k and for R-precision's |Rel_u|."""
    longest = int(n_relevant.max()) if len(n_relevant) else 0
    return max(max(ks), longest)


def evaluate_unit(
    log: InteractionLog,
    fold: Fold,
    algorithm: Algorithm,
    *,
    ks: list[int],
    relevance: Relevance = "all",
    train: TrainData | None = None,
    users: NDArray[np.int64] | None = None,
    keep_lists: bool = False,
) -> UnitResult:
    """Fit ``algorithm`` on the fold's training data and measure it on the fold's test window.

    Args:
        log: the whole log.
        fold: a non-skipped fold.
        algorithm: a fresh or previously fitted model (it is re-fitted).
        ks: metric cut-offs.
        relevance: ``all`` or ``first`` (SPEC §4).
        train: the fold's training data when the caller already built it (shared by algorithms).
        users: evaluate only these eligible users (default: all of U_f).
        keep_lists: also return the recommended lists (for diagnostics).
    """
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    if train is None:
        train = fold.train_data(log)
    timings["train_data"] = time.perf_counter() - clock

    eligible = fold.eligible_users if users is None else users
    relevant = relevant_sets(log, fold.test_lo, fold.test_hi, eligible, relevance)
    return fit_and_measure(
        algorithm, train, relevant, ks=ks, n_items=log.n_items, index=fold.index,
        keep_lists=keep_lists, timings=timings,
    )


def fit_and_measure(
    algorithm: Algorithm,
    train: TrainData,
    relevant: RelevantSets,
    *,
    ks: list[int],
    n_items: int,
    index: int,
    keep_lists: bool = False,
    timings: dict[str, float] | None = None,
) -> UnitResult:
    """Fit on ``train``, recommend for ``relevant.users``, measure against their relevant sets.

    The part every protocol shares (SW-EVAL folds here, hold-out splits in
    :mod:`evaluators.protocols`).

    Args:
        algorithm: the model (re-fitted).
        train: the training data.
        relevant: the evaluated users (all training users) and their relevant items.
        ks: metric cut-offs.
        n_items: size of the global item code space.
        index: the fold or split index recorded in the result.
        keep_lists: also return the recommended lists.
        timings: seconds measured so far (``train_data``), extended in place.
    """
    timings = {} if timings is None else timings
    clock = time.perf_counter()
    algorithm.fit(train)
    timings["fit"] = time.perf_counter() - clock

    depth = list_length(ks, relevant.sizes)
    clock = time.perf_counter()
    columns = algorithm.recommend(train.rows_of(relevant.users), depth)
    timings["recommend"] = time.perf_counter() - clock

    clock = time.perf_counter()
    recommended = np.where(columns >= 0, train.item_codes[np.maximum(columns, 0)], -1)
    hits = hit_matrix(recommended, relevant, n_items)
    values = per_user_metrics(hits, relevant.sizes, ks)
    timings["metrics"] = time.perf_counter() - clock
    return UnitResult(
        fold=index,
        algorithm=algorithm.name,
        users=relevant.users,
        values=values,
        device=algorithm.device,
        timings=timings,
        recommended=recommended if keep_lists else None,
    )
