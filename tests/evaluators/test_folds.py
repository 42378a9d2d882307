"""Fold invariants over random logs (property-based), window alignment and the u_min skip."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import DAY, make_log, random_logs

from sweval.data.durations import parse_duration, parse_time
from sweval.data.errors import SwevalError
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.windows import WindowSpec

#: Small random logs; the properties below hold on every one.
LOGS = random_logs(sizes=(1, 120), users=15, items=25, days=10)


@settings(max_examples=150, deadline=None)
@given(
    log=LOGS,
    width=st.sampled_from([3600, 6 * 3600, DAY, 2 * DAY]),
    n_folds=st.integers(1, 8),
    train_window=st.sampled_from([None, DAY, 3 * DAY]),
    u_min=st.integers(0, 3),
)
def test_fold_invariants(log, width, n_folds, train_window, u_min):
    spec = WindowSpec(width_s=width, n_folds=n_folds, train_window_s=train_window)
    folds = build_folds(log, spec, u_min=u_min)
    assert len(folds) == n_folds
    for fold in folds:
        assert fold.t_end - fold.t_start == width
        train_t = log.timestamp[fold.train_lo : fold.train_hi]
        test_t = log.timestamp[fold.test_lo : fold.test_hi]
        # nothing at or after t_f reaches training
        assert (train_t < fold.t_start).all()
        if train_window is not None:
            assert (train_t >= fold.t_start - train_window).all()
        # every test timestamp in [t_f, t_f + tΔ), and every such transaction is in the test set
        assert ((test_t >= fold.t_start) & (test_t < fold.t_end)).all()
        in_window = (log.timestamp >= fold.t_start) & (log.timestamp < fold.t_end)
        assert in_window.sum() == fold.n_test
        # eligible users: in both training and test, and exactly those
        train_users = set(log.user[fold.train_lo : fold.train_hi].tolist())
        test_users = set(log.user[fold.test_lo : fold.test_hi].tolist())
        assert set(fold.eligible_users.tolist()) == train_users & test_users
        assert fold.skipped == (fold.n_eligible < max(u_min, 1))  # no eligible user: skipped too
        # training data exposes only items of D_t
        train = fold.train_data(log)
        assert set(train.item_codes.tolist()) == set(log.item[fold.train_lo : fold.train_hi].tolist())
        # the binary matrix holds exactly the window's (user, item) pairs, repeats collapsed
        users = log.user[fold.train_lo : fold.train_hi]
        items = log.item[fold.train_lo : fold.train_hi]
        expected = np.zeros((log.n_users, log.n_items), dtype=np.float32)
        expected[users, items] = 1.0
        expected = expected[np.ix_(train.user_codes, train.item_codes)]
        train.matrix.check_format(full_check=True)
        np.testing.assert_array_equal(train.matrix.toarray(), expected)
        assert train.matrix.has_canonical_format
        np.testing.assert_array_equal(train.item_codes[train.item_sequence], items)
    # aligned windows: the last one ends at the first multiple of the width at or after t_max + 1
    assert folds[-1].t_end % width == 0
    assert folds[-1].t_end - width <= log.t_max < folds[-1].t_end


def test_daily_windows_start_at_utc_midnight_and_explicit_start():
    log = make_log([(1, 1, 1_000), (1, 2, 5 * DAY + 30), (2, 1, 5 * DAY + 40)])
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=2), u_min=0)
    assert [(f.t_start, f.t_end) for f in folds] == [(4 * DAY, 5 * DAY), (5 * DAY, 6 * DAY)]
    start = parse_time("1970-01-02T12:00:00")
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=1, start=start), u_min=0)
    assert (folds[0].t_start, folds[0].t_end) == (DAY + DAY // 2, 2 * DAY + DAY // 2)


def test_fold_below_u_min_is_skipped_with_reason():
    # Day 1 has two eligible users (1, 2); day 2 has one (3 has no history, 1 does).
    log = make_log(
        [
            (1, 1, 0), (2, 1, 0),
            (1, 2, DAY + 1), (2, 3, DAY + 2),
            (1, 4, 2 * DAY + 1), (3, 4, 2 * DAY + 2),
        ]
    )
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=2), u_min=2)
    assert [f.n_eligible for f in folds] == [2, 1]
    assert [f.skipped for f in folds] == [False, True]
    assert folds[1].skip_reason == "n_eligible=1 < u_min=2"
    assert folds[1].n_test_users == 2


def test_cold_start_users_are_never_eligible():
    log = make_log([(1, 1, 0), (2, 2, DAY + 5), (1, 3, DAY + 6)])
    (fold,) = build_folds(log, WindowSpec(width_s=DAY, n_folds=1), u_min=0)
    assert log.user_ids[fold.eligible_users].tolist() == [1]


@pytest.mark.parametrize(
    "text, seconds",
    [("1D", DAY), ("12h", 43_200), ("7D", 7 * DAY), ("3600s", 3600), ("30min", 1800), ("2W", 14 * DAY)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["0D", "-1D", "abc", "1.5s", "", "3 parsecs"])
def test_parse_duration_rejects(text):
    with pytest.raises(SwevalError, match="--window"):
        parse_duration(text)


def test_no_fold_inside_the_data():
    log = make_log([(1, 1, 0), (1, 2, DAY)])
    with pytest.raises(SwevalError, match="after the last event"):
        build_folds(log, WindowSpec(width_s=DAY, n_folds=1, start=10 * DAY), u_min=0)
    with pytest.raises(SwevalError, match="before the first event"):
        build_folds(log, WindowSpec(width_s=DAY, n_folds=1, start=-5 * DAY), u_min=0)


def test_window_larger_than_span_is_one_fold_with_no_history():
    log = make_log([(1, 1, 10), (1, 2, 20)])
    (fold,) = build_folds(log, WindowSpec(width_s=7 * DAY, n_folds=1), u_min=1)
    assert fold.n_train == 0 and fold.skipped


def test_a_log_shorter_than_one_window_without_eligible_users_is_explained(caplog):
    """QA: a rating column taken for the time (values 1-5: a log of 4 seconds in 1970) only
    said that every fold was skipped."""
    log = make_log([("a", "x", 1), ("b", "y", 3), ("a", "y", 5), ("b", "x", 4)])
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=3), u_min=1)
    assert all(len(fold.eligible_users) == 0 for fold in folds)
    assert "the log spans only 4 s (1970-01-01T00:00:01Z to 1970-01-01T00:00:05Z), less than " \
        "one window (86,400 s)" in caplog.text
    assert "--time-col" in caplog.text
    caplog.clear()  # a short log whose fold has eligible users is fine
    build_folds(log, WindowSpec(width_s=DAY, n_folds=1, start=3), u_min=1)
    assert caplog.text == ""


@pytest.mark.parametrize("text", [
    "2015-08-01T12:00:00Z", "2015-08-01 12:00:00", "2015-08-01t12:00:00z",
    "2015-08-01T12:00:00,25Z", "2015-08-01 12:00:00 UTC", "2015-08-01T14:00:00+02:00",
    "1438430400",
])
def test_iso_spellings_of_one_instant_all_parse(text):
    """QA: ISO's strict parser refused lowercase t/z, a decimal comma and a UTC suffix that
    --start took before; they are year-month-day first, so not ambiguous."""
    assert parse_time(text) == 1_438_430_400


@pytest.mark.parametrize("text", ["01/08/2015", "08/01/2015", "today", "now", "next monday"])
def test_ambiguous_or_relative_instants_are_refused(text):
    with pytest.raises(SwevalError, match=rf"--start '{text}': (not an ISO|relative)"):
        parse_time(text)
