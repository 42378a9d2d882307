"""``--seeds``: stochastic algorithms once per seed, as variants, and which labels differ only
in their seed (the pairs of intrinsic overlap, papers/000 Fig. 7).

An algorithm is stochastic when its configuration has a ``seed`` or ``random_state`` parameter
(svd, als). With ``--seeds 0,1,2`` the entry ``als`` becomes ``als(seed=0)``, ``als(seed=1)``,
``als(seed=2)`` and ``als(factors=32)`` becomes ``als(factors=32,seed=0)``, ...; an aliased
``a=als`` becomes ``a(seed=0)=als(seed=0)``, ... (labelled ``a(seed=0)``); every other entry
stays as it is. A variant with the default seed shares its units with the plain entry.
"""

from __future__ import annotations

import itertools
from typing import Any

from sweval.algorithms.registry import ALGORITHMS, algorithm_class
from sweval.data.errors import SwevalError
from sweval.evaluators.config.text import parse_variant, split_alias
from sweval.evaluators.units.algorithm_spec import variant_label

#: The names a seed parameter goes by.
SEED_PARAMETERS = ("seed", "random_state")


def seed_parameter(name: str) -> str | None:
    """The seed parameter of algorithm ``name``, or None for a deterministic one."""
    fields = algorithm_class(name).Config.model_fields
    return next((field for field in SEED_PARAMETERS if field in fields), None)


def expand_seeds(
    entries: list[str], seeds: list[int], settings: dict[str, dict[str, Any]] | None = None
) -> list[str]:
    """The ``--algorithms`` entries with every stochastic one repeated once per seed.

    Raises:
        SwevalError: an entry sets its seed itself, or ``--set`` (``settings``) does; no entry
            has a seed.
    """
    if not seeds:
        return list(entries)
    expanded: list[str] = []
    for entry in entries:
        alias, _rest = split_alias(entry)
        name, params = parse_variant(entry)
        field = seed_parameter(name)
        if field is None:
            expanded.append(entry)
            continue
        if field in params:
            raise SwevalError(
                f"--seeds: {entry!r} sets its {field} itself; drop it or drop --seeds."
            )
        if field in (settings or {}).get(name, {}):
            raise SwevalError(
                f"--seeds: --set {name}.{field} sets the seed of every {name} entry; drop one."
            )
        expanded += [(f"{alias}({field}={seed})=" if alias else "")
                     + variant_label(name, params | {field: seed}) for seed in seeds]
    if expanded == list(entries):
        raise SwevalError(
            f"--seeds: none of {', '.join(entries)} has a seed parameter (svd and als do)."
        )
    return expanded


def seed_pairs(labels: list[str]) -> list[tuple[str, str]]:
    """The pairs of ``labels`` (in their order) that are one configuration with two seeds."""
    groups: dict[str, list[str]] = {}
    for label in labels:
        name, params = parse_variant(label)
        field = seed_parameter(name) if name in ALGORITHMS else None
        if field is None or field not in params:
            continue
        rest: dict[str, Any] = {key: value for key, value in params.items() if key != field}
        groups.setdefault(f"{name}{sorted(rest.items())}", []).append(label)
    return [pair for members in groups.values() for pair in itertools.combinations(members, 2)]

