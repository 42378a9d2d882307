"""Incremental folds (evaluators/protocols/training_state.py): every fold's training data advanced from the
previous fold's equals the one built from the whole log, array for array, and so do the units'
lists, on random logs (ties in time, repeated pairs with each --dedup mode, ids that sort before
the ones already seen, users and items appearing late, empty windows, folds left out). The item
co-occurrences carried along (algorithms/cooccurrence.py) equal RᵀR of every fold, and item-kNN's
similarity rows and lists from them equal those of the walk over the from-scratch data, bit for
bit."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import DAY, plain_python

from sweval.algorithms import cooccurrence as cooccurrence_module
from sweval.algorithms.knn import ItemKNN
from sweval.algorithms.registry import build_algorithm
from sweval.algorithms.train_data import TrainData
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols import training_state
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.splits import fold_splits
from sweval.evaluators.protocols.training_state import IncrementalTraining, TrainingState
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.units.engine import compute_lists, list_length


@st.composite
def logs(draw) -> InteractionLog:
    """A random log: few distinct timestamps (ties), repeated pairs, integer ids or string ids
    (``u10`` sorts before ``u2``: a late id often takes a row or column before old ones), quiet
    days (empty windows)."""
    n = draw(st.integers(1, 120))
    users = draw(st.lists(st.integers(0, 15), min_size=n, max_size=n))
    items = draw(st.lists(st.integers(0, 25), min_size=n, max_size=n))
    days = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    hours = draw(st.lists(st.sampled_from([0, 6, 12]), min_size=n, max_size=n))
    frame = pd.DataFrame({
        "user": users, "item": items,
        "timestamp": np.array(days) * DAY + np.array(hours) * 3600,
    })
    if draw(st.booleans()):
        frame["user"] = "u" + frame["user"].astype(str)
        frame["item"] = "i" + frame["item"].astype(str)
    return InteractionLog.from_frame(frame, dedup=draw(st.sampled_from(["first", "none"])))


def assert_same(got: TrainData, expected: TrainData) -> None:
    """Every array of the two, values and dtypes, and the scalars."""
    assert got.matrix.shape == expected.matrix.shape
    assert got.matrix.has_sorted_indices and expected.matrix.has_sorted_indices
    for name in ("data", "indices", "indptr"):
        a, b = getattr(got.matrix, name), getattr(expected.matrix, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    for name in ("user_codes", "item_codes", "item_sequence", "user_sequence", "timestamps"):
        a, b = getattr(got, name), getattr(expected, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.cutoff == expected.cutoff
    # the carried popularity counts, on both paths: the transactions per column
    counted = np.bincount(expected.item_sequence, minlength=expected.n_items)
    for data in (got, expected):
        assert data.item_counts is not None and data.item_counts.dtype == np.int64
        np.testing.assert_array_equal(data.transactions_per_item(), counted)
    assert got.raw_user_ids is expected.raw_user_ids
    assert got.raw_item_ids is expected.raw_item_ids
    if got.cooccurrence is not None:
        assert_cooccurrence(got, expected)


def assert_cooccurrence(got: TrainData, expected: TrainData) -> None:
    """The carried C equals RᵀR off the diagonal of the from-scratch matrix, and the users
    per item its column counts (zero for the items not in the fold)."""
    assert got.cooccurrence is not None
    binary = expected.matrix.astype(np.int64)
    gram = (binary.T @ binary).toarray()
    np.fill_diagonal(gram, 0)
    np.testing.assert_array_equal(got.cooccurrence.to_csr(got.item_codes).toarray(), gram)
    users = np.zeros(got.cooccurrence.n_items, dtype=np.int64)
    users[expected.item_codes] = np.diff(expected.matrix.tocsc().indptr)
    np.testing.assert_array_equal(got.cooccurrence.item_users, users)


class recent_share:
    """Sets :data:`algorithms.cooccurrence.RECENT_SHARE` for a block (0: C's newer part is
    merged into the older at every fold; huge: never)."""

    def __init__(self, share: float) -> None:
        self.share = share

    def __enter__(self) -> None:
        self.saved = cooccurrence_module.RECENT_SHARE
        cooccurrence_module.RECENT_SHARE = self.share

    def __exit__(self, *exc: object) -> None:
        cooccurrence_module.RECENT_SHARE = self.saved


@settings(max_examples=300, deadline=None)
@given(
    log=logs(),
    width=st.sampled_from([6 * 3600, DAY, 2 * DAY]),
    n_folds=st.integers(1, 12),
    train_window=st.sampled_from([None, None, 2 * DAY]),
    visit=st.lists(st.booleans(), min_size=12, max_size=12),
    back=st.integers(0, 11),
    cooccurrence=st.booleans(),
    share=st.sampled_from([0.0, 2.0, 1e9]),
)
@pytest.mark.slow
def test_advanced_folds_equal_folds_built_from_scratch(
    log, width, n_folds, train_window, visit, back, cooccurrence, share
):
    spec = WindowSpec(width_s=width, n_folds=n_folds, train_window_s=train_window)
    folds = build_folds(log, spec, u_min=0)
    incremental = IncrementalTraining(log, cooccurrence=cooccurrence)
    visited = [fold for fold, keep in zip(folds, visit) if keep]  # folds left out: skipped
    with recent_share(share):
        for fold in visited:
            got = incremental.train_data(fold)
            assert_same(got, fold.train_data(log))
            # carried exactly when asked for, on the advanced path only: a sliding window that
            # drops old transactions (train_lo > 0) is built from scratch
            assert (got.cooccurrence is not None) == (cooccurrence and fold.train_lo == 0)
        if folds:  # a fold behind the state (out of order): from scratch, the state stays
            fold = folds[min(back, len(folds) - 1)]
            assert_same(incremental.train_data(fold), fold.train_data(log))
        for fold in visited[-2:]:
            assert_same(incremental.train_data(fold), fold.train_data(log))


def item_knn_rows(data: TrainData, n_neighbors: int):
    """Item-kNN's whole similarity matrix (sorted CSR) on ``data``, and its fitted model."""
    model = ItemKNN(n_neighbors=n_neighbors).fit(data)
    return model.similarity().copy(), model


@settings(max_examples=200, deadline=None)
@given(
    log=logs(),
    width=st.sampled_from([6 * 3600, DAY, 2 * DAY]),
    n_folds=st.integers(1, 10),
    train_window=st.sampled_from([None, None, None, 2 * DAY]),
    visit=st.lists(st.booleans(), min_size=10, max_size=10),
    back=st.integers(0, 9),
    n_neighbors=st.sampled_from([0, 1, 2, 3, 100]),
    share=st.sampled_from([0.0, 2.0, 1e9]),
    k=st.integers(1, 6),
)
@pytest.mark.slow
def test_item_knn_from_carried_cooccurrences_equals_the_walk(
    log, width, n_folds, train_window, visit, back, n_neighbors, share, k
):
    """Similarity rows (columns, floats) and lists of item-kNN on advanced folds carrying C
    equal those on folds built from scratch (the walk), folds in order, left out, repeated
    and out of order; sliding windows never carry C."""
    spec = WindowSpec(width_s=width, n_folds=n_folds, train_window_s=train_window)
    folds = build_folds(log, spec, u_min=0)
    incremental = IncrementalTraining(log, cooccurrence=True)
    visited = [fold for fold, keep in zip(folds, visit) if keep]
    if folds:
        visited += [folds[min(back, len(folds) - 1)]] + visited[-1:]
    with recent_share(share):
        for fold in visited:
            advanced, scratch = incremental.train_data(fold), fold.train_data(log)
            assert scratch.cooccurrence is None
            if fold.train_lo > 0:  # a sliding window that dropped transactions
                assert advanced.cooccurrence is None
            got, model = item_knn_rows(advanced, n_neighbors)
            expected, reference = item_knn_rows(scratch, n_neighbors)
            for name in ("indptr", "indices", "data"):
                np.testing.assert_array_equal(getattr(got, name), getattr(expected, name),
                                              err_msg=name)
            rows = scratch.rows_of(fold.eligible_users)
            # lazily computed rows: fresh models, only the eligible users' items
            lists = ItemKNN(n_neighbors=n_neighbors).fit(advanced).recommend(rows, k)
            np.testing.assert_array_equal(
                lists, ItemKNN(n_neighbors=n_neighbors).fit(scratch).recommend(rows, k))


@settings(max_examples=150, deadline=None)
@given(
    n_users=st.integers(1, 6),
    n_items=st.integers(1, 7),
    density=st.sampled_from([0.2, 0.5, 1.0]),  # 1.0: every row of C full (n_items - 1 entries)
    seed=st.integers(0, 2**16),
    split=st.integers(0, 7),
)
def test_counting_c_stays_in_its_buffers(n_users, n_items, density, seed, split):
    """C counted from a matrix with its kernel run as plain Python (numpy checks every index,
    numba does not) over two chunks of items: RᵀR off the diagonal, in global codes, and no
    write outside the buffers the kernel sizes from a bound (rows that reach it included)."""
    from sweval.algorithms import row_chunks

    rng = np.random.default_rng(seed)
    dense = (rng.random((n_users, n_items)) < density).astype(np.float32)
    matrix = sp.csr_matrix(dense)
    matrix.sort_indices()
    cut = min(split, n_items)
    codes = np.arange(n_items, dtype=np.int64) * 3 + 1  # global codes: not the compact ones
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cooccurrence_module, "_count_rows",
                      plain_python(cooccurrence_module._count_rows))
        patch.setattr(row_chunks, "over_row_chunks", lambda n, work: [work(0, cut), work(cut, n)])
        counted = cooccurrence_module.Cooccurrence.from_matrix(matrix, codes, 3 * n_items + 1)
    gram = (dense.T @ dense).astype(np.int64)
    np.fill_diagonal(gram, 0)
    np.testing.assert_array_equal(counted.to_csr(codes).toarray(), gram)


def test_cooccurrences_over_the_budget_are_dropped_for_good(caplog):
    log = InteractionLog.from_frame(pd.DataFrame({
        "user": [1, 1, 2, 2, 1, 3, 3], "item": [5, 6, 5, 7, 7, 6, 7],
        "timestamp": [0, 0, DAY, DAY, 2 * DAY, 3 * DAY, 3 * DAY]}))
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=3), u_min=0)
    saved = training_state.COOCCURRENCE_BUDGET_BYTES
    incremental = IncrementalTraining(log, cooccurrence=True)
    first = incremental.train_data(folds[0])
    assert first.cooccurrence is not None  # users 1 and 2: C[5, 6] = C[5, 7] = 1, ...
    try:
        training_state.COOCCURRENCE_BUDGET_BYTES = first.cooccurrence.nbytes
        with caplog.at_level(logging.INFO, logger=training_state.__name__):
            second = incremental.train_data(folds[1])  # one more pair: over the budget
        assert second.cooccurrence is None
        assert [r.getMessage() for r in caplog.records if "co-occurrences" in r.getMessage()]
        training_state.COOCCURRENCE_BUDGET_BYTES = saved
        third = incremental.train_data(folds[2])  # not counted again: C would be incomplete
        assert third.cooccurrence is None
    finally:
        training_state.COOCCURRENCE_BUDGET_BYTES = saved
    for fold, data in zip(folds, (first, second, third)):
        assert_same(data, fold.train_data(log))
        rows = data.rows_of(fold.eligible_users)
        np.testing.assert_array_equal(
            ItemKNN(n_neighbors=1).fit(data).recommend(rows, 3),
            ItemKNN(n_neighbors=1).fit(fold.train_data(log)).recommend(rows, 3))


ALGORITHMS = {
    "pop": {},
    "pop-n": {"n_recent": 7},
    "decay-pop": {"period": "1D", "horizon": 3},
    "item-knn": {"n_neighbors": 3},
    "user-knn": {"n_neighbors": 3},
}
ITEM_KNN_VARIANTS = [{"n_neighbors": 0}, {"n_neighbors": 1}]


@settings(max_examples=60, deadline=None)
@given(log=logs(), n_folds=st.integers(1, 8), k=st.integers(1, 6))
def test_units_are_the_same_on_both_paths(log, n_folds, k):
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=n_folds), u_min=0)
    paths = [fold_splits(log, folds, "all", incremental=flag, cooccurrence=flag)
             for flag in (True, False)]
    for advanced, scratch in zip(*paths):
        assert advanced.definition == scratch.definition  # so the unit keys are the same
        if advanced.skipped:
            continue
        depth = list_length([k], advanced.relevant.sizes)
        for name, params in [*ALGORITHMS.items(),
                             *(("item-knn", variant) for variant in ITEM_KNN_VARIANTS)]:
            got = compute_lists(build_algorithm(name, params), advanced.train, advanced.users,
                                depth)
            expected = compute_lists(build_algorithm(name, params), scratch.train,
                                     scratch.users, depth)
            np.testing.assert_array_equal(got.items, expected.items, err_msg=name)
        advanced.release()
        scratch.release()


def test_a_state_never_goes_back_and_checks_the_cutoff():
    log = InteractionLog.from_frame(pd.DataFrame(
        {"user": [1, 2, 1], "item": [5, 5, 6], "timestamp": [0, DAY, 2 * DAY]}))
    state = TrainingState.empty(log).advance(2, cutoff=DAY + 1)
    assert state.data is not None and state.data.matrix.nnz == 2
    np.testing.assert_array_equal(state.item_transactions, [2, 0])
    try:
        state.advance(1, cutoff=DAY)
    except ValueError as exc:
        assert "back" in str(exc)
    else:
        raise AssertionError("advanced backwards")
    try:
        state.advance(3, cutoff=2 * DAY)
    except ValueError as exc:
        assert "cut-off" in str(exc)
    else:
        raise AssertionError("a transaction at the cut-off was let in")


def test_the_splits_pickle_without_the_state():
    log = InteractionLog.from_frame(pd.DataFrame(
        {"user": [1, 2, 1, 2], "item": [5, 5, 6, 7], "timestamp": [0, DAY, 2 * DAY, 3 * DAY]}))
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=2), u_min=0)
    incremental = IncrementalTraining(log, cooccurrence=True)
    incremental.train_data(folds[0])
    copy = pickle.loads(pickle.dumps(incremental))
    assert copy._state is None and copy.cooccurrence
    got = copy.train_data(folds[1])
    assert got.cooccurrence is not None
    assert_same(got, folds[1].train_data(copy.log))
