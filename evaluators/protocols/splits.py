"""Splits: what one model is fitted on and measured against, for every protocol.

A split holds its training data (built lazily), the evaluated users and their relevant items
Rel_u, per user the reference time of the test instance (for the leakage diagnostic), and its
*definition*: everything that determines its content, which goes into the keys of its units.

Window splits (``sw-eval`` folds, the ``temporal-global`` cut-off)::

    D_{t_f} = {t < t_f} (or t_f − L ≤ t < t_f)   training
    [t_f, t_f + tΔ)                              test window, eligible users U_f
    definition: bounds, training window, relevance, stratum, hash of the log before t_f + tΔ

A window split's *cold* twin (``--cold-users``, :func:`cold_split`) evaluates the window's users
without training history on the same training data; its definition adds ``users: first-time``.

Hold-out splits (``loocv`` seed s, ``leave-last-one-out``)::

    training = D minus one held-out transaction per user with ≥ 2 transactions
    definition: the rule and seed, hash of the whole log
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweval.algorithms.train_data import TrainData
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.metrics.ranking import Relevance, RelevantSets, relevant_sets
from sweval.evaluators.protocols.folds import Fold


@dataclass(eq=False)
class Split:
    """One train/test split of a protocol.

    Quacks like a :class:`~evaluators.protocols.folds.Fold` for :mod:`evaluators.run.results` (``index``,
    ``t_start``, ``t_end``, ``n_eligible``, ``skip_reason``).

    Attributes:
        index: fold index (``sw-eval``), repetition seed (``loocv``) or 0.
        t_start, t_end: the span the test instances come from, [t_start, t_end).
        relevant: the evaluated users (ascending global codes) and their Rel_u.
        reference_time: per evaluated user, the time of the test instance (leakage diagnostic).
        skip_reason: why the split is not evaluated (too few users), or None.
        fold: the engine's fold, for fold-based protocols.
        make_train: builds the training data (lazily: resumed or skipped splits never need it).
        definition: what determines the split's content, for unit keys
            (:mod:`evaluators.units.unit`): its kind, bounds or seed, relevance, stratum, and the
            fingerprint of the data it reads.
        log: the log the split cuts (a stratum's sub-log for stratified splits).
        cold: the evaluated users have no training history (``--cold-users``): models rank
            for them through :meth:`~algorithms.base.Algorithm.recommend_cold`.
    """

    index: int
    t_start: int
    t_end: int
    relevant: RelevantSets
    reference_time: NDArray[np.int64]
    make_train: Callable[[], TrainData]
    definition: dict[str, Any]
    log: InteractionLog
    skip_reason: str | None = None
    fold: Fold | None = None
    cold: bool = False

    @property
    def users(self) -> NDArray[np.int64]:
        return self.relevant.users

    @property
    def n_eligible(self) -> int:
        return len(self.relevant.users)

    @property
    def skipped(self) -> bool:
        return self.skip_reason is not None

    @cached_property
    def train(self) -> TrainData:
        """The training data, built once and shared by the split's units until
        :meth:`release`."""
        return self.make_train()

    def release(self) -> None:
        """Drop the training data (a plan keeps every split: memory stays one fold's)."""
        self.__dict__.pop("train", None)

    def summary(self) -> dict[str, object]:
        return {
            "fold": self.index,
            "t_start": self.t_start,
            "t_end": self.t_end,
            "n_eligible": self.n_eligible,
            "skipped": self.skipped,
            "skip_reason": self.skip_reason or "",
        }


def item_first_seen(log: InteractionLog) -> NDArray[np.int64]:
    """First timestamp of every item code in the whole log (int64 max for absent codes)."""
    first = np.full(log.n_items, np.iinfo(np.int64).max, dtype=np.int64)
    codes, positions = np.unique(log.item, return_index=True)  # the log is time-sorted
    first[codes] = log.timestamp[positions]
    return first


def _user_positions(
    log: InteractionLog,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """(positions grouped by user in time order, start of each user's group, count per user)."""
    counts = np.bincount(log.user, minlength=log.n_users).astype(np.int64)
    order = np.argsort(log.user, kind="stable").astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return order, starts, counts


def holdout_positions(log: InteractionLog, how: str, seed: int | None = None) -> NDArray[np.int64]:
    """Log positions of the held-out transactions, one per user with ≥ 2 transactions.

    Args:
        log: the log.
        how: ``last``: each user's latest transaction (ties in t: the later row, i.e. the later
            log position); ``random``: one uniformly random transaction per user, drawn as
            ``np.random.default_rng(seed).integers(0, n_u)`` over the users in code order, the
            index counting the user's transactions in log (time) order.
        seed: the repetition's seed (``random`` only).

    Returns:
        positions, ordered by user code (so the users are ascending).
    """
    order, starts, counts = _user_positions(log)
    users = np.flatnonzero(counts >= 2)
    if how == "last":
        offset = counts[users] - 1
    elif how == "random":
        rng = np.random.default_rng(seed)
        offset = rng.integers(0, counts[users]) if len(users) else np.zeros(0, dtype=np.int64)
    else:
        raise ValueError(f"unknown hold-out rule {how!r}")
    return order[starts[users] + offset]


def held_out_count(counts: NDArray[np.int64], share: float) -> NDArray[np.int64]:
    """How many of n_u transactions a ``share`` holds out: ⌊share·n_u + ½⌋, at least 1 and at
    most n_u − 1 (computed exactly on the decimal share: 0.2 · 5 is 1, not 0.999...)."""
    numerator, denominator = Fraction(str(share)).limit_denominator(10**9).as_integer_ratio()
    n = (2 * numerator * counts + denominator) // (2 * denominator)
    return np.clip(n, 1, np.maximum(counts - 1, 1)).astype(np.int64)


def share_positions(
    log: InteractionLog, share: float, how: str, seed: int | None = None
) -> NDArray[np.int64]:
    """Log positions held out per user with ≥ 2 transactions: :func:`held_out_count` of them.

    Args:
        share: the test share of each user's transactions, in (0, 1).
        how: ``last``: the user's latest ones (ties in t: the later rows), 002's temporal-user
            split; ``random``: uniformly random ones, 002's random split: every transaction
            gets a key from ``np.random.default_rng(seed).random`` in (user, time) order and a
            user's transactions with the smallest keys are held out.
        seed: the draw's seed (``random`` only).
    """
    order, starts, counts = _user_positions(log)
    users = np.flatnonzero(counts >= 2)
    n_held = held_out_count(counts[users], share)
    owner = np.repeat(np.arange(log.n_users, dtype=np.int64), counts)  # user of order[i]
    rank = np.arange(len(order), dtype=np.int64) - starts[owner]  # index within the user
    if how == "last":
        from_end = counts[owner] - 1 - rank
        chosen = np.zeros(log.n_users, dtype=np.int64)
        chosen[users] = n_held
        return np.sort(order[from_end < chosen[owner]])
    if how == "random":
        keys = np.random.default_rng(seed).random(len(order))
        by_key = np.lexsort((keys, owner))  # per user, smallest keys first
        position_in_user = np.empty(len(order), dtype=np.int64)
        position_in_user[by_key] = rank
        chosen = np.zeros(log.n_users, dtype=np.int64)
        chosen[users] = n_held
        return np.sort(order[position_in_user < chosen[owner]])
    raise ValueError(f"unknown hold-out rule {how!r}")


def last_basket_positions(log: InteractionLog) -> NDArray[np.int64]:
    """Log positions of each user's last basket: every transaction of the user whose basket is
    that of the user's latest transaction (ties in t: the later row), for the users with ≥ 2
    baskets (papers/002's leave-one-last-basket). Baskets are the ``--basket-col`` labels, per
    user: two users' baskets with one label are two baskets.

    Raises:
        SwevalError: the log has no basket column.
    """
    if log.basket is None:
        raise SwevalError(
            f"{log.source}: leave-last-basket needs the basket or session of each transaction; "
            "name its column with --basket-col."
        )
    last = np.full(log.n_users, -1, dtype=np.int64)
    last[log.user] = np.arange(len(log), dtype=np.int64)  # later rows win
    pairs = np.unique(log.user * np.int64(len(log.basket_ids)) + log.basket)
    n_baskets = np.bincount(pairs // len(log.basket_ids), minlength=log.n_users)
    users = np.flatnonzero(n_baskets >= 2)
    last_basket = np.full(log.n_users, -1, dtype=np.int64)
    last_basket[users] = log.basket[last[users]]
    return np.flatnonzero(log.basket == last_basket[log.user])


def holdout_split(
    log: InteractionLog, held: NDArray[np.int64], *, index: int, u_min: int,
    definition: dict[str, Any], cutoff: int | None = None,
) -> Split:
    """The split that trains on D minus ``held`` and tests on the held-out transactions.

    Args:
        log: the log.
        held: positions of the held-out transactions, one or more per evaluated user, in any
            order. A user's Rel_u is the distinct items of their held-out transactions; their
            reference time is the earliest of them.
        index: the split's label.
        u_min: the split is skipped with fewer evaluated users.
        definition: the hold-out rule (``{"kind": "loocv", "seed": 3}``); the whole log's
            fingerprint is added (a hold-out split reads all of it).
        cutoff: the training data's "now" (t_f of a model that reads the time: decay-pop),
            after every transaction of ``log``; default one second after its last one.
    """
    held = np.asarray(held, dtype=np.int64)
    held = held[np.lexsort((held, log.user[held]))]  # by user, then time
    pair_user, pair_item = log.user[held], log.item[held]
    key = pair_user * np.int64(max(log.n_items, 1)) + pair_item
    # a repeated (user, item) counts once; np.unique orders the pairs by (user, item), the
    # order RelevantSets needs (items ascending within each user)
    _, distinct = np.unique(key, return_index=True)
    users, starts = np.unique(pair_user, return_index=True)
    item_users = pair_user[distinct]
    relevant = RelevantSets(
        users=users.astype(np.int64),
        indptr=np.searchsorted(item_users, np.append(users, np.iinfo(np.int64).max),
                               side="left").astype(np.int64),
        items=pair_item[distinct].astype(np.int64),
    )
    reference_time = log.timestamp[held[starts]].astype(np.int64)
    now = log.t_max + 1 if cutoff is None else int(cutoff)

    def make_train() -> TrainData:
        keep = np.ones(len(log), dtype=bool)
        keep[held] = False
        # Hold-out protocols train on the whole log minus the held-out rows, later ones too:
        # the cut-off is the end of the log, not the test instance's time (their leakage).
        return TrainData.from_codes(
            log.user[keep], log.item[keep], n_users=log.n_users, n_items=log.n_items,
            timestamps=log.timestamp[keep], cutoff=now,
            raw_user_ids=log.user_ids, raw_item_ids=log.item_ids,
        )

    reason = None
    if len(users) < u_min:
        reason = f"n_eligible={len(users)} < u_min={u_min}"
    return Split(
        index=index,
        t_start=log.t_min,
        t_end=log.t_max + 1,
        relevant=relevant,
        reference_time=reference_time,
        make_train=make_train,
        definition={**definition, "data": log.fingerprint()},
        log=log,
        skip_reason=reason,
    )


def fold_splits(
    log: InteractionLog,
    folds: Sequence[Fold],
    relevance: Relevance,
    *,
    stratum: str = "all",
    stratify_mode: str | None = None,
    incremental: bool = True,
    cooccurrence: bool = False,
    repeats: bool = False,
) -> list[Split]:
    """The splits of engine folds; a user's reference time is their first test transaction.

    A fold's data fingerprint covers the transactions before its end only: its training data,
    test window and eligible users lie there, so the same window of a grown log is the same
    split. The ``all`` stratum's leaves out the policies (nothing of it reads them), so a run
    with ``--stratify-by`` and one without share those units.

    With ``incremental`` (the default) the splits share one
    :class:`~evaluators.protocols.training_state.IncrementalTraining`: a fold's training data is advanced
    from the previous fold's when the folds are asked for in order, and is identical to the one
    built from scratch (``incremental=False``, ``--no-incremental``), which is what any other
    order gets. ``cooccurrence`` (a run with item-kNN) makes the advanced folds carry the item
    co-occurrence counts too (:attr:`TrainData.cooccurrence`). ``repeats`` (``--repeats``)
    keeps each user's training items as candidates: the definition then says so (and only
    then, so the other splits keep their keys).
    """
    if incremental:
        from sweval.evaluators.protocols.training_state import IncrementalTraining

        build: Callable[[Fold], TrainData] = IncrementalTraining(
            log, cooccurrence=cooccurrence).train_data
    else:
        build = functools.partial(_from_scratch, log)
    # the whole log's splits read no policy: a stratified run's share its plain run's units
    prefixes = (log.prefix_fingerprints([fold.t_end for fold in folds],
                                        policies=stratum != "all") if len(log) else {})
    return [
        _fold_split(log, fold, relevance, {
            "kind": "window",
            "t_start": fold.t_start,
            "t_end": fold.t_end,
            "train_start": fold.train_start,
            "relevance": relevance,
            "stratum": stratum,
            "stratify_mode": stratify_mode,
            "data": prefixes.get(fold.t_end, ""),
        } | ({"repeats": True} if repeats else {}), build)
        for fold in folds
    ]


def _from_scratch(log: InteractionLog, fold: Fold) -> TrainData:
    return fold.train_data(log)


def _fold_split(
    log: InteractionLog, fold: Fold, relevance: Relevance, definition: dict[str, Any],
    build: Callable[[Fold], TrainData],
) -> Split:
    users = fold.eligible_users
    test_user = log.user[fold.test_lo : fold.test_hi]
    codes, first = np.unique(test_user, return_index=True)  # time order: first = earliest
    earliest = log.timestamp[fold.test_lo + first]
    reference_time = earliest[np.searchsorted(codes, users)] if len(users) else earliest[:0]
    relevant = relevant_sets(log, fold.test_lo, fold.test_hi, users, relevance)
    return Split(
        index=fold.index,
        t_start=fold.t_start,
        t_end=fold.t_end,
        relevant=relevant,
        reference_time=reference_time.astype(np.int64),
        make_train=functools.partial(build, fold),
        definition=definition,
        log=log,
        skip_reason=fold.skip_reason,
        fold=fold,
    )


def cold_users(log: InteractionLog, fold: Fold) -> NDArray[np.int64]:
    """The window's users without a training transaction (ascending global codes): the users
    of [t_f, t_f + tΔ) that are not in U_f."""
    test_users = np.unique(log.user[fold.test_lo : fold.test_hi])
    return np.setdiff1d(test_users, fold.eligible_users, assume_unique=True).astype(np.int64)


def _train_of(split: Split) -> TrainData:
    return split.train


def cold_split(split: Split, u_min: int, relevance: Relevance) -> Split:
    """The cold twin of a window split: the same training data (``split``'s, built once), the
    window's users without training history (:func:`cold_users`) and their Rel_u. Skipped with
    ``split`` (a fold skipped for ``all`` is skipped in every stratum), with fewer than u_min
    such users, or with none."""
    fold = split.fold
    if fold is None:
        raise ValueError("only window splits have cold users")
    log = split.log
    users = cold_users(log, fold)
    relevant = relevant_sets(log, fold.test_lo, fold.test_hi, users, relevance)
    test_user = log.user[fold.test_lo : fold.test_hi]
    codes, first = np.unique(test_user, return_index=True)
    earliest = log.timestamp[fold.test_lo + first]
    reference_time = earliest[np.searchsorted(codes, users)] if len(users) else earliest[:0]
    reason = split.skip_reason
    if reason is None and len(users) < u_min:
        reason = f"n_eligible={len(users)} < u_min={u_min}"
    elif reason is None and len(users) == 0:
        reason = "n_eligible=0: no user without history in this window"
    return Split(
        index=split.index, t_start=split.t_start, t_end=split.t_end, relevant=relevant,
        reference_time=reference_time.astype(np.int64),
        make_train=functools.partial(_train_of, split),
        definition=split.definition | {"users": "first-time"}, log=log,
        skip_reason=reason, fold=fold, cold=True,
    )
