"""The contract every algorithm keeps (SPEC §3), checked on every built-in through the registry:
the kit users run on their own models (:mod:`sweval.testing`), plus what only built-ins promise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.algorithms.registry import ALGORITHMS, build_algorithm
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.units.engine import evaluate_unit
from sweval.testing import CHECKS

#: Small settings keep the suite fast. The checkerboard's known answer needs enough of a model
#: to see it: every item-kNN neighbour of the colour (4), ALS regularised, BPR's 50 epochs of
#: nnz steps at a higher rate (the default 0.01 learns little from 90 pairs).
PARAMS: dict[str, dict] = {
    "pop": {},
    "pop-n": {"n_recent": 50},  # the random logs' tail; the whole checkerboard (40)
    "item-knn": {"n_neighbors": 4},
    "user-knn": {"n_neighbors": 2},
    "svd": {"factors": 4},
    "als": {"factors": 4, "iterations": 15, "regularization": 0.1, "device": "cpu"},
    "bpr": {"factors": 8, "iterations": 50, "learning_rate": 0.1, "device": "cpu"},
    "lmf": {"factors": 8, "iterations": 30},
    "ease": {"l2": 1.0},
    "decay-pop": {"period": "1D", "horizon": 3},  # the synthetic logs span days
}

NAMES = list(PARAMS)


def test_suite_covers_every_registered_algorithm():
    assert set(NAMES) == set(ALGORITHMS)


def log_of(rows: list[tuple]) -> InteractionLog:
    return InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]))


def folds_of(log: InteractionLog, n_folds: int = 3):
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=n_folds), u_min=0)
    return [f for f in folds if not f.skipped]


def run(name: str, log: InteractionLog, fold, k: int = 10, **overrides) -> np.ndarray:
    algo = build_algorithm(name, {**PARAMS[name], **overrides})
    result = evaluate_unit(log, fold, algo, ks=[5, k], keep_lists=True)
    assert result.recommended is not None
    return result.recommended


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
@pytest.mark.parametrize("name", NAMES)
def test_every_builtin_keeps_the_contract(name, check):
    """The contract kit users run on their own models (``sweval.testing``)."""
    check(name, PARAMS[name])


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("als", "bpr", "lmf")])
def test_all_tied_scores_come_in_item_id_order(name):
    # Six users with one distinct item each: no overlap, every count 1. POP, POP-N, both kNN,
    # SVD at full rank (f = 6), EASE (RᵀR diagonal, so B = 0) and DecayPop (one period) score
    # every candidate alike, so the list is the id order. (Factor models start from random
    # factors: no exact ties.)
    rows = [(u, 10 + u, 100 * u) for u in range(6)]
    rows += [(u, 10 + (u + 1) % 6, DAY + 5) for u in range(6)]
    log = log_of(rows)
    (fold,) = folds_of(log, n_folds=1)
    lists = run(name, log, fold, k=6, **({"factors": 6} if name == "svd" else {}))
    ids = log.item_ids
    for user, items in zip(fold.eligible_users, lists, strict=True):
        own = 10 + int(log.user_ids[user])
        expected = [i for i in range(10, 16) if i != own] + [None]
        assert [None if c < 0 else int(ids[c]) for c in items] == expected


@pytest.mark.parametrize("name", NAMES)
def test_unknown_parameter_is_a_user_error(name):
    with pytest.raises(SwevalError, match="no_such_param"):
        build_algorithm(name, {"no_such_param": 1})


@pytest.mark.parametrize("name", NAMES)
def test_every_parameter_is_documented(name):
    for field_name, field in ALGORITHMS[name].Config.model_fields.items():
        assert field.description, f"{name}.{field_name} has no description"
