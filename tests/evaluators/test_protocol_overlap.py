"""overlap_protocols.csv of sweval compare: each protocol's lists against SW-EVAL's for the same
user and test instance, checked against a slow reference that pairs users by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sweval_testing import DAY, T0, log_frame

from sweval.data.log import InteractionLog
from sweval.evaluators.experiments.protocol_overlap import protocol_overlap
from sweval.evaluators.experiments.protocol_runs import run_protocol
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.holdout import LeaveLastOneOut, SlidingWindow
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.units.store import UnitStore


def raw_lists(store, key, log, k):
    """{raw user id: set of its top-k raw item ids} of a stored unit."""
    lists = store.load(key, log)
    return {log.user_ids[u]: {log.item_ids[i] for i in row[:k] if i >= 0}
            for u, row in zip(lists.users, lists.items, strict=True)}


def test_leave_last_one_out_against_sw_eval_matches_a_slow_pairing(tmp_path):
    log = InteractionLog.from_frame(log_frame(8))
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=4, start=T0 + 4 * DAY), u_min=2)
    protocols = [SlidingWindow(folds), LeaveLastOneOut(u_min=2)]
    store = UnitStore(tmp_path).prepare()
    names, ks = ["pop", "item-knn"], [3, 5]
    runs = {p.name: run_protocol(log, p, names, ks=ks, store=store) for p in protocols}
    found = protocol_overlap(log, protocols, runs, store, ks)

    frame = log.to_frame()
    last = frame.groupby("user").filter(lambda rows: len(rows) >= 2).groupby("user").tail(1)
    keys = {p: {(r.fold, r.algorithm): r.unit_key for r in runs[p].units.itertuples()}
            for p in runs}
    for name in names:
        for k in ks:
            values = []
            for row in last.itertuples():
                fold = next((f for f in folds if f.t_start <= row.timestamp < f.t_end), None)
                if fold is None or fold.skipped or (fold.index, name) not in keys["sw-eval"]:
                    continue
                reference = raw_lists(store, keys["sw-eval"][(fold.index, name)], log, k)
                if row.user not in reference:  # not eligible in that fold
                    continue
                mine = set(list(_ranked(store, keys["leave-last-one-out"][(0, name)], log,
                                        row.user))[:k])
                theirs = reference[row.user]
                union = mine | theirs
                values.append(len(mine & theirs) / len(union) if union else 1.0)
            row_found = found[(found["protocol"] == "leave-last-one-out")
                              & (found["algorithm"] == name) & (found["k"] == k)]
            assert len(row_found) == 1 and row_found["n_users"].iloc[0] == len(values) > 0
            assert row_found["jaccard"].iloc[0] == pytest.approx(np.mean(values))


def _ranked(store, key, log, user):
    lists = store.load(key, log)
    row = lists.items[list(log.user_ids[lists.users]).index(user)]
    return [log.item_ids[i] for i in row if i >= 0]


def test_the_printed_table_pools_the_paired_users_of_all_splits():
    from types import SimpleNamespace

    import pandas as pd
    from rich.console import Console

    from sweval.flows.cli.compare_tables import overlap_rich

    frame = pd.DataFrame([
        ("loocv", 0, "pop", 10, 0.5, 2), ("loocv", 1, "pop", 10, 1.0, 6),
        ("loocv", 2, "pop", 10, np.nan, 0), ("loocv", 0, "pop", 5, 0.0, 2),
    ], columns=["protocol", "split", "algorithm", "k", "jaccard", "n_users"])
    console = Console(width=120, record=True)
    console.print(overlap_rich(SimpleNamespace(overlap=frame, ks=[5, 10])))
    assert "0.88 (8)" in console.export_text()  # (0.5·2 + 1.0·6) / 8
    assert overlap_rich(SimpleNamespace(overlap=frame.assign(n_users=0), ks=[10])) is None
