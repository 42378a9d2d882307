"""An algorithm configuration of a run (:class:`AlgorithmSpec`): its registry name, its
parameters as given and as they enter unit keys (validated, defaults filled in:
:func:`canonical_params`), and its label in tables (a variant's: :func:`variant_label`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sweval.algorithms.base import Algorithm
from sweval.algorithms.registry import build_algorithm
from sweval.evaluators.config.text import entry_label, parse_variant, split_alias


def canonical_params(name: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """The validated hyper-parameters of ``name`` as JSON values, defaults filled in
    (``factors=64`` given or not, as ``64`` or ``64.0``, is one set).

    Raises:
        SwevalError: unknown algorithm or invalid parameters.
    """
    algorithm = build_algorithm(name, params)
    return algorithm.key_params()


def validated_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The given parameters with their validated values as JSON (``n_neighbors=50.0`` →
    ``50``), as :func:`variant_label` writes them.

    Raises:
        SwevalError: unknown algorithm or invalid parameters.
    """
    canonical = canonical_params(name, params)
    return {key: canonical[key] for key in params}


def variant_label(name: str, params: dict[str, Any]) -> str:
    """The label of a variant SW-EVAL makes (a tuning candidate, a seed): ``name(p=v,...)``
    over the given parameters in their order, each value as given, as JSON (``days=1`` for a
    float parameter stays ``days=1``; the unit key holds the validated ``1.0`` either way).

    Raises:
        SwevalError: unknown algorithm or invalid parameters.
    """
    validated_params(name, params)
    inner = ",".join(f"{key}={json.dumps(value)}" for key, value in params.items())
    return f"{name}({inner})"


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm configuration of a run: its label, registry name and validated parameters.

    Attributes:
        name: the registry name.
        params: the parameters as given (validated again when the model is built).
        canonical: the validated, normalised parameters that enter unit keys.
        label: the name in every table, plot and MLflow run: the registry name, or a variant's
            label (``item-knn(n_neighbors=50)``). Not part of unit keys: a variant with default
            parameters shares its units with the plain algorithm.
    """

    name: str
    params: dict[str, Any]
    canonical: dict[str, Any]
    label: str = ""

    @classmethod
    def of(
        cls, name: str, params: dict[str, Any] | None = None, *, label: str | None = None
    ) -> AlgorithmSpec:
        given = dict(params or {})
        return cls(name=name, params=given, canonical=canonical_params(name, given),
                   label=label or name)

    @classmethod
    def from_entry(cls, entry: str, settings: dict[str, dict[str, Any]]) -> AlgorithmSpec:
        """The configuration of one ``--algorithms`` entry, labelled by its alias or as written
        (:func:`~evaluators.config.text.entry_label`): ``--set NAME.P=V`` applies to every entry
        of NAME, ``--set ALIAS.P=V`` to the aliased one, and a variant's own parameters win."""
        alias, _rest = split_alias(entry)
        name, own = parse_variant(entry)
        given = dict(settings.get(name, {})) | dict(settings.get(alias or name, {})) | own
        return cls.of(name, given, label=entry_label(entry))

    def build(self) -> Algorithm:
        """A fresh model of this configuration."""
        return build_algorithm(self.name, self.params)

    @property
    def warm_starts(self) -> bool:
        return bool(self.canonical.get("warm_start", False))

    def cold(self) -> AlgorithmSpec:
        """The same configuration fitted from scratch (hold-out splits have no previous fold)."""
        if not self.warm_starts:
            return self
        return AlgorithmSpec.of(self.name, {**self.params, "warm_start": False}, label=self.label)
