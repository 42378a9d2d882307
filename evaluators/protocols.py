"""Comparison protocols (SPEC §7) behind one interface, and the future-item leakage diagnostic.

Every protocol cuts the log into *splits*. A split is what one model is fitted on and measured
against: training data, the evaluated users, their relevant items, and per user the *reference
time* of the test instance (for the leakage diagnostic). Every protocol's results go into the same
long table as SW-EVAL (SPEC §8, :mod:`evaluators.results`), so they can be compared row by row.

=====================  =====================================================  ==================
protocol               split(s)                                               global timeline
=====================  =====================================================  ==================
``sw-eval``            the engine's folds: train t < t_f, test [t_f, t_f+tΔ)   observed
``temporal-global``    one fold: train t < t_c, test t ≥ t_c                   observed
``leave-last-one-out`` each user's latest transaction held out                 ignored (leaks)
``loocv``              one uniformly random transaction per user held out,     ignored (leaks)
                       repeated with seeds 0..n-1
=====================  =====================================================  ==================

Hold-out protocols (``loocv``, ``leave-last-one-out``)::

    user u (≥ 2 transactions):  ●──────●─────────○──────●     ○ = held out: Rel_u = {item}
    user v (1 transaction):     ●                               stays in training, not evaluated
    training = D minus the held-out transactions (future ones included: the leak)
    candidates = items of the training data minus u's training items (SPEC §3)

Fold-based protocols (``sw-eval``, ``temporal-global``) are evaluated by the engine itself
(:func:`evaluators.engine.evaluate_unit`), so ``sw-eval`` rows are exactly those of ``sweval run``.

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

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.algorithms.base import Algorithm, TrainData
from sweval.algorithms.registry import build_algorithm
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.engine import UnitResult, evaluate_unit, fit_and_measure
from sweval.evaluators.folds import Fold, build_folds
from sweval.evaluators.metrics import (
    Relevance,
    RelevantSets,
    relevant_sets,
)
from sweval.evaluators.results import COLUMNS, results_frame, skipped_rows, summarise, unit_rows
from sweval.evaluators.store import UnitStore
from sweval.evaluators.windows import WindowSpec

_log = logging.getLogger(__name__)

#: Every protocol, in display order.
PROTOCOLS: tuple[str, ...] = ("sw-eval", "loocv", "leave-last-one-out", "temporal-global")
#: Algorithms whose definition needs the global timeline (a cut-off time).
TIME_DEPENDENT: frozenset[str] = frozenset({"pop-n"})
#: The default share of the log's time span that ``temporal-global`` tests on (002 paper).
TEST_SHARE = 0.2
#: Columns of the leakage table.
LEAKAGE_COLUMNS = [
    "protocol", "fold", "algorithm", "k", "n_lists", "n_recommended", "n_future",
    "share_future", "n_lists_with_future",
]


# ---------------------------------------------------------------------- splits
@dataclass(eq=False)
class Split:
    """One train/test split of a protocol.

    Quacks like a :class:`~evaluators.folds.Fold` for :mod:`evaluators.results` (``index``,
    ``t_start``, ``t_end``, ``n_eligible``, ``skip_reason``).

    Attributes:
        index: fold index (``sw-eval``), repetition seed (``loocv``) or 0.
        t_start, t_end: the span the test instances come from, [t_start, t_end).
        relevant: the evaluated users (ascending global codes) and their Rel_u.
        reference_time: per evaluated user, the time of the test instance (leakage diagnostic).
        skip_reason: why the split is not evaluated (too few users), or None.
        fold: the engine's fold, for fold-based protocols.
        make_train: builds the training data (lazily: resumed or skipped splits never need it).
    """

    index: int
    t_start: int
    t_end: int
    relevant: RelevantSets
    reference_time: NDArray[np.int64]
    make_train: Callable[[], TrainData]
    skip_reason: str | None = None
    fold: Fold | None = None

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
        return self.make_train()

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


def holdout_split(
    log: InteractionLog, held: NDArray[np.int64], *, index: int, u_min: int
) -> Split:
    """The split that trains on D minus ``held`` and tests on the held-out transactions.

    Args:
        log: the log.
        held: positions of the held-out transactions, at most one per user, in user-code order.
        index: the split's label.
        u_min: the split is skipped with fewer evaluated users.
    """
    users = log.user[held]
    if len(users) > 1 and not (np.diff(users) > 0).all():
        raise ValueError("held-out positions must be one per user, in user-code order")
    relevant = RelevantSets(
        users=users.astype(np.int64),
        indptr=np.arange(len(users) + 1, dtype=np.int64),
        items=log.item[held].astype(np.int64),
    )
    reference_time = log.timestamp[held].astype(np.int64)

    def make_train() -> TrainData:
        keep = np.ones(len(log), dtype=bool)
        keep[held] = False
        return TrainData.from_codes(
            log.user[keep], log.item[keep], n_users=log.n_users, n_items=log.n_items
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
        skip_reason=reason,
    )


def fold_split(log: InteractionLog, fold: Fold, relevance: Relevance) -> Split:
    """The split of an engine fold; the reference time of a user is their first test transaction."""
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
        make_train=lambda: fold.train_data(log),
        skip_reason=fold.skip_reason,
        fold=fold,
    )


def default_cutoff(log: InteractionLog, test_share: float = TEST_SHARE) -> int:
    """t_c: the start of the last ``test_share`` s of the time span, t_min + ⌈(1−s)·span⌉."""
    span = log.t_max - log.t_min
    return log.t_min + int(np.ceil((1.0 - test_share) * span))


# ---------------------------------------------------------------------- protocols
class Protocol(ABC):
    """A way to cut a log into train/test splits.

    Subclasses set ``name`` and ``observes_timeline`` and implement :meth:`splits`.
    """

    name: ClassVar[str]
    #: Whether training only ever uses data before every test instance (global timeline).
    observes_timeline: ClassVar[bool]
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
            return (f"{algorithm} needs the global timeline; not defined under {self.name} "
                    "(SPEC §7)")
        return None

    def evaluate(
        self, log: InteractionLog, split: Split, algorithm: Algorithm, ks: list[int]
    ) -> UnitResult:
        """Fit on the split's training data and measure on its relevant sets (lists kept)."""
        return evaluate_split(log, split, algorithm, ks)


class _FoldProtocol(Protocol):
    """A protocol whose splits are engine folds, evaluated by the engine itself."""

    observes_timeline: ClassVar[bool] = True

    def __init__(self, relevance: Relevance = "all") -> None:
        self.relevance = relevance

    @abstractmethod
    def folds(self, log: InteractionLog) -> list[Fold]: ...

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        for fold in self.folds(log):
            yield fold_split(log, fold, self.relevance)

    def evaluate(
        self, log: InteractionLog, split: Split, algorithm: Algorithm, ks: list[int]
    ) -> UnitResult:
        assert split.fold is not None
        return evaluate_unit(
            log, split.fold, algorithm, ks=ks, relevance=self.relevance, train=split.train,
            keep_lists=True,
        )


class SlidingWindow(_FoldProtocol):
    """``sw-eval``: the engine's folds (SPEC §2), e.g. ``make_plan(config).folds``."""

    name: ClassVar[str] = "sw-eval"

    def __init__(self, folds: Sequence[Fold], relevance: Relevance = "all") -> None:
        super().__init__(relevance)
        self._folds = list(folds)

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
    observes_timeline: ClassVar[bool] = False

    def __init__(self, *, u_min: int = 0) -> None:
        self.u_min = u_min

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        yield holdout_split(log, holdout_positions(log, "last"), index=0, u_min=self.u_min)


class LOOCV(Protocol):
    """``loocv``: n repetitions, seeds 0..n−1, one random transaction per user held out."""

    name: ClassVar[str] = "loocv"
    observes_timeline: ClassVar[bool] = False
    defines_time: ClassVar[bool] = False

    def __init__(self, *, repeats: int = 10, u_min: int = 0) -> None:
        if repeats < 1:
            raise SwevalError(f"--loocv-repeats must be at least 1, got {repeats}.")
        self.repeats = repeats
        self.u_min = u_min

    @property
    def seeds(self) -> list[int]:
        return list(range(self.repeats))

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        for seed in self.seeds:
            held = holdout_positions(log, "random", seed=seed)
            yield holdout_split(log, held, index=seed, u_min=self.u_min)

    def describe(self) -> dict[str, Any]:
        return {"repeats": self.repeats, "seeds": self.seeds}


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


# ---------------------------------------------------------------------- evaluation
def evaluate_split(
    log: InteractionLog, split: Split, algorithm: Algorithm, ks: list[int]
) -> UnitResult:
    """The engine's unit steps on an arbitrary split: fit, recommend (batched), measure.

    Mirrors :func:`evaluators.engine.evaluate_unit` with the split's relevant sets in place of
    a test window; the recommended lists (global item codes, −1 = none) are kept.
    """
    return fit_and_measure(
        algorithm, split.train, split.relevant, ks=ks, n_items=log.n_items, index=split.index,
        keep_lists=True, timings={"train_data": 0.0},
    )


def future_items(
    recommended: NDArray[np.int64],
    reference_time: NDArray[np.int64],
    first_seen: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """future[j, r]: the r-th recommended item of user j first appears after j's reference time.

    Args:
        recommended: (n, K) global item codes, −1 = no item.
        reference_time: (n,) the test instance's time per user.
        first_seen: first timestamp per item code (:func:`item_first_seen`).
    """
    valid = recommended >= 0
    return valid & (first_seen[np.maximum(recommended, 0)] > reference_time[:, None])


def leakage_rows(
    protocol: str,
    split: Split,
    unit: UnitResult,
    ks: list[int],
    first_seen: NDArray[np.int64],
) -> list[dict[str, object]]:
    """The leakage diagnostic of one unit: future items among the top-k lists, for every k."""
    recommended = unit.recommended
    if recommended is None:
        raise ValueError("the unit's recommended lists were not kept")
    future = future_items(recommended, split.reference_time, first_seen)
    valid = recommended >= 0
    rows = []
    for k in ks:
        n_recommended = int(valid[:, :k].sum())
        n_future = int(future[:, :k].sum())
        rows.append(
            {
                "protocol": protocol,
                "fold": split.index,
                "algorithm": unit.algorithm,
                "k": k,
                "n_lists": len(recommended),
                "n_recommended": n_recommended,
                "n_future": n_future,
                "share_future": n_future / n_recommended if n_recommended else np.nan,
                "n_lists_with_future": int(future[:, :k].any(axis=1).sum()),
            }
        )
    return rows


@dataclass
class ProtocolRun:
    """What one protocol produced.

    Attributes:
        protocol: the protocol's name.
        results: the long table (SPEC §8) with a leading ``protocol`` column.
        leakage: one row per (split, algorithm, k), :data:`LEAKAGE_COLUMNS`.
        splits: one row per split (label, span, users, skip reason).
        units: one row per evaluated (split, algorithm): device and timings.
        devices: the device each algorithm ran on.
        params: the protocol's parameters.
    """

    protocol: str
    results: pd.DataFrame
    leakage: pd.DataFrame
    splits: pd.DataFrame
    units: pd.DataFrame
    devices: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)


def run_protocol(
    log: InteractionLog,
    protocol: Protocol,
    algorithms: list[str],
    *,
    ks: list[int],
    params: Mapping[str, Mapping[str, Any]] | None = None,
    config_hash: str = "",
    store: UnitStore | None = None,
    progress: Callable[[int], None] | None = None,
) -> ProtocolRun:
    """Evaluate every algorithm under ``protocol``: one model per (split, algorithm).

    Args:
        log: the log.
        protocol: the protocol.
        algorithms: registry names, in display order.
        ks: metric cut-offs.
        params: hyper-parameters per algorithm.
        config_hash: written to the ``config_hash`` column.
        store: finished units are saved here and not recomputed (payload: ``rows``,
            ``leakage``, ``device``, ``timings``; compatible with :func:`evaluators.run.collect`).
        progress: called with 1 after each unit.
    """
    params = params or {}
    first_seen = item_first_seen(log)
    rows: list[dict[str, object]] = []
    leaks: list[dict[str, object]] = []
    units: list[dict[str, object]] = []
    split_rows: list[dict[str, object]] = []
    devices: dict[str, str] = {}
    for split in protocol.splits(log):
        split_rows.append(split.summary())
        for name in algorithms:
            reason = split.skip_reason or protocol.unsupported(name)
            if reason is not None:
                rows += skipped_rows(split, name, ks, reason=reason, n_users=split.n_eligible,
                                     config_hash=config_hash)
                continue
            payload = None
            if store is not None and store.has(split.index, name):
                payload = store.load(split.index, name)
                if "leakage" not in payload:  # a unit of ``sweval run``: no lists were kept
                    payload = None
            if payload is None:
                algorithm = build_algorithm(name, dict(params.get(name, {})))
                unit = protocol.evaluate(log, split, algorithm, ks)
                payload = {
                    # a Split quacks like a Fold for the results table
                    "rows": unit_rows(split, unit, config_hash=config_hash),  # type: ignore
                    "leakage": leakage_rows(protocol.name, split, unit, ks, first_seen),
                    "device": unit.device,
                    "timings": unit.timings,
                }
                if store is not None:
                    store.save(split.index, name, payload)
            rows += payload["rows"]
            leaks += [  # a stored NaN share comes back as None
                row | {"share_future": np.nan if row["share_future"] is None
                       else row["share_future"]}
                for row in payload["leakage"]
            ]
            devices[name] = payload["device"]
            units.append(
                {"protocol": protocol.name, "fold": split.index, "algorithm": name,
                 "device": payload["device"]}
                | {f"{stage}_s": seconds for stage, seconds in payload["timings"].items()}
            )
            if progress is not None:
                progress(1)
        # the training data of a split is dropped with the split (memory stays bounded)
    results = results_frame(rows, algorithms)
    results.insert(0, "protocol", protocol.name)
    leakage = pd.DataFrame(leaks, columns=LEAKAGE_COLUMNS)
    return ProtocolRun(
        protocol=protocol.name,
        results=results,
        leakage=leakage,
        splits=pd.DataFrame(split_rows),
        units=pd.DataFrame(units),
        devices=devices,
        params=protocol.describe(),
    )


def count_units(log: InteractionLog, protocol: Protocol, algorithms: list[str]) -> int:
    """How many (split, algorithm) models ``protocol`` fits (for progress bars)."""
    if isinstance(protocol, _FoldProtocol):
        folds = protocol.folds(log)
        return sum(not f.skipped for f in folds) * len(algorithms)
    n_splits = protocol.repeats if isinstance(protocol, LOOCV) else 1
    return n_splits * sum(protocol.unsupported(name) is None for name in algorithms)


# ---------------------------------------------------------------------- comparison tables
COMPARE_COLUMNS = ["protocol", *COLUMNS]


def compare_summary(results: pd.DataFrame) -> pd.DataFrame:
    """:func:`~evaluators.results.summarise` per protocol (mean over splits, Δ% to the best)."""
    parts = []
    for protocol, part in results.groupby("protocol", sort=False):
        summary = summarise(part.drop(columns="protocol"))
        summary.insert(0, "protocol", protocol)
        parts.append(summary)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def table2(summary: pd.DataFrame, *, metric: str = "recall", stratum: str = "all") -> pd.DataFrame:
    """The paper's Table 2 as a long frame: protocol, k, algorithm, mean, delta (a fraction)."""
    part = summary[(summary["metric"] == metric) & (summary["stratum"] == stratum)]
    columns = ["protocol", "k", "algorithm", "mean", "delta", "std", "n_folds", "n_skipped"]
    return part[columns].reset_index(drop=True)


def rankings(summary: pd.DataFrame, k: int, *, metric: str = "recall") -> dict[str, list[str]]:
    """Per protocol, the evaluated algorithms by mean metric@k, best first (ties by name)."""
    part = summary[
        (summary["metric"] == metric) & (summary["k"] == k) & (summary["stratum"] == "all")
    ]
    out: dict[str, list[str]] = {}
    for protocol, rows in part.groupby("protocol", sort=False):
        rows = rows[rows["mean"].notna()]
        order = sorted(zip(rows["mean"], rows["algorithm"]), key=lambda p: (-p[0], p[1]))
        out[str(protocol)] = [name for _, name in order]
    return out


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Kendall's τ-b (ties accounted for) and its p-value, via ``scipy.stats.kendalltau``.

    NaN when fewer than two values or when one side is constant.
    """
    from scipy.stats import kendalltau

    if len(a) != len(b):
        raise ValueError("the two score lists differ in length")
    if len(a) < 2:
        return float("nan"), float("nan")
    result = kendalltau(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    return float(result.statistic), float(result.pvalue)


def kendall_table(
    summary: pd.DataFrame, protocols: Sequence[str], *, metric: str = "recall"
) -> pd.DataFrame:
    """Kendall's τ between the algorithm rankings of every pair of protocols, for every k.

    The rankings compare the algorithms evaluated under both protocols (POP-N is absent from
    LOOCV), by their mean metric@k.
    """
    part = summary[(summary["metric"] == metric) & (summary["stratum"] == "all")]
    part = part[part["k"].notna() & part["mean"].notna()]
    ks = sorted(int(k) for k in part["k"].unique())
    rows = []
    for first, second in combinations(protocols, 2):
        for k in ks:
            at_k = part[part["k"] == k]
            a = at_k[at_k["protocol"] == first].set_index("algorithm")["mean"]
            b = at_k[at_k["protocol"] == second].set_index("algorithm")["mean"]
            common = [name for name in a.index if name in b.index]
            tau, p_value = kendall_tau(a[common].tolist(), b[common].tolist())
            rows.append(
                {"protocol_a": first, "protocol_b": second, "metric": metric, "k": k,
                 "tau": tau, "p_value": p_value, "n_algorithms": len(common),
                 "algorithms": ",".join(common)}
            )
    return pd.DataFrame(
        rows, columns=["protocol_a", "protocol_b", "metric", "k", "tau", "p_value",
                       "n_algorithms", "algorithms"]
    )


def leakage_summary(leakage: pd.DataFrame) -> pd.DataFrame:
    """Leakage pooled over splits per (protocol, algorithm, k): counts summed, share = sum/sum."""
    keys = ["protocol", "algorithm", "k"]
    if leakage.empty:
        return pd.DataFrame(columns=[*keys, "n_splits", "n_lists", "n_recommended", "n_future",
                                     "share_future", "n_lists_with_future"])
    grouped = leakage.groupby(keys, sort=False)
    out = grouped[["n_lists", "n_recommended", "n_future", "n_lists_with_future"]].sum()
    out.insert(0, "n_splits", grouped["fold"].nunique())
    out["share_future"] = np.where(
        out["n_recommended"] > 0, out["n_future"] / out["n_recommended"].clip(lower=1), np.nan
    )
    return out.reset_index()[
        [*keys, "n_splits", "n_lists", "n_recommended", "n_future", "share_future",
         "n_lists_with_future"]
    ]
