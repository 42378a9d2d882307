"""POP and POP-N against a slow, obviously-correct reference, and the shared top-k tie-break."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import DAY

from sweval.algorithms.ranking import top_k
from sweval.algorithms.registry import build_algorithm
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.units.engine import evaluate_unit


def reference_lists(log: InteractionLog, fold, algorithm: str, k: int, n_recent: int) -> dict:
    """Plain-Python POP / POP-N: count, sort by (-count, item id), skip seen items."""
    train = [
        (log.user_ids[u], log.item_ids[i])
        for u, i in zip(log.user[fold.train_lo : fold.train_hi], log.item[fold.train_lo : fold.train_hi])
    ]
    catalogue = {i for _, i in train}
    counted = train if algorithm == "pop" else train[-n_recent:]
    counts = {i: 0 for i in catalogue}
    for _, i in counted:
        counts[i] += 1
    ranking = sorted(catalogue, key=lambda i: (-counts[i], i))
    lists = {}
    for code in fold.eligible_users:
        user = log.user_ids[code]
        seen = {i for u, i in train if u == user}
        lists[user] = [i for i in ranking if i not in seen][:k]
    return lists


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 12), st.integers(0, 30), st.integers(0, 4 * DAY)),
        min_size=2,
        max_size=150,
    ),
    algorithm=st.sampled_from(["pop", "pop-n"]),
    n_recent=st.integers(1, 40),
    dedup=st.sampled_from(["first", "none"]),
)
def test_pop_and_pop_n_match_reference(rows, algorithm, n_recent, dedup):
    log = InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]), dedup=dedup)
    k = 5
    params = {"n_recent": n_recent} if algorithm == "pop-n" else {}
    for fold in build_folds(log, WindowSpec(width_s=DAY, n_folds=3), u_min=0):
        if fold.n_eligible == 0:
            continue
        unit = evaluate_unit(log, fold, build_algorithm(algorithm, params), ks=[k], keep_lists=True)
        got = {
            log.user_ids[u]: [log.item_ids[i] for i in row if i >= 0]
            for u, row in zip(unit.users, unit.recommended[:, :k])
        }
        assert got == reference_lists(log, fold, algorithm, k, n_recent)


def test_pop_by_hand():
    # Training (day 0): item 1 ×3, item 2 ×2, item 3 ×2, item 4 ×1.  Test day 1: user 9.
    rows = [(1, 1, 0), (2, 1, 1), (3, 1, 2), (1, 2, 3), (2, 2, 4), (3, 3, 5), (9, 3, 6), (4, 4, 7),
            (9, 2, DAY + 1), (9, 4, DAY + 2)]
    log = InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]))
    (fold,) = build_folds(log, WindowSpec(width_s=DAY, n_folds=1), u_min=0)
    unit = evaluate_unit(log, fold, build_algorithm("pop"), ks=[1, 2, 3], keep_lists=True)
    # user 9 has seen item 3: ranking 1 (3), 2 (2), [3 seen], 4 (1)
    assert log.item_ids[unit.recommended[0, :3]].tolist() == [1, 2, 4]
    # Rel = {2, 4}: Recall@1 = 0, @2 = 1/2, @3 = 2/2
    assert [unit.values[("recall", k)][0] for k in (1, 2, 3)] == [0.0, 0.5, 1.0]


def test_pop_n_counts_only_the_last_n_transactions():
    rows = [(1, 1, 0), (2, 1, 1), (3, 1, 2), (1, 2, 3), (2, 3, 4), (9, 5, 5), (9, 6, DAY + 1)]
    log = InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]))
    (fold,) = build_folds(log, WindowSpec(width_s=DAY, n_folds=1), u_min=0)
    unit = evaluate_unit(log, fold, build_algorithm("pop-n", {"n_recent": 2}), ks=[3], keep_lists=True)
    # last 2 training transactions: (2,3) and (9,5) -> items 3 and 5 score 1, items 1 and 2
    # score 0 although item 1 is the most popular overall; user 9 has seen 5.
    assert log.item_ids[unit.recommended[0, :3]].tolist() == [3, 1, 2]


def test_top_k_ties_by_column_and_padding():
    scores = np.array(
        [
            [1.0, 3.0, 3.0, 2.0, 3.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [-np.inf, 5.0, -np.inf, -np.inf, -np.inf],
        ]
    )
    assert top_k(scores, 3).tolist() == [[1, 2, 4], [0, 1, 2], [1, -1, -1]]
    assert top_k(scores, 7)[0].tolist() == [1, 2, 4, 3, 0, -1, -1]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(-2, 3), min_size=6, max_size=6), min_size=1, max_size=5),
    st.integers(1, 8),
)
def test_top_k_equals_a_stable_full_sort(rows, k):
    scores = np.array(rows, dtype=np.float64)
    scores[scores == -2] = -np.inf  # excluded entries
    expected = []
    for row in scores:
        order = [c for c in sorted(range(len(row)), key=lambda c: (-row[c], c)) if np.isfinite(row[c])]
        expected.append((order + [-1] * k)[:k])
    assert top_k(scores, k).tolist() == expected


def test_unknown_parameter_is_rejected():
    with pytest.raises(SwevalError, match="pop-n.*n_recnt"):
        build_algorithm("pop-n", {"n_recnt": 3})
    with pytest.raises(SwevalError, match="unknown algorithm 'popp'"):
        build_algorithm("popp")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, -np.inf, np.nan]), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 11)), max_size=40),
    st.lists(st.integers(0, 5), max_size=8),
    st.integers(1, 14),
)
def test_global_ranking_fast_path_equals_dense_top_k(item_scores, seen_pairs, rows, k):
    """Shared scores (ties, -inf and NaN included), any rows in any order, any k."""
    import scipy.sparse as sp
    from sweval_testing import exclude_seen

    from sweval.algorithms.ranking import top_k_global

    n_items = len(item_scores)
    pairs = [(u, i) for u, i in seen_pairs if i < n_items]
    rows_, cols_ = (zip(*pairs) if pairs else ((), ()))
    matrix = sp.csr_matrix((np.ones(len(pairs)), (list(rows_), list(cols_))), shape=(6, n_items))
    matrix.sum_duplicates()
    rows = np.array(rows, dtype=np.int64)
    scores = np.broadcast_to(np.array(item_scores, dtype=float), (len(rows), n_items)).copy()
    exclude_seen(scores, matrix, rows)
    expected = top_k(scores, k).tolist()
    assert top_k_global(np.array(item_scores, dtype=float), matrix, rows, k).tolist() == expected
