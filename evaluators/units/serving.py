"""Served units: a model fitted before one window, measured on a later one, with no refit.

A *served unit* is (fitted unit, served split): the model of the fitted unit (fold f, fitted on
D_{t_f}) ranks for the eligible users of a later window f+h, given their history up to t_{f+h}
(:mod:`algorithms.serving`)::

    key = unit_key(served split's definition + {"model": the fitted unit's key}, spec)

The fitted unit's key already names everything its model depends on (its split, algorithm,
parameters, code, warm start), so the same model serving the same window is the same unit, and
a fitted unit serving its own window (h = 0) *is* the fitted unit (no served unit is planned).

One fit serves every window: the units of one fold's job are computed in order, the fitted
unit's first, and :class:`FittedModels` keeps each model that later units of the job serve
from, so a fold's model is fitted once however many windows it serves (once more when its own
unit was reused from the store and only served units are missing).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweval.algorithms.base import Algorithm
from sweval.algorithms.serving import Delta, serving_history
from sweval.evaluators.protocols.splits import Split
from sweval.evaluators.units.engine import UnitLists, handed, list_length, rank_lists

if TYPE_CHECKING:
    from sweval.evaluators.units.store import UnitStore
    from sweval.evaluators.units.unit import Unit


def served_unit(fitted: Unit, split: Split, ks: list[int], *, updated: bool = False) -> Unit:
    """The unit of ``fitted``'s model serving ``split`` (a later window, not skipped); with
    ``updated``, the model first updated by the interactions up to the window (``--update``)."""
    from sweval.evaluators.units.unit import Unit, unit_key

    definition = key_definition(split.definition, fitted.key, updated=updated)
    return Unit(split, fitted.spec, unit_key(definition, fitted.spec),
                list_length(ks, split.relevant.sizes), fitted=fitted, updated=updated)


def key_definition(definition: dict[str, Any], model: str | None, *,
                   updated: bool = False) -> dict[str, Any]:
    """A split's definition as a unit's key reads it: for a served unit, with the serving
    model's unit key and the version of the code that serves (this module and
    :mod:`algorithms.serving`, which only served units run); an updated one says so."""
    if model is None:
        return definition
    return {**definition, "model": model, "serving": serving_code(),
            **({"update": True} if updated else {})}


#: The modules only served units run: part of served units' keys, not of plain units'.
SERVING_MODULES = ("algorithms/serving.py", "evaluators/units/serving.py")


@functools.cache
def serving_code() -> str:
    """The version of the code that hands a fitted model a later history
    (:data:`SERVING_MODULES`)."""
    from sweval.evaluators.units.unit import source_version

    root = Path(__file__).resolve().parents[2]
    return hashlib.sha256(" ".join(source_version(root / name) for name in SERVING_MODULES)
                          .encode()).hexdigest()[:16]


@dataclass
class FittedModels:
    """The fitted models a job's served units read, by the fitted unit's key, with the seconds
    their fit took; counts the fits it made (:attr:`fits`)."""

    wanted: set[str] = field(default_factory=set)
    models: dict[str, tuple[Algorithm, float]] = field(default_factory=dict)
    fits: int = 0
    #: copies of the models as fitted, for updated units (serving changes a model's rows)
    to_update: set[str] = field(default_factory=set)
    pristine: dict[str, Algorithm] = field(default_factory=dict)

    @classmethod
    def for_units(cls, units: Iterable[Unit]) -> FittedModels:
        units = list(units)
        return cls(wanted={unit.fitted.key for unit in units if unit.fitted is not None},
                   to_update={unit.fitted.key for unit in units
                              if unit.fitted is not None and unit.updated})

    def keep(self, unit: Unit, algorithm: Algorithm, fit_s: float) -> None:
        """Keep ``unit``'s freshly fitted model when a served unit of the job reads it."""
        if unit.key in self.wanted:
            self.models[unit.key] = (algorithm, fit_s)
            if unit.key in self.to_update:
                self.pristine[unit.key] = copy.deepcopy(algorithm)

    def fitted_copy(self, fitted: Unit, store: UnitStore) -> tuple[Algorithm, float]:
        """A copy of ``fitted``'s model as fitted (never served), to update, and its fit's
        seconds."""
        algorithm, fit_s = self.model(fitted, store)
        if fitted.key not in self.pristine:  # the model was served before it was kept
            self.to_update.add(fitted.key)
            self.models.pop(fitted.key)
            algorithm, fit_s = self.model(fitted, store)
        return copy.deepcopy(self.pristine[fitted.key]), fit_s

    def model(self, fitted: Unit, store: UnitStore) -> tuple[Algorithm, float]:
        """``fitted``'s model and its fit's seconds: kept, else fitted now (and kept)."""
        if fitted.key not in self.models:
            algorithm = built(fitted, store)
            clock = time.perf_counter()
            algorithm.fit(handed(algorithm, fitted.split.train))
            self.models[fitted.key] = (algorithm, time.perf_counter() - clock)
            self.fits += 1
            if fitted.key in self.to_update:
                self.pristine[fitted.key] = copy.deepcopy(algorithm)
        return self.models[fitted.key]


def built(unit: Unit, store: UnitStore) -> Algorithm:
    """A fresh model of ``unit``'s configuration, with its warm-start state when it has one.

    Raises:
        RuntimeError: the warm-start predecessor's state is missing.
    """
    algorithm = unit.spec.build()
    if unit.warm_from is not None:
        algorithm.warm_ = store.load(unit.warm_from, unit.split.log).warm_state
        if algorithm.warm_ is None:
            raise RuntimeError(
                f"the warm-start state of unit {unit.warm_from} is missing (did its fold "
                "fail?); rerun to recompute the chain in order"
            )
    return algorithm


def served_lists(unit: Unit, store: UnitStore, models: FittedModels,
                 timings: dict[str, float]) -> UnitLists:
    """The lists of a served unit: its fitted model (fitted once per job), served the users'
    history as of the served window, ranked for the window's eligible users.

    ``timings``: ``fit`` is the seconds of the fit the model had (shared by every window it
    serves), ``serve`` those of handing it the history.
    """
    assert unit.fitted is not None
    if unit.updated:
        return updated_lists(unit, store, models, timings)
    algorithm, fit_s = models.model(unit.fitted, store)
    assert algorithm.train_ is not None
    clock = time.perf_counter()
    history = serving_history(algorithm.train_.item_codes, unit.split.train)
    algorithm.serve(handed(algorithm, history))
    timings = timings | {"fit": fit_s, "serve": time.perf_counter() - clock}
    return rank_lists(algorithm, history, unit.split.users, unit.depth, timings=timings)


def updated_lists(unit: Unit, store: UnitStore, models: FittedModels,
                  timings: dict[str, float]) -> UnitLists:
    """The lists of an updated unit: a copy of its fitted model updated by the interactions
    in [t_f, t_w) (:class:`~algorithms.serving.Delta`; the served split's training data at or
    after the fit's cut-off), ranked from the updated data for the window's eligible users.

    ``timings``: ``fit`` as for a served unit, ``update`` the update's seconds.
    """
    assert unit.fitted is not None
    algorithm, fit_s = models.fitted_copy(unit.fitted, store)
    assert algorithm.train_ is not None
    log = unit.split.log
    clock = time.perf_counter()
    delta = Delta.between(unit.split.train, algorithm.train_.cutoff, n_users=log.n_users,
                          n_items=log.n_items)
    algorithm.update(delta)
    timings = timings | {"fit": fit_s, "update": time.perf_counter() - clock}
    assert algorithm.train_ is not None
    return rank_lists(algorithm, algorithm.train_, unit.split.users, unit.depth,
                      timings=timings)


def plan_served(units: Iterable[Unit], splits: list[Split], pairs: Iterable[tuple[int, int]],
                ks: list[int], updated: Iterable[tuple[int, int]] = ()) -> list[Unit]:
    """The served units of ``pairs`` ((fit fold, served fold), served > fit) for every
    algorithm configuration of ``units`` (the plain units of ``splits``), by fit fold, then
    served fold, then configuration; then the updated units of the ``updated`` pairs
    (``--update``).

    Raises:
        SwevalError: an algorithm cannot serve a later window (it keeps state per training user
            and has no way to compute it for a new history, :meth:`Algorithm.serve`), or cannot
            be updated when ``updated`` has pairs.
    """
    by_fold: dict[int, list[Unit]] = {}
    for unit in units:
        by_fold.setdefault(unit.split.index, []).append(unit)
    pairs, updated = list(pairs), list(updated)
    _refuse(by_fold, pairs, "can_serve", "--horizon/--cadence", "cannot serve a later window "
            "without refitting (a factor per training user and no fold-in of a new history)")
    _refuse(by_fold, updated, "can_update", "--update", "has no incremental update (it must be "
            "refitted)")
    return ([served_unit(fitted, splits[served], ks)
             for fit, served in pairs for fitted in by_fold.get(fit, [])]
            + [served_unit(fitted, splits[served], ks, updated=True)
               for fit, served in updated for fitted in by_fold.get(fit, [])])


def _refuse(by_fold: dict[int, list[Unit]], pairs: list[tuple[int, int]], can: str,
            option: str, why: str) -> None:
    """Raise a SwevalError naming the algorithms of ``by_fold`` whose class's ``can`` is False
    when ``pairs`` need them."""
    from sweval.algorithms.registry import resolve
    from sweval.data.errors import SwevalError

    if not pairs:
        return
    unable = sorted({unit.spec.label for unit in by_fold.get(pairs[0][0], [])
                     if not getattr(resolve(unit.spec.name)[0], can)()})
    if unable:
        raise SwevalError(f"{option}: {', '.join(unable)} {why}; leave it out of --algorithms "
                          "for this run (docs/retraining.md).")
