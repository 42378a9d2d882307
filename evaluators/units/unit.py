"""The unit of work: one split × one algorithm configuration, and its content-addressed key.

A unit's key hashes exactly what determines its numbers, and nothing else::

    key = sha256({
        "split":     the split's definition: protocol kind, window bounds, training window,
                     relevance, stratum and stratify mode, hold-out seed, and the fingerprint
                     of the data the split reads (for a window: the transactions before its end),
        "algorithm": the registry name,
        "params":    the validated hyper-parameters (defaults filled in, types normalised),
        "code":      the version of the code that computes it (:func:`code_version`),
        "warm_from": the key of the unit whose model it starts from (warm starts), or None,
    })

Not in the key: the list of k (a unit keeps its top-K lists; metrics are recomputed from them),
the number of folds, the other algorithms, and where outputs, tracking and tasks go. So adding an
algorithm, a k or a fold to a run costs only the new units.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import inspect
import json
import logging
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sweval.algorithms.registry import is_plugin, resolve
from sweval.data.errors import SwevalError
from sweval.data.user_dirs import cache_home
from sweval.evaluators.protocols.splits import Split
from sweval.evaluators.units.algorithm_spec import AlgorithmSpec
from sweval.evaluators.units.engine import UnitLists, compute_lists, list_length
from sweval.evaluators.units.failures import AlgorithmFailed, UnitFailure
from sweval.evaluators.units.files import atomic_write_text
from sweval.evaluators.units.serving import FittedModels, built, key_definition, served_lists
from sweval.evaluators.units.store import DamagedUnit, UnitStore

_log = logging.getLogger(__name__)

_ROOT = Path(__file__).resolve().parents[2]

#: The shared code that computes every unit: the algorithms' common base, ranking, score
#: rounding and kernels, the engine (fit, rank, measure) and the splits, folds and log it reads.
#: An algorithm's own module is added per algorithm. Thread budgets (``algorithms/threads.py``:
#: the factors are bit-identical for any count, or scores are snapped), where implicit's models
#: run (``algorithms/implicit_device.py``: the resolved device is among the key's params), the
#: registry, report, tracking and orchestration are not part of a key.
CORE_MODULES = (
    "algorithms/base.py",
    "algorithms/cooccurrence.py",  # item-kNN's counts on folds advanced in order
    "algorithms/incidence_kernels.py",
    "algorithms/neighbour_kernels.py",
    "algorithms/ranked_neighbour_kernels.py",
    "algorithms/ranking.py",
    "algorithms/ranking_kernels.py",
    "algorithms/row_chunks.py",
    "algorithms/scores.py",
    "algorithms/train_data.py",  # the training data every model is fitted on
    "data/ids.py",  # code order breaks ties; data fingerprints hash raw ids, not codes
    "data/log.py",
    "evaluators/units/engine.py",
    "evaluators/protocols/folds.py",
    "evaluators/metrics/ranking.py",
    "evaluators/protocols/splits.py",
    "evaluators/protocols/training_state.py",  # builds the folds' training data when they come in order
)


@functools.cache
def source_version(path: Path) -> str:
    """A hash of a module's code with comments, docstrings and formatting left out.

    Parsing a module costs milliseconds and a run hashes about twenty: the hashes are kept in
    ``code-versions.json`` in the user's cache directory, by file, size and modification time
    (a file that changes is hashed again)."""
    stat = path.stat()
    identity = f"{stat.st_mtime_ns}:{stat.st_size}"
    known = _known_versions()
    if known.get(str(path), [None])[0] == identity:
        return str(known[str(path)][1])
    version = _parsed_version(path)
    known[str(path)] = [identity, version]
    with contextlib.suppress(OSError):
        _VERSIONS.parent.mkdir(parents=True, exist_ok=True)  # a store elsewhere (--cache)
        atomic_write_text(_VERSIONS, json.dumps(known))
    return version


def _parsed_version(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list) and body and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


#: Where :func:`source_version` keeps the hashes it computed.
_VERSIONS = cache_home() / "code-versions.json"


@functools.cache
def _known_versions() -> dict[str, list[str]]:
    try:
        known = json.loads(_VERSIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


@functools.cache
def code_version(algorithm: str) -> str:
    """The version of the code that computes ``algorithm``'s units: the core modules and the
    algorithm's own module; for a plugin (entry point or import path) also the modules of the
    classes it and its ``Config`` inherit from (a plugin extending ``ItemKNN`` changes with
    ``knn.py``), its class path and its package's version where installed, so a new release or
    an edit of its modules is a new version (modules it merely imports are not hashed: bump the
    package version)."""
    cls, origin = resolve(algorithm)
    own = {Path(inspect.getfile(cls)).resolve()}
    if origin.kind != "built-in":
        own |= _inherited_modules(cls) | _inherited_modules(cls.Config)
    paths = sorted({_ROOT / name for name in CORE_MODULES} | own)
    digest = hashlib.sha256()
    for path in paths:
        if path.exists():
            digest.update(f"{path.name}:{source_version(path)}\0".encode())
    if origin.kind != "built-in":
        digest.update(f"plugin:{origin.target}:{origin.distribution}:{origin.version}\0".encode())
    return digest.hexdigest()[:16]


def _inherited_modules(cls: type) -> set[Path]:
    """The source files of the classes in ``cls``'s method resolution order, outside the
    standard library and pydantic's own base model."""
    files = set()
    for base in cls.__mro__:
        top = base.__module__.partition(".")[0]
        if top in sys.stdlib_module_names or top in {"builtins", "pydantic"}:
            continue
        with contextlib.suppress(TypeError, OSError):
            files.add(Path(inspect.getfile(base)).resolve())
    return files


def unit_key(
    split: dict[str, Any], spec: AlgorithmSpec, *, warm_from: str | None = None
) -> str:
    """The content-addressed key of one unit (see the module docstring)."""
    identity = {
        "split": split,
        "algorithm": spec.name,
        "params": spec.canonical,
        "code": code_version(spec.name),
        "warm_from": warm_from,
    }
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


# ------------------------------------------------------------------------------ planned units
@dataclass(frozen=True)
class Unit:
    """One planned unit: a split, an algorithm configuration, and the key they make.

    Attributes:
        split: the split (not skipped).
        spec: the algorithm configuration (cold for hold-out splits).
        key: :func:`unit_key`.
        depth: the list length this command needs (a stored unit with shorter lists is
            recomputed).
        warm_from: the key of the unit whose fitted model this one starts from, or None.
        fitted: for a served unit (:mod:`evaluators.units.serving`), the unit whose model
            serves ``split`` without a refit; None: the unit fits its own.
        updated: a served unit whose model is first updated by the interactions up to
            ``split``'s window (``--update``).
    """

    split: Split
    spec: AlgorithmSpec
    key: str
    depth: int
    warm_from: str | None = None
    fitted: Unit | None = None
    updated: bool = False


def plan_units(
    splits: Sequence[Split],
    specs: Sequence[AlgorithmSpec],
    ks: list[int],
    *,
    previous: dict[str, str | None] | None = None,
) -> list[Unit]:
    """Every unit of ``splits`` × ``specs``, split by split (skipped splits have none).

    A warm-starting configuration chains its units over the window splits in order: each
    starts from the previous evaluated split's model, and its key names that unit's key, so a
    warm unit is never mistaken for a cold one. On its own the key of a warm unit then also
    covers the whole log (the state carries the log's codes). Hold-out splits have no previous
    fold: they are fitted cold, under a cold key.

    ``previous`` (the last chained key per algorithm) carries the chains over several calls,
    for callers that plan split by split.
    """
    units: list[Unit] = []
    previous = {} if previous is None else previous
    for split in splits:
        if split.skipped:
            continue
        depth = list_length(ks, split.relevant.sizes)
        for spec in specs:
            chained = spec.warm_starts and split.definition.get("kind") == "window"
            if not chained:
                spec = spec.cold()
                units.append(Unit(split, spec, unit_key(split.definition, spec), depth))
                continue
            definition = split.definition | {"log": split.log.fingerprint()}
            warm_from = previous.get(spec.label)
            key = unit_key(definition, spec, warm_from=warm_from)
            units.append(Unit(split, spec, key, depth, warm_from=warm_from))
            previous[spec.label] = key
    return units


def code_free_identity(split: dict[str, Any], algorithm: str, params: dict[str, Any]) -> str:
    """What a unit is apart from the code that computes it: its split, algorithm and validated
    parameters (as JSON, the way a stored record holds them)."""
    identity = {"split": split, "algorithm": algorithm, "params": params}
    text = json.dumps(json.loads(json.dumps(identity, default=str)), sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def outdated_by_code(units: Sequence[Unit], store: UnitStore) -> int:
    """How many of ``units`` (units to compute) ``store`` holds only as computed by other code.

    Such a unit has a stored record with the same split, algorithm and parameters, whose
    ``code`` (:func:`code_version` of the code that computed it) differs from this code's, and
    none with this code's version: after an upgrade, its key changed with the code and it is
    recomputed rather than mixed in. Reads every record of the store, so only when there are
    units to compute.
    """
    if not units:
        return 0
    codes: dict[str, set[str]] = {}
    for record in store.records():
        try:
            identity = code_free_identity(record["split"], record["algorithm"], record["params"])
        except (KeyError, TypeError):
            continue
        codes.setdefault(identity, set()).add(str(record.get("code")))
    outdated = 0
    for unit in units:
        stored = codes.get(code_free_identity(unit.split.definition, unit.spec.name,
                                              unit.spec.canonical), set())
        if stored and code_version(unit.spec.name) not in stored:
            outdated += 1
    return outdated


def compute_unit(unit: Unit, store: UnitStore, *, log_failure: bool = True,
                 models: FittedModels | None = None) -> UnitLists:
    """Fit and rank one unit, starting from its predecessor's stored state when it warm-starts,
    and save it in ``store``. A failure is logged with its traceback unless ``log_failure`` is
    False (a caller that knows the unit will be computed, and fail, again). A served unit takes
    its model from ``models`` (fitted there once per job) and serves it; a fitted unit leaves
    its model there when a served unit of the job reads it.

    Raises:
        AlgorithmFailed: fitting or ranking raised an exception other than a
            :class:`SwevalError` (a bug or a crash in the model), or the warm-start predecessor
            failed; its traceback is in the failure. Building the training data, a user error
            (SwevalError, e.g. ``als.device=gpu`` without CUDA) and saving the unit pass through.
    """
    clock = time.perf_counter()
    train = unit.split.train
    timings = {"train_data": time.perf_counter() - clock}
    algorithm = None
    models = models if models is not None else FittedModels()
    try:
        if unit.fitted is not None:
            algorithm = unit.spec.build()  # whose error a SwevalError is
            lists = served_lists(unit, store, models, timings)
        else:
            algorithm = built(unit, store)
            lists = compute_lists(algorithm, train, unit.split.users, unit.depth,
                                  timings=timings, cold=unit.split.cold,
                                  repeats=bool(unit.split.definition.get("repeats", False)))
            models.keep(unit, algorithm, lists.timings["fit"])
    except SwevalError as exc:
        if algorithm is not None and is_plugin(algorithm):  # say whose error it is
            raise SwevalError(f"{unit.spec.label} (fold {unit.split.index}): {exc}") from exc
        raise
    except Exception as exc:
        failure = UnitFailure(
            fold=unit.split.index, label=unit.spec.label, key=unit.key,
            stratum=str(unit.split.definition.get("stratum", "all")),
            error=f"{type(exc).__name__}: {exc}",
            traceback=traceback.format_exc(),
        )
        if log_failure:
            _log.error("unit failed: %s\n%s", failure.describe(), failure.traceback,
                       extra={"unit_failure": failure})
        raise AlgorithmFailed(failure) from exc
    store.save(unit.key, lists, unit.split.log, describe(unit))
    return lists


def read_or_recompute(
    unit: Unit, store: UnitStore, *, log_failure: bool = True
) -> tuple[UnitLists, bool]:
    """(lists, recomputed) of a unit the store holds: its stored lists and False; or, found
    damaged as they are read (:class:`DamagedUnit`: unreadable, changed in place since they
    were written, or ranking other users than the unit's window evaluates, as another unit's
    lists do in a unit written before records held their SHA-256), the unit computed again with
    a warning, saved over the damaged files, and True.

    Raises:
        AlgorithmFailed: as :func:`compute_unit`.
    """
    try:
        lists = store.load(unit.key, unit.split.log)
        if not np.array_equal(lists.users, unit.split.relevant.users):
            raise DamagedUnit(f"{store.directory / unit.key[:2] / unit.key}: the unit's lists "
                              "rank other users than its window evaluates (another unit's "
                              "lists)")
        return lists, False
    except DamagedUnit as exc:
        _log.warning("%s; computing it again", exc.what)
    return compute_unit(unit, store, log_failure=log_failure), True


def describe(unit: Unit) -> dict[str, Any]:
    """What a stored unit records about itself (its key's inputs, in words and values)."""
    return {
        "split": key_definition(unit.split.definition,
                                unit.fitted.key if unit.fitted is not None else None,
                                updated=unit.updated),
        "split_index": unit.split.index,
        "algorithm": unit.spec.name,
        "label": unit.spec.label,
        "params": unit.spec.canonical,
        "code": code_version(unit.spec.name),
        "warm_from": unit.warm_from,
        "source": unit.split.log.source,
    }
