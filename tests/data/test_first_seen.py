"""The compiled first-occurrence passes against pandas' ``duplicated`` (the reference)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from sweval.data.first_seen import first_pair_mask, first_row_per_code

codes = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 5)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(rows=codes, extra_users=st.integers(0, 3))
def test_first_pair_mask_is_pandas_first_of_each_pair(rows, extra_users):
    user = np.array([u for u, _ in rows], dtype=np.int64)
    item = np.array([i for _, i in rows], dtype=np.int64)
    expected = ~pd.DataFrame({"u": user, "i": item}).duplicated(keep="first").to_numpy()
    got = first_pair_mask(user, item, 7 + extra_users, 6)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(0, 9), max_size=60))
def test_first_row_per_code_is_the_first_index_or_the_length(values):
    array = np.array(values, dtype=np.int64)
    got = first_row_per_code(array, 12)
    expected = [values.index(k) if k in values else len(values) for k in range(12)]
    np.testing.assert_array_equal(got, expected)


def test_a_hand_computed_log():
    # rows in time order: (u, i) = (1,2) (0,2) (1,2) (1,0) (0,2) (2,1)
    user = np.array([1, 0, 1, 1, 0, 2], dtype=np.int64)
    item = np.array([2, 2, 2, 0, 2, 1], dtype=np.int64)
    assert first_pair_mask(user, item, 3, 3).tolist() == [True, True, False, True, False, True]
    assert first_row_per_code(user, 4).tolist() == [1, 0, 5, 6]
    read_only = user.copy()
    read_only.setflags(write=False)  # the log's arrays are read-only
    assert first_row_per_code(read_only, 4).tolist() == [1, 0, 5, 6]
