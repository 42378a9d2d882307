"""Stratification by logging policy π (SPEC §6).

Two modes, both reported next to the unstratified stratum ``all``:

``subset`` (the paper's Table 3)
    The whole protocol runs on D^π alone: training data, test data and eligibility are restricted
    to π's transactions, and u_min applies per stratum. Windows are the ones of the full log, so
    fold f means the same time span in every stratum.

``test``
    Models train on all of D_{t_f}; only the eligible users are grouped by the policies of their
    test transactions (a user with several policies counts in each group). u_min applies per
    group.

Because policies partition the transactions, a stratum's eligible users are always a subset of
U_f, so a fold skipped for ``all`` is skipped for every stratum too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.metrics.measures import FoldLevel
from sweval.evaluators.protocols.folds import Fold, build_folds
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.run.results import ResultRow, skipped_rows, unit_rows
from sweval.evaluators.units.engine import UnitResult

Mode = Literal["subset", "test"]


@dataclass(frozen=True)
class Strata:
    """The policy strata of a run.

    Attributes:
        mode: ``subset`` or ``test``.
        labels: the policy labels, in id order.
        logs: per label, D^π (mode ``subset`` only).
        folds: per label, the folds of D^π over the run's windows (mode ``subset`` only).
    """

    mode: Mode
    labels: list[str]
    logs: dict[str, InteractionLog] = field(default_factory=dict)
    folds: dict[str, list[Fold]] = field(default_factory=dict)


def build_strata(
    log: InteractionLog, spec: WindowSpec, *, u_min: int, mode: Mode, column: str
) -> Strata:
    """Prepare the strata of ``log`` by its policy column.

    Raises:
        SwevalError: the log has no policy column, or the mode is unknown.
    """
    if log.policy is None or log.policy_ids is None:
        raise SwevalError(
            f"{log.source}: --stratify-by {column!r} needs that column in the data "
            "(it was not loaded; pass --policy-col too if it has another name)."
        )
    if mode not in ("subset", "test"):
        raise SwevalError(f"--stratify-mode must be 'subset' or 'test', not {mode!r}.")
    labels = [str(label) for label in log.policy_ids]
    if mode == "test":
        return Strata(mode=mode, labels=labels)
    fixed = WindowSpec(
        width_s=spec.width_s,
        n_folds=spec.n_folds,
        start=spec.first_start(log.t_max),
        train_window_s=spec.train_window_s,
    )
    logs, folds = {}, {}
    for code, label in enumerate(labels):
        sub = log.restrict(log.policy == code)
        logs[label] = sub
        folds[label] = _folds_or_none(sub, fixed, u_min)
    return Strata(mode=mode, labels=labels, logs=logs, folds=folds)


def _folds_or_none(log: InteractionLog, spec: WindowSpec, u_min: int) -> list[Fold]:
    """Folds of a stratum; a stratum whose data lies outside every window gets all-skipped folds."""
    try:
        return build_folds(log, spec, u_min=u_min)
    except SwevalError:
        empty = np.zeros(0, dtype=np.int64)
        return [
            Fold(index=f, t_start=a, t_end=b, train_lo=0, train_hi=0, test_lo=0, test_hi=0,
                 eligible_users=empty, n_test_users=0, skip_reason="no data of this stratum")
            for f, (a, b) in enumerate(spec.bounds(log.t_max))
        ]


def groups_by_test_policy(
    log: InteractionLog, fold: Fold, users: NDArray[np.int64], labels: list[str]
) -> dict[str, NDArray[np.bool_]]:
    """Mode ``test``: per policy, which of ``users`` have a test transaction of that policy."""
    if log.policy is None:
        raise ValueError("the log has no policy column")
    user = log.user[fold.test_lo : fold.test_hi]
    policy = log.policy[fold.test_lo : fold.test_hi]
    position = np.searchsorted(users, user)
    position = np.minimum(position, max(len(users) - 1, 0))
    known = (users[position] == user) if len(users) else np.zeros(len(user), dtype=bool)
    groups = {}
    for code, label in enumerate(labels):
        mask = np.zeros(len(users), dtype=bool)
        mask[position[known & (policy == code)]] = True
        groups[label] = mask
    return groups


def group_rows(
    strata: Strata,
    log: InteractionLog,
    fold: Fold,
    all_unit: UnitResult,
    *,
    ks: list[int],
    u_min: int,
    config_hash: str,
    metrics: list[str] | None = None,
    fold_level: FoldLevel | None = None,
) -> list[ResultRow]:
    """Mode ``test``: the rows of every policy group of one (fold, algorithm) unit, from the
    unstratified unit's per-user values and lists (groups with fewer than u_min users are
    skipped); ``metrics``, ``fold_level`` as in :func:`~evaluators.run.results.unit_rows`."""
    rows: list[ResultRow] = []
    groups = groups_by_test_policy(log, fold, all_unit.users, strata.labels)
    for label, mask in groups.items():
        size = int(mask.sum())
        if size < u_min:
            rows += skipped_rows(
                fold, all_unit.algorithm, ks, stratum=label, n_users=size,
                reason=f"n_eligible={size} < u_min={u_min}", config_hash=config_hash,
                metrics=metrics,
            )
        else:
            group = unit_rows(fold, all_unit, groups={label: mask}, config_hash=config_hash,
                              fold_level=fold_level)
            for row in group:
                row["n_eligible"] = size
            rows += group
    return rows
