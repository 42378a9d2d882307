"""Computing and measuring one unit: fit on a split's training data, rank, keep the lists.

A unit's numbers come in two steps, so that stored lists serve every later k::

    compute_lists(split, algorithm, depth)   fit on the training data (nothing at or after t_f),
                                             top-``depth`` lists for the evaluated users,
                                             seen items excluded, SPEC tie-break -> UnitLists
    measure(lists, relevant, ks)             Recall/HitRate/NDCG@k and R-precision per user,
                                             from the first list_length(ks) columns

``depth`` is :func:`list_length`: long enough for every k and for R-precision's |Rel_u|, so any
k ≤ depth is measured from the same lists, exactly as if they had been ranked for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from sweval.algorithms.base import Algorithm, WarmState
from sweval.algorithms.train_data import TrainData
from sweval.data.log import InteractionLog
from sweval.evaluators.metrics.ranking import (
    Relevance,
    RelevantSets,
    hit_matrix,
    per_user_metrics,
    relevant_sets,
)
from sweval.evaluators.protocols.folds import Fold


@dataclass(slots=True)
class UnitLists:
    """The ranked lists of one unit: what the unit store keeps.

    Attributes:
        users: global codes of the evaluated users, ascending.
        items: (n_users, depth) global item codes, best first, −1 = no more candidates.
        device: where the model ran.
        timings: seconds spent in ``train_data``, ``fit``, ``recommend``.
        warm_state: the fitted model's state, for the next fold's warm start (or None).
    """

    users: NDArray[np.int64]
    items: NDArray[np.int64]
    device: str = "cpu"
    timings: dict[str, float] = field(default_factory=dict)
    warm_state: WarmState | None = None

    @property
    def depth(self) -> int:
        return int(self.items.shape[1])


@dataclass(slots=True)
class UnitResult:
    """Per-user metric values of one algorithm on one split.

    Attributes:
        fold: the fold or split index.
        algorithm: the algorithm's label.
        users: global codes of the evaluated (eligible) users, ascending.
        values: ``{(metric, k): per-user values}`` aligned with ``users``.
        device: where the model ran.
        timings: seconds spent in ``train_data``, ``fit``, ``recommend``, ``metrics``.
        recommended: the top-K global item codes per user.
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


def compute_lists(
    algorithm: Algorithm,
    train: TrainData,
    users: NDArray[np.int64],
    depth: int,
    *,
    timings: dict[str, float] | None = None,
    cold: bool = False,
    repeats: bool = False,
) -> UnitLists:
    """Fit ``algorithm`` on ``train`` and rank ``depth`` items for each of ``users``.

    Args:
        algorithm: the model (re-fitted; ``warm_`` set beforehand for a warm start).
        train: the training data; a plugin (an algorithm whose class is not SW-EVAL's) fits on
            :meth:`~algorithms.train_data.TrainData.read_only` views of it.
        users: global codes of the users to rank for, ascending.
        depth: list length.
        timings: seconds measured so far (``train_data``), extended.
        cold: the users have no training history (``--cold-users``): ranked by
            :meth:`~algorithms.base.Algorithm.recommend_cold`, every training item a candidate.
        repeats: the users' own training items stay candidates (``--repeats``).
    """
    timings = dict(timings or {})
    clock = time.perf_counter()
    algorithm.fit(handed(algorithm, train))
    timings["fit"] = time.perf_counter() - clock
    return rank_lists(algorithm, train, users, depth, timings=timings, cold=cold,
                      repeats=repeats)


def handed(algorithm: Algorithm, data: TrainData) -> TrainData:
    """``data`` as ``algorithm`` receives it: SW-EVAL's own models the data itself, a plugin
    (a class that is not SW-EVAL's) :meth:`~algorithms.train_data.TrainData.read_only` views."""
    return data if type(algorithm).__module__.startswith("sweval.") else data.read_only()


def rank_lists(
    algorithm: Algorithm,
    train: TrainData,
    users: NDArray[np.int64],
    depth: int,
    *,
    timings: dict[str, float],
    cold: bool = False,
    repeats: bool = False,
) -> UnitLists:
    """The top-``depth`` lists of a fitted (or served) ``algorithm`` for ``users``, whose rows
    are ``train``'s (the data it was fitted on, or the history it serves); ``cold`` and
    ``repeats`` as in :func:`compute_lists`."""
    clock = time.perf_counter()
    if cold:
        columns = algorithm.recommend_cold(len(users), depth)
    else:
        rows = train.rows_of(users)
        columns = (algorithm.recommend(rows, depth, exclude_seen=False) if repeats
                   else algorithm.recommend(rows, depth))
    timings["recommend"] = time.perf_counter() - clock
    items = np.where(columns >= 0, train.item_codes[np.maximum(columns, 0)], -1)
    return UnitLists(
        users=users,
        items=items.astype(np.int64, copy=False),
        device=algorithm.device,
        timings=timings,
        warm_state=algorithm.warm_state() if algorithm.warm_starts else None,
    )


def measure(
    lists: UnitLists,
    relevant: RelevantSets,
    ks: list[int],
    *,
    n_items: int,
    index: int,
    algorithm: str,
) -> UnitResult:
    """Every metric per user from a unit's lists (their first :func:`list_length` columns).

    Raises:
        ValueError: the lists are shorter than the metrics need, or rank other users.
    """
    if not np.array_equal(lists.users, relevant.users):
        raise ValueError("the lists rank other users than the split evaluates")
    depth = list_length(ks, relevant.sizes)
    if lists.depth < depth:
        raise ValueError(f"the lists hold {lists.depth} items, the metrics need {depth}")
    clock = time.perf_counter()
    recommended = lists.items[:, :depth]
    hits = hit_matrix(recommended, relevant, n_items)
    values = per_user_metrics(hits, relevant.sizes, ks)
    timings = dict(lists.timings) | {"metrics": time.perf_counter() - clock}
    return UnitResult(
        fold=index,
        algorithm=algorithm,
        users=relevant.users,
        values=values,
        device=lists.device,
        timings=timings,
        recommended=recommended,
    )


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
    """Fit ``algorithm`` on a fold's training data and measure it on the fold's test window,
    without a store (tests, benchmarks and diagnostics).

    Args:
        log: the whole log.
        fold: a non-skipped fold.
        algorithm: a fresh or previously fitted model (it is re-fitted).
        ks: metric cut-offs.
        relevance: ``all`` or ``first`` (SPEC §4).
        train: the fold's training data when the caller already built it.
        users: evaluate only these eligible users (default: all of U_f).
        keep_lists: also return the recommended lists.
    """
    clock = time.perf_counter()
    if train is None:
        train = fold.train_data(log)
    timings = {"train_data": time.perf_counter() - clock}
    eligible = fold.eligible_users if users is None else users
    relevant = relevant_sets(log, fold.test_lo, fold.test_hi, eligible, relevance)
    lists = compute_lists(
        algorithm, train, relevant.users, list_length(ks, relevant.sizes), timings=timings
    )
    result = measure(
        lists, relevant, ks, n_items=log.n_items, index=fold.index, algorithm=algorithm.name
    )
    if not keep_lists:
        result.recommended = None
    return result
