"""What a command hands the driver and what comes back: how units are measured
(:class:`Measurer`), the units grouped into :class:`Work`, the :class:`Recipe` that makes the
same work in another process (kept per process: :func:`work_of`), a :class:`Job` and its
:class:`Outcome`, and every unit's result, :class:`Collected`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol

import numpy as np

from sweval.data.items import ItemFeatures
from sweval.evaluators.metrics.exposure import ItemFacts
from sweval.evaluators.metrics.measures import measure_chosen, needs_facts, split_facts
from sweval.evaluators.metrics.names import DEFAULT_METRICS
from sweval.evaluators.protocols.splits import Split
from sweval.evaluators.units.engine import UnitLists, UnitResult
from sweval.evaluators.units.failures import UnitFailure
from sweval.evaluators.units.files import UnitFiles
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.units.unit import Unit


# ------------------------------------------------------------------------------ what to compute
@dataclass
class Measurer:
    """How a command measures a unit's lists: its cut-offs, metrics (``--metrics``) and item
    features (``--items``); the
    item facts that recency and the exposure metrics read are computed once per split."""

    ks: list[int]
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))
    items: ItemFeatures | None = None
    facts: dict[int, ItemFacts] = field(default_factory=dict, repr=False)

    def facts_of(self, split: Split) -> ItemFacts | None:
        """The split's item facts, when the metrics need them."""
        if not needs_facts(self.metrics):
            return None
        if id(split) not in self.facts:
            facts = split_facts(split)
            if self.items is not None:
                facts = replace(facts, features=self.items.for_log(split.log))
            self.facts[id(split)] = facts
        return self.facts[id(split)]

    def measure(self, unit: Unit, lists: UnitLists) -> UnitResult:
        """The unit's per-user metrics; of its lists only the top max(k) are kept (what the
        tables read: exposure metrics, overlap, leakage)."""
        result = measure_chosen(lists, unit.split, self.ks, self.metrics,
                                algorithm=unit.spec.label, facts=self.facts_of(unit.split))
        if result.recommended is not None:
            result.recommended = np.ascontiguousarray(result.recommended[:, : max(self.ks)])
        return result


@dataclass
class Work:
    """The units a command needs, grouped: the units of a group are computed together, one
    job, in order (a fold's units share its training data, built once).

    Attributes:
        groups: the groups, in order (a fold index or split per group).
        measurer: how the units are measured.
        codes: the fingerprint of the log whose codes the units' lists are in (a job done on
            another process's copy of the work is measured in that copy's codes: its results
            are used only when the codes agree).
        in_order: the groups must be computed one after the other, in order (warm starts:
            each fold's model starts from the previous fold's).
        log_failures: log a failed unit with its traceback where it fails (a caller whose
            units will be computed, and fail, again later says no: tuning's draws).
    """

    groups: list[list[Unit]]
    measurer: Measurer
    codes: str = ""
    in_order: bool = False
    log_failures: bool = True

    @cached_property
    def units(self) -> list[Unit]:
        return [unit for group in self.groups for unit in group]


class Recipe(Protocol):
    """What makes a command's :class:`Work` again in another process: small and picklable."""

    def work(self) -> Work:
        """The work, made from the data and the options (the same every time)."""
        ...

    def cache_key(self) -> str:
        """A key that names the work (what the recipe holds, and the data it reads)."""
        ...

    def store(self) -> UnitStore:
        """The unit store the command uses."""
        ...


#: The works made in this process from recipes, latest last.
_WORKS: OrderedDict[str, Work] = OrderedDict()
_WORKS_LOCK = threading.Lock()
_WORKS_KEPT = 2


def work_of(recipe: Recipe) -> Work:
    """The work of ``recipe`` in this process: made once (the last two are kept)."""
    key = recipe.cache_key()
    with _WORKS_LOCK:
        work = _WORKS.get(key)
        if work is None:
            work = recipe.work()
            _WORKS[key] = work
            while len(_WORKS) > _WORKS_KEPT:
                _WORKS.popitem(last=False)
    return work


def remember(recipe: Recipe, work: Work) -> None:
    """Keep ``work`` as the work of ``recipe`` in this process (the command made it already)."""
    with _WORKS_LOCK:
        _WORKS[recipe.cache_key()] = work
        while len(_WORKS) > _WORKS_KEPT:
            _WORKS.popitem(last=False)


# ------------------------------------------------------------------------------ jobs and results
@dataclass(frozen=True)
class Job:
    """One group's missing units: the group's index and the labels of the algorithm
    configurations to compute there."""

    group: int
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    """What a job sends back.

    Attributes:
        measured: the units it computed, measured, by key (in the codes ``codes`` names).
        codes: the fingerprint of the log the job's work was in (see :attr:`Work.codes`).
        failed: the units whose algorithm raised.
        files: the computed units in raw ids, when asked for (a worker that may not share the
            command's unit store: the command writes them there).
    """

    measured: dict[str, UnitResult]
    codes: str
    failed: list[UnitFailure]
    files: dict[str, UnitFiles] = field(default_factory=dict)


@dataclass(frozen=True)
class Collected:
    """Every unit's result, and what it took.

    Attributes:
        results: per unit key, its measured result (labelled as the key's first unit).
        failed: the units whose algorithm raised (not in ``results``).
        computed: the keys of the units this run computed (the others it reused).
        n_reused, n_computed: units taken from the store, units computed (once per key).
        n_code_changed: of the computed units, those stored as computed by other code.
        n_recomputed: units planned as reused but computed while collecting (pruned beside
            the run, or found damaged as they were read; counted in ``n_computed``).
    """

    results: dict[str, UnitResult]
    failed: tuple[UnitFailure, ...]
    computed: frozenset[str]
    n_reused: int
    n_computed: int
    n_code_changed: int
    n_recomputed: int

    def result(self, unit: Unit) -> UnitResult | None:
        """The unit's result under its own label; None for a failed unit."""
        found = self.results.get(unit.key)
        if found is None or found.algorithm == unit.spec.label:
            return found
        return replace(found, algorithm=unit.spec.label)
