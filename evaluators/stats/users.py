"""Users as the sampling unit: the per-user values of a run's units, the users' paired tests and
the two-level bootstrap of the summary's means.

A fold's value is the mean over its eligible users; the users are what a recommender's quality
generalises over, and a user eligible in several folds is one cluster. For algorithms a and b
at one (stratum, metric, k), over the folds F_ab where both have a value, user u's value is its
mean over the folds of F_ab where it is eligible (F_u)::

    x_u = mean_{f ∈ F_u} value(a, u, f)      y_u = mean_{f ∈ F_u} value(b, u, f)

and the users, in the log's id order (ascending codes: numeric ids numerically, others as
text), are the paired units of :mod:`evaluators.stats.paired`: d_u = round(x_u − y_u, 12),
``mean_diff`` = mean over users of d_u, its interval the bootstrap of the users (each user with
all its folds: a cluster bootstrap), the tests on the n users' d_u. These are exactly scipy's
functions applied to ``per_user.parquet`` grouped by user.

The users-level test treats the folds as given: it says whether a lead would hold for other
users of the same weeks, not whether it would hold in other weeks (the folds' test says that,
with far less power).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.evaluators.stats.long_table import ordered
from sweval.evaluators.stats.paired import Pair
from sweval.evaluators.stats.resampling import Bootstrap, two_level_intervals

Key = tuple[str, "int | None"]


@dataclass
class UserValues:
    """The per-user values of a run's units: per (stratum, fold, algorithm) the users' codes
    (ascending) and ``{(metric, k): values}`` aligned with them (no copies are made)."""

    blocks: dict[tuple[str, int, str], tuple[NDArray[np.int64], dict[Any, NDArray[np.float64]]]
                 ] = field(default_factory=dict)

    def add(self, result: Any, *, stratum: str, mask: NDArray[np.bool_] | None = None) -> None:
        """The values of ``result`` (a :class:`~evaluators.units.engine.UnitResult`) in
        ``stratum``, of the ``mask``ed users only when given."""
        users = result.users if mask is None else result.users[mask]
        values = (result.values if mask is None
                  else {key: column[mask] for key, column in result.values.items()})
        order = np.argsort(users, kind="stable")
        if np.any(order != np.arange(len(order))):
            users, values = users[order], {key: v[order] for key, v in values.items()}
        self.blocks[(stratum, int(result.fold), str(result.algorithm))] = (users, values)

    def add_relabelled(self, sources: dict[tuple[int, str, str], str]) -> None:
        """Copy the block of every ``(fold, stratum, algorithm)`` in ``sources`` under the label
        it maps to (a tuned series has its chosen candidate's users on each fold)."""
        for (fold, stratum, candidate), label in sources.items():
            block = self.blocks.get((stratum, fold, candidate))
            if block is not None:
                self.blocks[(stratum, fold, label)] = block

    def __bool__(self) -> bool:
        return bool(self.blocks)

    def fingerprint(self) -> str:
        """A hash of every block (its key, users and values, in order): equal values, equal
        fingerprints."""
        digest = hashlib.sha256()
        for key, (users, values) in self.blocks.items():
            digest.update(f"{key!r}\0{users.dtype}\0".encode())
            digest.update(np.ascontiguousarray(users).tobytes())
            for name, column in values.items():
                digest.update(f"{name!r}\0{column.dtype}\0".encode())
                digest.update(np.ascontiguousarray(column).tobytes())
        return digest.hexdigest()

    def strata(self) -> list[str]:
        return list(dict.fromkeys(stratum for stratum, _, _ in self.blocks))

    def folds(self, stratum: str, algorithm: str) -> list[int]:
        return sorted(f for s, f, a in self.blocks if s == stratum and a == algorithm)

    def algorithms(self, stratum: str) -> list[str]:
        return list(dict.fromkeys(a for s, _, a in self.blocks if s == stratum))

    def keys(self, stratum: str) -> list[Any]:
        """The (metric, k) with per-user values in ``stratum``, in the units' order."""
        found: dict[Any, None] = {}
        for (s, _, _), (_, values) in self.blocks.items():
            if s == stratum:
                found.update(dict.fromkeys(values))
        return list(found)


@dataclass
class Universe:
    """The users of some folds (the union, in code order) and, per fold, where its users sit."""

    users: NDArray[np.int64]
    inverse: list[NDArray[np.int64]]  # per fold: position of each of its users in ``users``
    counts: NDArray[np.float64]  # per user: the folds it is eligible in
    members: list[NDArray[np.int64]]  # per fold: its users (codes)


def universe(values: UserValues, stratum: str, folds: Sequence[int],
             algorithms: Sequence[str]) -> Universe:
    """The users of ``folds`` that every algorithm of ``algorithms`` scored there."""
    members = []
    for fold in folds:
        sets = [values.blocks[(stratum, fold, a)][0] for a in algorithms]
        common = sets[0]
        for other in sets[1:]:
            if len(other) != len(common) or np.any(other != common):
                common = np.intersect1d(common, other)
        members.append(common)
    every = np.concatenate(members) if members else np.zeros(0, dtype=np.int64)
    users, inverse_all, counts = np.unique(every, return_inverse=True, return_counts=True)
    bounds = np.cumsum([0, *(len(m) for m in members)])
    inverse = [inverse_all[bounds[i]:bounds[i + 1]] for i in range(len(members))]
    return Universe(users, inverse, counts.astype(np.float64), members)


def _values_on(values: UserValues, stratum: str, fold: int, algorithm: str, key: Any,
               members: NDArray[np.int64]) -> NDArray[np.float64]:
    users, columns = values.blocks[(stratum, fold, algorithm)]
    column = columns[key]
    if len(users) == len(members) and np.all(users == members):
        return column
    return column[np.searchsorted(users, members)]


def cluster_means(values: UserValues, stratum: str, folds: Sequence[int], algorithm: str,
                  key: Any, space: Universe) -> NDArray[np.float64]:
    """Each user's mean over the ``folds`` where it is eligible and its value defined
    (``space``'s users, in order); NaN for a user without a defined value (``recall_reachable``
    of a user with nothing reachable)."""
    sums = np.zeros(len(space.users))
    counts = np.zeros(len(space.users))
    for fold, inverse, members in zip(folds, space.inverse, space.members, strict=True):
        found = _values_on(values, stratum, fold, algorithm, key, members)
        defined = ~np.isnan(found)
        sums += np.bincount(inverse, np.where(defined, found, 0.0), minlength=len(space.users))
        counts += np.bincount(inverse, defined, minlength=len(space.users))
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def user_pairs(values: UserValues, pairs_of: Any, order: Sequence[str] | None) -> list[Pair]:
    """The users-level :class:`Pair` of every (stratum, metric, k) and pair of algorithms that
    ``pairs_of(names)`` gives (module docstring); one universe per stratum and set of folds."""
    out: list[Pair] = []
    for stratum in values.strata():
        names = ordered(values.algorithms(stratum), order)
        folds_of = {name: values.folds(stratum, name) for name in names}
        groups: dict[tuple[int, ...], list[tuple[str, str]]] = {}
        for a, b in pairs_of(names):
            common = tuple(sorted(set(folds_of[a]) & set(folds_of[b])))
            groups.setdefault(common, []).append((a, b))
        for key in values.keys(stratum):
            metric, k = key
            for folds, chosen in groups.items():
                involved = list(dict.fromkeys(name for pair in chosen for name in pair))
                space = universe(values, stratum, folds, involved)
                means = {name: cluster_means(values, stratum, folds, name, key, space)
                         for name in involved}
                for a, b in chosen:  # a user is a paired unit where both values are defined
                    both = ~(np.isnan(means[a]) | np.isnan(means[b]))
                    out.append(Pair({"stratum": stratum, "metric": metric, "k": k,
                                     "algorithm_a": a, "algorithm_b": b},
                                    means[a][both], means[b][both], len(folds)))
    return out


def two_level_summary(values: UserValues, settings: Bootstrap) -> pd.DataFrame:
    """The two-level bootstrap interval (:func:`~evaluators.stats.resampling.two_level_intervals`)
    of every (algorithm, stratum, metric, k) mean with per-user values: columns algorithm,
    stratum, metric, k, ci_low, ci_high. Series on the same folds share their resamples."""
    rows: list[dict[str, Any]] = []
    for stratum in values.strata():
        keys = values.keys(stratum)
        groups: dict[tuple[int, ...], list[str]] = {}
        for name in values.algorithms(stratum):
            groups.setdefault(tuple(values.folds(stratum, name)), []).append(name)
        for folds, names in groups.items():
            space = universe(values, stratum, folds, names)
            columns = [(name, key) for name in names for key in keys
                       if all(key in values.blocks[(stratum, f, name)][1] for f in folds)]
            if not columns:
                continue
            matrices = [np.column_stack([
                _values_on(values, stratum, fold, name, key, members) for name, key in columns])
                for fold, members in zip(folds, space.members, strict=True)]
            matrices = [m for m in matrices if len(m)]
            low, high = two_level_intervals(matrices, settings)
            rows += [{"algorithm": name, "stratum": stratum, "metric": key[0], "k": key[1],
                      "ci_low": lo, "ci_high": hi}
                     for (name, key), lo, hi in zip(columns, low, high, strict=True)]
    frame = pd.DataFrame(rows, columns=["algorithm", "stratum", "metric", "k", "ci_low",
                                        "ci_high"])
    frame["k"] = frame["k"].astype("Int64")
    return frame
