"""``overlap_protocols.csv`` of ``sweval compare``: how different another protocol's lists are
from SW-EVAL's for the same user and test instance (papers/000 Fig. 7's extrinsic overlap).

Pairing: an evaluated user u of a split of protocol P has a reference time t_u (the held-out
transaction's time for ``loocv`` and ``leave-last-one-out``, the first test transaction for
``temporal-global``). The SW-EVAL fold f with t_f ≤ t_u < t_f + tΔ, when u is eligible in it,
scored the same test instance from a model trained on D_{t_f} only; P's model may have seen
later transactions. For each algorithm and k::

    J@k = mean over the paired users of |L_P(u) ∩ L_SW(u, f)| / |L_P(u) ∪ L_SW(u, f)|

(:func:`evaluators.stats.overlap.jaccard`, top-k sets, empty slots left out). One row per
(protocol, split, algorithm, k): ``protocol, split, algorithm, k, jaccard, n_users``; n_users
counts the paired users (0 when none of the split's test instances falls in an evaluated
SW-EVAL window: jaccard is then empty). Lower than the seeds' intrinsic overlap
(``overlap.csv`` with ``--seeds`` in ``sweval run``) means the protocol changes what users are
shown, not only noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.log import InteractionLog
from sweval.evaluators.experiments.protocol_runs import ProtocolRun
from sweval.evaluators.protocols.holdout import Protocol
from sweval.evaluators.stats.overlap import jaccard
from sweval.evaluators.units.store import UnitStore

COLUMNS = ["protocol", "split", "algorithm", "k", "jaccard", "n_users"]
REFERENCE = "sw-eval"


def _unit_keys(run: ProtocolRun) -> dict[tuple[int, str], str]:
    if run.units.empty:
        return {}
    return {(int(row.fold), str(row.algorithm)): str(row.unit_key)
            for row in run.units.itertuples(index=False)}


def protocol_overlap(
    log: InteractionLog,
    protocols: Sequence[Protocol],
    runs: Mapping[str, ProtocolRun],
    store: UnitStore,
    ks: list[int],
) -> pd.DataFrame:
    """J@k of every other protocol's lists against SW-EVAL's, per split and algorithm (empty
    without ``sw-eval`` among ``protocols``)."""
    by_name = {protocol.name: protocol for protocol in protocols}
    if REFERENCE not in by_name or REFERENCE not in runs:
        return pd.DataFrame(columns=COLUMNS)
    depth = max(ks)
    reference_keys = _unit_keys(runs[REFERENCE])
    windows: list[tuple[int, int, NDArray[np.int64], dict[str, NDArray[np.int64]]]] = []
    for split in by_name[REFERENCE].splits(log):
        lists = {name: store.load(key, split.log).items[:, :depth]
                 for (fold, name), key in reference_keys.items() if fold == split.index}
        if lists:
            windows.append((split.t_start, split.t_end, split.users, lists))
    rows: list[dict[str, object]] = []
    for protocol in protocols:
        if protocol.name == REFERENCE:
            continue
        keys = _unit_keys(runs[protocol.name])
        for split in protocol.splits(log):
            for (fold, name), key in keys.items():
                if fold != split.index:
                    continue
                mine = store.load(key, split.log).items[:, :depth]
                values = _paired_values(split.users, split.reference_time, mine, windows, name, ks)
                rows += [
                    {"protocol": protocol.name, "split": split.index, "algorithm": name, "k": k,
                     "jaccard": float(values[k].mean()) if len(values[k]) else np.nan,
                     "n_users": len(values[k])}
                    for k in ks
                ]
    return pd.DataFrame(rows, columns=COLUMNS)


def _paired_values(
    users: NDArray[np.int64],
    reference_time: NDArray[np.int64],
    lists: NDArray[np.int64],
    windows: list[tuple[int, int, NDArray[np.int64], dict[str, NDArray[np.int64]]]],
    name: str,
    ks: list[int],
) -> dict[int, NDArray[np.float64]]:
    """Per-user J@k of ``lists`` against the SW-EVAL window holding each user's test instance."""
    values: dict[int, list[NDArray[np.float64]]] = {k: [] for k in ks}
    for t_start, t_end, eligible, reference in windows:
        if name not in reference:
            continue
        inside = (reference_time >= t_start) & (reference_time < t_end)
        _, mine, theirs = np.intersect1d(users[inside], eligible, return_indices=True)
        if not len(mine):
            continue
        rows = np.flatnonzero(inside)[mine]
        for k, found in jaccard(lists[rows], reference[name][theirs], ks).items():
            values[k].append(found)
    return {k: np.concatenate(parts) if parts else np.zeros(0) for k, parts in values.items()}
