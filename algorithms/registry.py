"""The registry of algorithms, keyed by the names users type (``--algorithms pop,item-knn``).

Three kinds of names resolve to an :class:`~sweval.algorithms.base.Algorithm` subclass:

- a built-in name (:data:`ALGORITHMS`: ``pop``, ``item-knn``, ...);
- a plugin's entry point in the group ``sweval.algorithms`` (a package declares
  ``[project.entry-points."sweval.algorithms"] my-model = "my_pkg.models:MyModel"``), found with
  :func:`importlib.metadata.entry_points`; it may not take a built-in's name;
- an import path ``module:Class`` (any name with a ``:``), imported as it is.

Every problem is a :class:`~sweval.data.errors.SwevalError` naming the algorithm: unknown name,
module or attribute not found, an object that is not an Algorithm subclass, an entry point that
fails to load, a plugin that takes a built-in's name.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from sweval.algorithms import ENTRY_POINT_GROUP
from sweval.algorithms.als import ALS
from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.bpr import BPR
from sweval.algorithms.decay_popularity import DecayPop
from sweval.algorithms.ease import EASE
from sweval.algorithms.knn import ItemKNN, UserKNN
from sweval.algorithms.lmf import LMF
from sweval.algorithms.popularity import Pop, PopN
from sweval.algorithms.svd import PureSVD
from sweval.data.errors import SwevalError

#: The built-in algorithms, in display order.
ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (Pop, PopN, ItemKNN, UserKNN, PureSVD, ALS, BPR, LMF, EASE, DecayPop)
}


@dataclass(frozen=True)
class Origin:
    """Where an algorithm comes from.

    Attributes:
        kind: ``built-in``, ``entry point`` or ``import path``.
        target: the ``module:Class`` it resolves to.
        distribution: the installed package that declares the entry point, or None.
        version: that package's version, or None.
    """

    kind: str
    target: str
    distribution: str | None = None
    version: str | None = None

    def describe(self) -> str:
        where = f" ({self.distribution} {self.version})" if self.distribution else ""
        return f"{self.kind}: {self.target}{where}"


def is_import_path(name: str) -> bool:
    """A name with a ``:`` is an import path ``module:Class``."""
    return ":" in name


@functools.cache
def plugin_entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The installed entry points of the group ``sweval.algorithms``, by name (not loaded).

    Read once per process (``plugin_entry_points.cache_clear()`` reads them again)."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def algorithm_class(name: str) -> type[Algorithm]:
    """The class registered under ``name`` (built-in, entry point or import path).

    Raises:
        SwevalError: unknown name (listing the known ones), or a plugin that cannot be used.
    """
    return resolve(name)[0]


def resolve(name: str) -> tuple[type[Algorithm], Origin]:
    """The class of ``name`` and where it comes from (see the module docstring).

    Raises:
        SwevalError: unknown name, or a plugin that cannot be used.
    """
    if is_import_path(name):
        return _checked(_import_path(name), name), Origin("import path", name)
    entry_points = plugin_entry_points()
    if name in ALGORITHMS:
        if name in entry_points:
            raise SwevalError(_clash_message(entry_points[name]))
        cls = ALGORITHMS[name]
        return cls, Origin("built-in", f"{cls.__module__}:{cls.__qualname__}")
    if name in entry_points:
        entry = entry_points[name]
        try:
            loaded = entry.load()
        except Exception as exc:
            raise SwevalError(
                f"algorithm {name!r}: the entry point {entry.value!r} (group "
                f"{ENTRY_POINT_GROUP!r}{_declared_by(entry)}) fails to load: "
                f"{type(exc).__name__}: {exc}."
            ) from exc
        dist = entry.dist
        return _checked(loaded, name), Origin(
            "entry point", entry.value,
            distribution=dist.name if dist is not None else None,
            version=dist.version if dist is not None else None,
        )
    known = [*ALGORITHMS, *sorted(entry_points)]
    raise SwevalError(
        f"unknown algorithm {name!r}; available: {', '.join(known)} (or an import path "
        "module:Class; `sweval algorithms` lists them)."
    )


def _import_path(name: str) -> Any:
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute:
        raise SwevalError(f"algorithm {name!r}: an import path is module:Class, e.g. my_pkg.models:MyModel.")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name
                                     or module_name.startswith(exc.name + ".")):
            raise SwevalError(
                f"algorithm {name!r}: module {module_name!r} not found (is its package "
                "installed in this environment, or its folder on PYTHONPATH?)."
            ) from exc
        raise SwevalError(
            f"algorithm {name!r}: importing module {module_name!r} failed: {exc}"
        ) from exc
    except Exception as exc:
        raise SwevalError(
            f"algorithm {name!r}: importing module {module_name!r} failed: "
            f"{type(exc).__name__}: {exc}."
        ) from exc
    found: Any = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise SwevalError(
                f"algorithm {name!r}: module {module_name!r} has no attribute {attribute!r}."
            ) from None
    return found


def _checked(obj: Any, name: str) -> type[Algorithm]:
    if not (inspect.isclass(obj) and issubclass(obj, Algorithm)):
        what = f"class {obj.__qualname__}" if inspect.isclass(obj) else type(obj).__name__
        raise SwevalError(
            f"algorithm {name!r} is not an algorithm: {what} is not a subclass of "
            "sweval.algorithms.Algorithm."
        )
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        raise SwevalError(
            f"algorithm {name!r}: class {obj.__qualname__} is abstract (implement {missing})."
        )
    config = getattr(obj, "Config", None)
    if not (inspect.isclass(config) and issubclass(config, AlgorithmConfig)):
        shown = config.__qualname__ if inspect.isclass(config) else repr(config)
        raise SwevalError(
            f"algorithm {name!r}: {obj.__qualname__}.Config is {shown}, not a subclass of "
            "sweval.algorithms.AlgorithmConfig (which refuses unknown parameters)."
        )
    _check_defaults(config, f"algorithm {name!r}: {obj.__qualname__}.Config")
    return obj


def _check_defaults(config: type[AlgorithmConfig], where: str) -> None:
    """Validate a Config's defaults as given values are validated (pydantic does not check
    defaults: ``mode: int = "abc"`` ran with ``"abc"``).

    Raises:
        SwevalError: a default its own field refuses, naming the field and pydantic's reason.
    """
    defaults = {name: field.get_default(call_default_factory=True)
                for name, field in config.model_fields.items() if not field.is_required()}
    try:
        config.model_validate(defaults)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, error['loc']))}: {error['msg']}"
                    for error in exc.errors() if error["type"] != "missing"]
        if problems:
            raise SwevalError(f"{where} has an invalid default ({'; '.join(problems)}).") from None


def _declared_by(entry: importlib.metadata.EntryPoint) -> str:
    return f", declared by {entry.dist.name} {entry.dist.version}" if entry.dist else ""


def _clash_message(entry: importlib.metadata.EntryPoint) -> str:
    return (
        f"algorithm {entry.name!r}: the entry point {entry.value!r}{_declared_by(entry)} takes "
        f"the name of a built-in algorithm; rename it in the plugin's [project.entry-points."
        f'"{ENTRY_POINT_GROUP}"] (or name the plugin by its import path {entry.value}).'
    )


def available() -> tuple[dict[str, tuple[type[Algorithm], Origin]], list[str]]:
    """Every algorithm that can be named without an import path: the built-ins, then the
    installed plugins by name; and the problems of the plugins that cannot be used."""
    found: dict[str, tuple[type[Algorithm], Origin]] = {}
    problems: list[str] = []
    entry_points = plugin_entry_points()
    for name, cls in ALGORITHMS.items():
        found[name] = (cls, Origin("built-in", f"{cls.__module__}:{cls.__qualname__}"))
    for name in sorted(entry_points):
        if name in ALGORITHMS:
            problems.append(_clash_message(entry_points[name]))
            continue
        try:
            found[name] = resolve(name)
        except SwevalError as exc:
            problems.append(str(exc))
    return found, problems


def build_algorithm(name: str, params: dict[str, Any] | None = None) -> Algorithm:
    """Instantiate ``name`` with validated hyper-parameters.

    Raises:
        SwevalError: unknown algorithm, unknown parameter or invalid value.
    """
    cls = algorithm_class(name)
    try:
        return cls(cls.Config(**(params or {})))
    except ValidationError as exc:
        problems = "; ".join(
            f"{name}.{'.'.join(map(str, err['loc']))}: {err['msg'].removeprefix('Value error, ')}"
            for err in exc.errors()
        )
        known = ", ".join(cls.Config.model_fields) or "none"
        raise SwevalError(f"bad parameters for {name}: {problems} (parameters: {known}).") from None


def is_plugin(algorithm: Algorithm) -> bool:
    """Whether ``algorithm``'s class comes from outside SW-EVAL (an entry point or an import
    path): the engine fits such a model on read-only training data."""
    return not type(algorithm).__module__.startswith("sweval.")
