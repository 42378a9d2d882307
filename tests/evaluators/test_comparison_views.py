"""The comparison's display tables (``evaluators.experiments.compare_views``), on hand-made frames."""

from __future__ import annotations

import pandas as pd

from sweval.evaluators.experiments.compare_views import (
    LEAKAGE_BUG,
    kendall_view,
    leakage_view,
    overlap_view,
    rank_shift_view,
)


def test_kendall_view_writes_tau_and_p_per_k_and_a_dash_where_undefined():
    kendall = pd.DataFrame({
        "protocol_a": ["sw-eval", "sw-eval", "sw-eval", "sw-eval"],
        "protocol_b": ["loocv", "loocv", "leave-last-one-out", "leave-last-one-out"],
        "metric": "recall", "k": [5, 10, 5, 10],
        "tau": [1 / 3, -1.0, float("nan"), 0.0], "p_value": [0.75, 0.0833, float("nan"), 1.0],
        "n_algorithms": [4, 4, 1, 2], "algorithms": "",
    })
    view = kendall_view(kendall, [5, 10])
    assert view.columns.tolist() == ["protocols", "n", "k=5", "k=10"]
    assert view.values.tolist() == [
        ["sw-eval vs loocv", "4", "+0.33 (p=0.75)", "-1.00 (p=0.08)"],
        ["sw-eval vs leave-last-one-out", "2", "—", "+0.00 (p=1.00)"],
    ]


def test_rank_shift_view_marks_gains_losses_and_absent_algorithms():
    shifts = pd.DataFrame({
        "k": 10,
        "algorithm": ["pop-n", "pop-n", "NA", "NA", "item-knn", "item-knn"],
        "protocol": ["sw-eval", "loocv"] * 3,
        "rank": pd.array([1, None, 2, 2, 3, 1], dtype="Int64"),
        "shift": pd.array([0, None, 0, 0, 0, 2], dtype="Int64"),
    })
    other_k = shifts.assign(k=5, rank=pd.array([9] * 6, dtype="Int64"))
    view = rank_shift_view(pd.concat([other_k, shifts]), ["sw-eval", "loocv"], 10)
    assert view.values.tolist() == [["pop-n", "1", "—"], ["NA", "2", "2"],
                                     ["item-knn", "3", "1 ↑2"]]
    down = shifts.assign(rank=pd.array([1, 3, 2, 2, 3, 1], dtype="Int64"),
                         shift=pd.array([0, -2, 0, 0, 0, 2], dtype="Int64"))
    assert rank_shift_view(down, ["sw-eval", "loocv"], 10).iloc[0, 2] == "3 ↓2"


def test_leakage_view_counts_share_and_says_why():
    leakage = pd.DataFrame({
        "protocol": ["sw-eval", "temporal-global", "loocv", "loocv"],
        "algorithm": ["pop", "pop", "pop", "pop"], "k": [10, 10, 10, 20],
        "n_splits": 1, "n_lists": [1200, 10, 3000, 3000],
        "n_recommended": [12000, 100, 30000, 60000], "n_future": [0, 3, 1404, 2000],
        "share_future": [0.0, 0.03, 1404 / 30000, 2000 / 60000],
        "n_lists_with_future": [0, 2, 1175, 1500],
    })
    view = leakage_view(leakage, 10)
    assert view.values.tolist() == [
        ["sw-eval", "pop", "1,200", "12,000", "0", "0.00%", "0", "0 by construction"],
        ["temporal-global", "pop", "10", "100", "3", "3.00%", "2", LEAKAGE_BUG],
        ["loocv", "pop", "3,000", "30,000", "1,404", "4.68%", "1,175", "ignores the timeline"],
    ]


def test_overlap_view_weights_each_split_by_its_paired_users():
    overlap = pd.DataFrame({
        "protocol": ["loocv", "loocv", "loocv", "leave-last-one-out", "loocv"],
        "split": [0, 1, 2, 0, 0], "algorithm": ["pop", "pop", "pop", "item-knn", "pop"],
        "k": [10, 10, 10, 10, 5], "jaccard": [0.5, 1.0, 0.0, 0.25, 0.9],
        "n_users": [2, 6, 0, 4, 8],
    })
    view = overlap_view(overlap, 10)
    # (0.5·2 + 1.0·6) / 8 = 0.875; the split without paired users does not count
    assert view.columns.tolist() == ["protocol", "pop", "item-knn"]
    assert view.values.tolist() == [["loocv", "0.88 (8)", ""],
                                     ["leave-last-one-out", "", "0.25 (4)"]]
    assert overlap_view(overlap.assign(n_users=0), 10) is None
    # a protocol that paired no user keeps its row, saying so (it was dropped)
    unpaired = pd.concat([overlap, pd.DataFrame({
        "protocol": ["random-split"], "split": [0], "algorithm": ["pop"], "k": [10],
        "jaccard": [float("nan")], "n_users": [0]})], ignore_index=True)
    assert overlap_view(unpaired, 10).values.tolist()[-1] == ["random-split", "— (0)", ""]
