"""Comparison protocols (SPEC §7) behind one interface, and the future-item leakage diagnostic.

Every protocol cuts the log into *splits*. A split is what one model is fitted on and measured
against: training data, the evaluated users, their relevant items, and per user the *reference
time* of the test instance (for the leakage diagnostic). Every protocol's results go into the same
long table as SW-EVAL (SPEC §8, :mod:`evaluators.run.results`), so they can be compared row by row.

=====================  =====================================================  ==================
protocol               split(s)                                               global timeline
=====================  =====================================================  ==================
``sw-eval``            the engine's folds: train t < t_f, test [t_f, t_f+tΔ)   observed
``temporal-global``    one fold: train t < t_c, test t ≥ t_c                   observed
``leave-last-one-out`` each user's latest transaction held out                 ignored (leaks)
``loocv``              one uniformly random transaction per user held out,     ignored (leaks)
                       repeated with seeds 0..n-1
``random-split``       a random share of each user's transactions held out    ignored (leaks)
``temporal-user``      the latest share of each user's transactions held out  ignored (leaks)
``leave-last-basket``  each user's last basket (``--basket-col``) held out    ignored (leaks)
=====================  =====================================================  ==================

``random-split`` and ``temporal-user`` (papers/002) hold out ⌊share·n_u + ½⌋ of each user's n_u ≥ 2
transactions, at least one and at most n_u − 1 (``--split-ratio``, default 0.2); Rel_u is the
held-out items, the reference time (leakage) the earliest held-out transaction.

Hold-out protocols (``loocv``, ``leave-last-one-out``)::

    user u (≥ 2 transactions):  ●──────●─────────○──────●     ○ = held out: Rel_u = {item}
    user v (1 transaction):     ●                               stays in training, not evaluated
    training = D minus the held-out transactions (future ones included: the leak)
    candidates = items of the training data minus u's training items (SPEC §3)

Fold-based protocols (``sw-eval``, ``temporal-global``) are evaluated by the engine itself
(:func:`evaluators.units.engine.evaluate_unit`), so ``sw-eval`` rows are exactly those of ``sweval run``.

Leakage diagnostic (papers/000, Table 4): an item's *first appearance* is its first timestamp in
the whole log D. A recommended item is a *future item* for user u when its first appearance is
after u's reference time: the held-out transaction's timestamp in hold-out protocols, the user's
earliest test transaction in fold-based ones (the strictest choice). Fold-based protocols train
on t < t_f only, so their count is zero by construction; it is computed anyway, as a check.

POP-N (``pop-n``) needs "the last N transactions before the cut-off". LOOCV has no time at all
(SPEC §7): POP-N is skipped there, with the reason in the table. Leave-last-one-out keeps the
timestamps, so POP-N is *evaluated* there on the last N training transactions, which lie at the
end of the log, after most users' held-out transaction: its leakage shows in the diagnostic.

This module is library code: no orchestration or tracking imports.
"""

from __future__ import annotations

import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.metrics.ranking import Relevance
from sweval.evaluators.protocols.folds import Fold, build_folds
from sweval.evaluators.protocols.splits import (
    Split,
    fold_splits,
    holdout_positions,
    holdout_split,
    last_basket_positions,
    share_positions,
)
from sweval.evaluators.protocols.windows import WindowSpec

_log = logging.getLogger(__name__)

#: Every protocol, in display order.
PROTOCOLS: tuple[str, ...] = (
    "sw-eval", "loocv", "leave-last-one-out", "temporal-global", "random-split", "temporal-user",
    "leave-last-basket",
)
#: Algorithms whose definition needs the global timeline (a cut-off time).
TIME_DEPENDENT: frozenset[str] = frozenset({"pop-n"})
#: The default share of the log's time span that ``temporal-global`` tests on (002 paper).
TEST_SHARE = 0.2


def default_cutoff(log: InteractionLog, test_share: float = TEST_SHARE) -> int:
    """t_c: the start of the last ``test_share`` s of the time span, t_min + ⌈(1−s)·span⌉."""
    span = log.t_max - log.t_min
    return log.t_min + int(np.ceil((1.0 - test_share) * span))


# ---------------------------------------------------------------------- protocols
class Protocol(ABC):
    """A way to cut a log into train/test splits.

    Subclasses set ``name`` and implement :meth:`splits`.
    """

    name: ClassVar[str]
    #: Whether time-dependent algorithms (POP-N) are defined under the protocol.
    defines_time: ClassVar[bool] = True

    @abstractmethod
    def splits(self, log: InteractionLog) -> Iterator[Split]:
        """The protocol's splits of ``log``, in order."""

    def describe(self) -> dict[str, Any]:
        """The protocol's parameters (recorded with its results)."""
        return {}

    def unsupported(self, algorithm: str) -> str | None:
        """Why ``algorithm`` is not evaluated under this protocol, or None."""
        if not self.defines_time and algorithm in TIME_DEPENDENT:
            # results.csv's skip_reason, which scripts match: change it only with a CHANGELOG note
            return (f"{algorithm} needs the global timeline; not defined under {self.name} "
                    "(docs/compare.md)")
        return None


class _FoldProtocol(Protocol):
    """A protocol whose splits are engine folds, evaluated by the engine itself."""


    def __init__(self, relevance: Relevance = "all") -> None:
        self.relevance = relevance

    @abstractmethod
    def folds(self, log: InteractionLog) -> list[Fold]: ...

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        yield from fold_splits(log, self.folds(log), self.relevance)


class SlidingWindow(_FoldProtocol):
    """``sw-eval``: the engine's folds (SPEC §2), e.g. ``make_plan(config).folds``."""

    name: ClassVar[str] = "sw-eval"

    def __init__(self, folds: Sequence[Fold], relevance: Relevance = "all", *,
                 splits: Sequence[Split] | None = None) -> None:
        super().__init__(relevance)
        self._folds = list(folds)
        self._splits = None if splits is None else list(splits)

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        """The folds' splits: the ones given (a run's plan's: their units are the run's), else
        cut from ``log``."""
        if self._splits is not None:
            yield from self._splits
        else:
            yield from super().splits(log)

    @classmethod
    def from_spec(cls, log: InteractionLog, spec: WindowSpec, *, u_min: int,
                  relevance: Relevance = "all") -> SlidingWindow:
        return cls(build_folds(log, spec, u_min=u_min), relevance)

    def folds(self, log: InteractionLog) -> list[Fold]:
        return self._folds

    def describe(self) -> dict[str, Any]:
        return {"folds": len(self._folds), "relevance": self.relevance}


class TemporalGlobal(_FoldProtocol):
    """``temporal-global``: one cut-off t_c; train on t < t_c, test on t ≥ t_c (SPEC §7).

    Args:
        start: t_c in epoch seconds; None = :func:`default_cutoff`.
        train_window_s: keep only t_c − L ≤ t < t_c for training (SPEC §2), or None.
        u_min: skip the split with fewer eligible users.
        relevance: ``all`` or ``first`` (SPEC §4).
    """

    name: ClassVar[str] = "temporal-global"

    def __init__(self, *, start: int | None = None, train_window_s: int | None = None,
                 u_min: int = 0, relevance: Relevance = "all") -> None:
        super().__init__(relevance)
        self.start = start
        self.train_window_s = train_window_s
        self.u_min = u_min

    def cutoff(self, log: InteractionLog) -> int:
        return self.start if self.start is not None else default_cutoff(log)

    def folds(self, log: InteractionLog) -> list[Fold]:
        t_c = self.cutoff(log)
        if t_c > log.t_max:
            raise SwevalError(
                f"{log.source}: temporal-global cut-off {t_c} is after the last event "
                f"({log.t_max}); nothing is left to test on. Choose an earlier --start."
            )
        spec = WindowSpec(width_s=log.t_max + 1 - t_c, n_folds=1, start=t_c,
                          train_window_s=self.train_window_s)
        return build_folds(log, spec, u_min=self.u_min)

    def describe(self) -> dict[str, Any]:
        return {"start": self.start, "train_window_s": self.train_window_s,
                "relevance": self.relevance}


class LeaveLastOneOut(Protocol):
    """``leave-last-one-out``: each user's latest transaction is held out (papers/000)."""

    name: ClassVar[str] = "leave-last-one-out"

    def __init__(self, *, u_min: int = 0) -> None:
        self.u_min = u_min

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        yield holdout_split(log, holdout_positions(log, "last"), index=0, u_min=self.u_min,
                            definition={"kind": self.name})


#: More LOOCV repetitions than this is a typing slip, not an experiment (each is a full fit).
MAX_LOOCV_REPEATS = 10_000


def check_loocv_repeats(repeats: int) -> None:
    """Raises:
        SwevalError: ``--loocv-repeats`` outside 1 … :data:`MAX_LOOCV_REPEATS`."""
    if not 1 <= repeats <= MAX_LOOCV_REPEATS:
        raise SwevalError(
            f"--loocv-repeats must be between 1 and {MAX_LOOCV_REPEATS:,}, got {repeats}.")


def check_split_seed(seed: int) -> None:
    """Raises:
        SwevalError: a negative ``--split-seed`` (numpy's generators take seeds ≥ 0)."""
    if seed < 0:
        raise SwevalError(f"--split-seed must be ≥ 0, got {seed}.")


class LOOCV(Protocol):
    """``loocv``: n repetitions, seeds 0..n−1, one random transaction per user held out."""

    name: ClassVar[str] = "loocv"
    defines_time: ClassVar[bool] = False

    def __init__(self, *, repeats: int = 10, u_min: int = 0) -> None:
        check_loocv_repeats(repeats)
        self.repeats = repeats
        self.u_min = u_min

    @property
    def seeds(self) -> list[int]:
        return list(range(self.repeats))

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        for seed in self.seeds:
            held = holdout_positions(log, "random", seed=seed)
            yield holdout_split(log, held, index=seed, u_min=self.u_min,
                                definition={"kind": self.name, "seed": seed})

    def describe(self) -> dict[str, Any]:
        return {"repeats": self.repeats, "seeds": self.seeds}


class _ShareProtocol(Protocol):
    """A share of each user's transactions held out (002's per-user splits)."""

    how: ClassVar[str]

    def __init__(self, *, share: float = 0.2, seed: int = 0, u_min: int = 0) -> None:
        if not 0 < share < 1:
            raise SwevalError(f"--split-ratio must be between 0 and 1 (exclusive), got {share}.")
        check_split_seed(seed)
        self.share = share
        self.seed = seed
        self.u_min = u_min

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        held = share_positions(log, self.share, self.how, seed=self.seed)
        definition: dict[str, Any] = {"kind": self.name, "share": self.share}
        if self.how == "random":
            definition["seed"] = self.seed
        yield holdout_split(log, held, index=0, u_min=self.u_min, definition=definition)

    def describe(self) -> dict[str, Any]:
        return {"share": self.share} | ({"seed": self.seed} if self.how == "random" else {})


class RandomSplit(_ShareProtocol):
    """``random-split``: a random share of each user's transactions held out (002)."""

    name: ClassVar[str] = "random-split"
    defines_time: ClassVar[bool] = False
    how: ClassVar[str] = "random"


class TemporalUser(_ShareProtocol):
    """``temporal-user``: the latest share of each user's transactions held out (002)."""

    name: ClassVar[str] = "temporal-user"
    how: ClassVar[str] = "last"


class LeaveLastBasket(Protocol):
    """``leave-last-basket``: each user's last basket held out (papers/002; ``--basket-col``)."""

    name: ClassVar[str] = "leave-last-basket"

    def __init__(self, *, u_min: int = 0) -> None:
        self.u_min = u_min

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        held = last_basket_positions(log)
        assert log.basket is not None and log.basket_ids is not None
        baskets = hashlib.sha256(np.asarray(log.basket_ids, dtype=str)[log.basket]
                                 .astype("U").tobytes()).hexdigest()[:16]
        yield holdout_split(log, held, index=0, u_min=self.u_min,
                            definition={"kind": self.name, "baskets": baskets})


class GivenSplits(Protocol):
    """Splits built elsewhere under a protocol's name: ``sw-eval``'s per-policy folds from the
    run's plan (so a stratum's units are those of ``sweval run --stratify-by``)."""

    def __init__(self, name: str, splits: Sequence[Split], *, defines_time: bool = True) -> None:
        self.name = name  # type: ignore[misc]
        self.defines_time = defines_time  # type: ignore[misc]
        self._splits = list(splits)

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        yield from self._splits


def for_stratum(protocol: Protocol, log: InteractionLog) -> Protocol:
    """``protocol`` as it runs on one policy's sub-log of ``log`` (SPEC §6 mode ``subset``):
    the same rule, with ``temporal-global``'s cut-off fixed from the whole log so that every
    stratum is cut at the same instant."""
    if isinstance(protocol, TemporalGlobal):
        return TemporalGlobal(start=protocol.cutoff(log), train_window_s=protocol.train_window_s,
                              u_min=protocol.u_min, relevance=protocol.relevance)
    return protocol


def parse_protocols(names: Sequence[str]) -> list[str]:
    """Validate a protocol list (``--protocols sw-eval,loocv``).

    Raises:
        SwevalError: empty, unknown or repeated names.
    """
    names = [name.strip() for name in names if name.strip()]
    if not names:
        raise SwevalError(f"--protocols: give at least one of {', '.join(PROTOCOLS)}.")
    unknown = [name for name in names if name not in PROTOCOLS]
    if unknown:
        raise SwevalError(
            f"--protocols: unknown protocol(s) {', '.join(map(repr, unknown))}; "
            f"available: {', '.join(PROTOCOLS)}."
        )
    if len(set(names)) != len(names):
        raise SwevalError(f"--protocols: a protocol is listed twice: {names}.")
    return names

