"""What a model sees of time: TrainData's transaction arrays, cut-off and id maps, checked
against a slow reference built from the input frame with pandas, for every fold of random logs
and for the hold-out splits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import DAY, make_log

from sweval.algorithms.train_data import TrainData
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.splits import holdout_positions, holdout_split
from sweval.evaluators.protocols.windows import WindowSpec


@st.composite
def frames(draw) -> tuple[pd.DataFrame, str]:
    """A random input frame (integer or string ids: ``u10`` sorts before ``u2``) and a dedup."""
    n = draw(st.integers(1, 80))
    users = draw(st.lists(st.integers(0, 12), min_size=n, max_size=n))
    items = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    times = draw(st.lists(st.integers(0, 6 * DAY), min_size=n, max_size=n))
    frame = pd.DataFrame({"user": users, "item": items, "timestamp": times})
    if draw(st.booleans()):
        frame["user"] = "u" + frame["user"].astype(str)
        frame["item"] = "i" + frame["item"].astype(str)
    return frame, draw(st.sampled_from(["first", "none"]))


def reference_transactions(frame: pd.DataFrame, dedup: str, keep) -> pd.DataFrame:
    """The training transactions in time order (ties: input row order), the slow way: stable
    sort by time, drop later repeats of a (user, item) pair when ``dedup`` is ``first``, then
    keep the rows ``keep(sorted_frame)`` selects."""
    ordered = frame.sort_values("timestamp", kind="stable").reset_index(drop=True)
    if dedup == "first":
        ordered = ordered[~ordered.duplicated(["user", "item"], keep="first")]
    ordered = ordered.reset_index(drop=True)
    return ordered[keep(ordered)].reset_index(drop=True)


def assert_matches(train: TrainData, expected: pd.DataFrame, cutoff: int) -> None:
    """The arrays equal the reference, row by row, in raw ids."""
    assert train.cutoff == cutoff
    assert len(train.timestamps) == len(train.user_sequence) == len(train.item_sequence)
    if len(train.timestamps):
        assert train.timestamps.max() < train.cutoff
    np.testing.assert_array_equal(train.timestamps, expected["timestamp"].to_numpy())
    assert train.user_ids[train.user_sequence].tolist() == expected["user"].tolist()
    assert train.item_ids[train.item_sequence].tolist() == expected["item"].tolist()
    # rows and columns are the distinct ids, in tie-break order (numbers numerically, text as text)
    assert train.user_ids.tolist() == sorted(set(expected["user"]))
    assert train.item_ids.tolist() == sorted(set(expected["item"]))
    # the binary matrix holds exactly the pairs of the sequences
    dense = np.zeros(train.matrix.shape, dtype=np.float32)
    dense[train.user_sequence, train.item_sequence] = 1.0
    np.testing.assert_array_equal(train.matrix.toarray(), dense)


@settings(max_examples=150, deadline=None)
@given(
    data=frames(),
    width=st.sampled_from([6 * 3600, DAY, 2 * DAY]),
    n_folds=st.integers(1, 6),
    train_window=st.sampled_from([None, DAY, 3 * DAY]),
)
def test_window_folds_see_only_the_past(data, width, n_folds, train_window):
    frame, dedup = data
    log = InteractionLog.from_frame(frame, dedup=dedup)
    spec = WindowSpec(width_s=width, n_folds=n_folds, train_window_s=train_window)
    for fold in build_folds(log, spec, u_min=0):
        if fold.n_train == 0:
            continue
        t_f = fold.t_start
        start = -np.inf if train_window is None else t_f - train_window
        assert fold.train_start == (None if train_window is None else t_f - train_window)
        expected = reference_transactions(
            frame, dedup, lambda f: (f["timestamp"] >= start) & (f["timestamp"] < t_f)
        )
        train = fold.train_data(log)
        assert_matches(train, expected, t_f)
        # no copy: the timestamps are the log's own memory
        assert np.shares_memory(train.timestamps, log.timestamp)


@settings(max_examples=60, deadline=None)
@given(data=frames(), how=st.sampled_from(["last", "random"]), seed=st.integers(0, 3))
def test_holdout_splits_train_on_the_log_minus_held_rows(data, how, seed):
    frame, dedup = data
    log = InteractionLog.from_frame(frame, dedup=dedup)
    held = holdout_positions(log, how, seed)
    split = holdout_split(log, held, index=0, u_min=0, definition={"kind": how})
    held_set = set(held.tolist())
    expected = reference_transactions(
        frame, dedup, lambda f: ~pd.Series(range(len(f))).isin(held_set).to_numpy()
    )
    if len(expected) == 0:
        return
    kept = reference_transactions(frame, dedup, lambda f: np.ones(len(f), dtype=bool))
    assert split.t_end == kept["timestamp"].max() + 1  # one second after the last transaction
    assert_matches(split.train, expected, split.t_end)


def test_repeats_stay_separate_transactions_with_dedup_none():
    log = make_log(
        [("a", "x", 10), ("a", "x", 20), ("b", "y", 30), ("a", "x", 40)], dedup="none"
    )
    fold = build_folds(log, WindowSpec(width_s=10, n_folds=1), u_min=0)[0]
    train = fold.train_data(log)  # t_f = 40: the first three transactions
    assert train.cutoff == 40
    np.testing.assert_array_equal(train.timestamps, [10, 20, 30])
    assert train.user_ids[train.user_sequence].tolist() == ["a", "a", "b"]
    assert train.item_ids[train.item_sequence].tolist() == ["x", "x", "y"]
    assert train.matrix.toarray().tolist() == [[1.0, 0.0], [0.0, 1.0]]  # repeats collapse


def test_a_timestamp_at_the_cutoff_is_refused():
    codes = np.array([0, 1], dtype=np.int64)
    with pytest.raises(ValueError, match="at or after the cut-off"):
        TrainData.from_codes(
            codes, codes, n_users=2, n_items=2, timestamps=np.array([5, 9]), cutoff=9
        )
