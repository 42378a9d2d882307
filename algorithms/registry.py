"""The registry of algorithms, keyed by the names users type (``--algorithms pop,item-knn``)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from sweval.algorithms.als import ALS
from sweval.algorithms.base import Algorithm
from sweval.algorithms.bpr import BPR
from sweval.algorithms.ease import EASE
from sweval.algorithms.knn import ItemKNN, UserKNN
from sweval.algorithms.lmf import LMF
from sweval.algorithms.popularity import Pop, PopN
from sweval.algorithms.svd import PureSVD
from sweval.data.errors import SwevalError

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls for cls in (Pop, PopN, ItemKNN, UserKNN, PureSVD, ALS, BPR, LMF, EASE)
}


def algorithm_class(name: str) -> type[Algorithm]:
    """The class registered under ``name``.

    Raises:
        SwevalError: unknown name (listing the known ones).
    """
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise SwevalError(
            f"unknown algorithm {name!r}; available: {', '.join(ALGORITHMS)}."
        ) from None


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
            f"{name}.{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in exc.errors()
        )
        known = ", ".join(cls.Config.model_fields) or "none"
        raise SwevalError(f"bad parameters for {name}: {problems} (parameters: {known}).") from None


def default_params(name: str) -> dict[str, Any]:
    """The default hyper-parameters of ``name``."""
    return algorithm_class(name).Config().model_dump()
