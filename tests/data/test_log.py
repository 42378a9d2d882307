"""The interaction log: de-duplication, timestamps, id order, invalid rows and the loaders."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest
from sweval_testing import make_log

from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log
from sweval.data.log import InteractionLog


def test_dedup_first_keeps_earliest_pair_with_ties_by_row_order():
    frame = pd.DataFrame(
        {
            "user": [1, 1, 1, 2, 1],
            "item": [7, 7, 8, 7, 8],
            "timestamp": [50, 10, 10, 10, 10],
            "policy": ["a", "b", "c", "d", "e"],
        }
    )
    log = InteractionLog.from_frame(frame, policy_col="policy")
    # (1,7): rows at t=50 and t=10 -> keep t=10 ("b"); (1,8): two rows at t=10 -> first row ("c")
    kept = log.to_frame()
    assert kept.values.tolist() == [[1, 7, 10, "b"], [1, 8, 10, "c"], [2, 7, 10, "d"]]
    assert log.n_duplicates == 2


def test_dedup_none_keeps_repeats_and_is_time_sorted():
    log = make_log([(1, 7, 50), (1, 7, 10), (1, 8, 10)], dedup="none")
    assert log.to_frame().values.tolist() == [[1, 7, 10], [1, 8, 10], [1, 7, 50]]


def test_dedup_is_idempotent():
    once = make_log([(1, 7, 50), (1, 7, 10), (2, 8, 10), (2, 8, 10)])
    twice = InteractionLog.from_frame(once.to_frame())
    assert twice.to_frame().equals(once.to_frame())
    assert twice.n_duplicates == 0


def test_arrays_are_read_only():
    log = make_log([(1, 7, 50)])
    with pytest.raises(ValueError):
        log.timestamp[0] = 3


def test_integer_ids_sort_numerically_strings_as_strings():
    log = make_log([(10, 10, 0), (9, 9, 0), (100, 100, 0)])
    assert log.item_ids.tolist() == [9, 10, 100]
    log = make_log([("b10", "x", 0), ("b9", "y", 0), ("a", "z", 0)])
    assert log.user_ids.tolist() == ["a", "b10", "b9"]
    # mixed ints and strings: string order of the text
    log = make_log([(1, 10, 0), (1, "9", 0), (1, "a", 0)])
    assert log.item_ids.tolist() == ["10", "9", "a"]


@pytest.mark.parametrize(
    "values, unit, expected",
    [
        ([1_000_000_000, 1_000_000_001], "s", [1_000_000_000, 1_000_000_001]),
        ([1_000_000_000_500, 1_000_000_001_999], "ms", [1_000_000_000, 1_000_000_001]),
        ([1.5e9, 1.5e9 + 0.7], "s", [1_500_000_000, 1_500_000_000]),
        (["2015-08-01T00:00:00Z", "2015-08-01 02:00:00+02:00"], "s", [1438387200, 1438387200]),
        (["2015-08-01", "2015-08-02"], "s", [1438387200, 1438473600]),
    ],
)
def test_timestamp_normalisation(values, unit, expected):
    frame = pd.DataFrame({"user": [1, 2], "item": [1, 1], "timestamp": values})
    log = InteractionLog.from_frame(frame, time_unit=unit)
    assert sorted(log.timestamp.tolist()) == expected


def test_datetime_columns_naive_is_utc_and_aware_is_converted():
    naive = pd.to_datetime(["2015-08-01 00:00:00"])
    aware = pd.to_datetime(["2015-08-01 02:00:00"]).tz_localize("Europe/Brussels")
    for stamps in (naive, aware):
        frame = pd.DataFrame({"user": [1], "item": [1], "timestamp": stamps})
        assert InteractionLog.from_frame(frame).timestamp.tolist() == [1438387200]


def test_milliseconds_given_as_seconds_are_detected():
    frame = pd.DataFrame({"user": [1], "item": [1], "timestamp": [1_438_387_200_000]})
    with pytest.raises(SwevalError, match="--time-unit ms"):
        InteractionLog.from_frame(frame, source="log.csv")


def test_unparsable_timestamps_name_rows():
    frame = pd.DataFrame({"user": [1, 2, 3], "item": [1, 1, 1], "timestamp": ["2015-01-01", "soon", "x"]})
    with pytest.raises(SwevalError, match=r"log.csv: column 'timestamp' has 2 unparsable.*rows 2, 3"):
        InteractionLog.from_frame(frame, source="log.csv")


def test_one_unparsable_value_among_epochs_is_the_row_named():
    frame = pd.DataFrame({"user": [1, 2, 3, 4], "item": [1, 1, 1, 1],
                          "timestamp": ["1433118553", "1433118554", "soon", "1433118556"]})
    with pytest.raises(SwevalError, match=r"has 1 unparsable timestamp\(s\) \(data rows 3, e.g. 'soon'\)"):
        InteractionLog.from_frame(frame, source="log.csv")


def test_missing_values_error_or_drop():
    frame = pd.DataFrame({"user": [1, None, 3], "item": [1, 1, None], "timestamp": [1, 2, 3]})
    with pytest.raises(SwevalError, match=r"2 row\(s\).*'user', 'item'.*rows 2, 3.*--on-invalid drop"):
        InteractionLog.from_frame(frame, source="f.csv")
    log = InteractionLog.from_frame(frame, on_invalid="drop")
    assert len(log) == 1 and log.n_dropped_invalid == 2


YEAR = 365 * 86_400
DAY = 86_400


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        ([0] + [30 * YEAR + d * DAY for d in range(20)], (1, 0)),  # a day of 1970, then 2000
        ([30 * YEAR + d * DAY for d in range(20)] + [130 * YEAR], (0, 1)),  # one in 2100
        ([0, 1] + [30 * YEAR + d * DAY for d in range(1998)], (2, 0)),  # m = 2: two cut rows
        ([0, 1, 2] + [30 * YEAR + d * DAY for d in range(1997)], (0, 0)),  # three: more than m
        # the gap equals the rest's span (without its last m), or is under a year
        ([0] + [YEAR + d * DAY for d in range(367)], (0, 0)),
        ([0] + [YEAR + d * DAY for d in range(366)], (1, 0)),
        ([0] + [YEAR - DAY + d * DAY for d in range(20)], (0, 0)),
        ([0] * 9, (0, 0)),  # under 10 transactions
        # a cut row and a far-future one: each end judged against the rest without the other
        ([0] + [10 * YEAR + d * DAY for d in range(20)] + [20 * YEAR], (1, 1)),
    ],
)
def test_isolated_ends_by_hand(seconds, expected):
    from sweval.data.timestamps import isolated_ends

    assert isolated_ends(np.asarray(seconds, dtype=np.int64)) == expected


def test_a_row_far_before_the_rest_is_named_in_a_warning(caplog):
    """A row cut short (``u1,i1,88974``: a day of 1970) is kept, and its data row named: with
    --dedup first it replaces the pair's real transaction, so it must not pass unseen."""
    start = 1_500_000_000
    times = [start + 3_600 * h for h in range(30)]
    frame = pd.DataFrame({"user": [f"u{h % 5}" for h in range(30)] + ["u9", "u1"],
                          "item": [f"i{h % 7}" for h in range(30)] + [None, "i1"],
                          "timestamp": times + [start, 88_974]})
    with caplog.at_level("WARNING", logger="sweval.data.timestamps"):
        log = InteractionLog.from_frame(frame, on_invalid="drop", source="f.csv")
    assert int(log.timestamp[0]) == 88_974
    lone = [r.getMessage() for r in caplog.records if "before the rest" in r.getMessage()]
    assert len(lone) == 1, caplog.text
    assert lone[0].startswith("f.csv: 1 transaction(s) lie 47.5 years before the rest of the "
                              "log in column 'timestamp' (1970-01-02T00:42:54Z, data rows 32;")


def test_real_logs_have_no_isolated_ends(caplog):
    with caplog.at_level("WARNING", logger="sweval.data.timestamps"):
        load_log("movielens-latest-small")
    assert "the rest of the log" not in caplog.text


def test_missing_column_is_named():
    frame = pd.DataFrame({"u": [1], "i": [1], "t": [1]})
    with pytest.raises(SwevalError, match=r"missing column\(s\) 'user', 'item', 'timestamp'.*--user-col"):
        InteractionLog.from_frame(frame, source="f.csv")
    log = InteractionLog.from_frame(frame, user_col="u", item_col="i", time_col="t")
    assert len(log) == 1


def test_empty_frame():
    with pytest.raises(SwevalError, match="empty"):
        InteractionLog.from_frame(pd.DataFrame({"user": [], "item": [], "timestamp": []}))


# ---------------------------------------------------------------------- loaders
def test_movielens_u_data_reader(tmp_path):
    path = tmp_path / "u.data.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("196\t242\t3\t881250949\n186\t302\t3\t891717742\n")
    log = load_log(path)
    assert log.user_ids.tolist() == [186, 196] and len(log) == 2


def test_movielens_ratings_dat_and_csv_readers(tmp_path):
    dat = tmp_path / "ratings.dat"
    dat.write_text("1::1193::5::978300760\n1::661::3::978302109\n")
    assert sorted(load_log(dat).item_ids.tolist()) == [661, 1193]
    csv = tmp_path / "ratings.csv"
    csv.write_text("userId,movieId,rating,timestamp\n1,1,4.0,964982703\n1,3,4.0,964981247\n")
    assert load_log(csv, fmt="movielens").timestamp.tolist() == [964981247, 964982703]
    # ratings.csv's own column names, as a user reading its header would pass them
    named = load_log(csv, user_col="userId", item_col="movieId")
    assert named.item_ids.tolist() == [1, 3] and named.user_ids.tolist() == [1]


def test_csv_parquet_and_column_mapping(tmp_path):
    frame = pd.DataFrame({"uid": ["a", "b"], "iid": [3, 4], "when": ["2020-01-01", "2020-01-02"], "pi": ["x", "y"]})
    frame.to_csv(tmp_path / "log.csv.gz", index=False)
    frame.to_parquet(tmp_path / "log.parquet")
    for name in ("log.csv.gz", "log.parquet"):
        log = load_log(tmp_path / name, user_col="uid", item_col="iid", time_col="when", policy_col="pi")
        assert log.policy_ids.tolist() == ["x", "y"] and len(log) == 2


def test_bundled_movielens_latest_small():
    log = load_log("movielens-latest-small")
    assert (len(log), log.n_users, log.n_items) == (100_836, 610, 9_724)


def test_real_movielens_100k_from_shared_if_present():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2].parent / "shared/data/movielens-100k/u.data.gz"
    if not path.exists():
        pytest.skip("../shared/data not present")
    log = load_log(path, fmt="movielens")
    assert (len(log), log.n_users, log.n_items) == (100_000, 943, 1_682)
    assert np.all(np.diff(log.timestamp) >= 0)


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "the directory holds no part file"),
        (lambda p: p.write_bytes(b""), "empty"),
        (lambda p: p.write_bytes(b"\x1f\x8b\x08\x00garbage"), "corrupt gzip|cannot"),
        (lambda p: p.write_text("user,item,timestamp\n"), "empty"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path, setup, message):
    path = tmp_path / ("log.csv.gz" if "gzip" in message else "log.csv")
    setup(path)
    with pytest.raises(SwevalError, match=message):
        load_log(path)


def _ask_user_major_at_once(log: InteractionLog, n_threads: int) -> list[object]:
    """``log.user_major()`` from ``n_threads`` threads released together by a barrier."""
    import threading

    barrier = threading.Barrier(n_threads)
    results: list[object] = []

    def ask() -> None:
        barrier.wait()
        try:
            results.append(log.user_major())
        except Exception as error:  # noqa: BLE001 - the failure under test, asserted on below
            results.append(error)

    threads = [threading.Thread(target=ask) for _ in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_user_major_is_safe_when_many_threads_ask_first(rng: np.random.Generator) -> None:
    """Fold tasks in the threads runner all ask a fresh log for its user-major order at once.

    The memo once filled itself array by array, so two racing threads left six arrays behind
    and every later caller crashed on unpacking (seen in CI). Every thread must get the same
    three arrays, and so must a caller after them.
    """
    n = 300_000
    frame = pd.DataFrame(
        {
            "user": rng.integers(0, 5_000, n),
            "item": rng.integers(0, 2_000, n),
            "timestamp": np.sort(rng.integers(0, 10**6, n)),
        }
    )
    for attempt in range(5):
        log = InteractionLog.from_frame(frame, dedup="none")
        results = _ask_user_major_at_once(log, 8)
        errors = [r for r in results if isinstance(r, Exception)]
        assert not errors, f"attempt {attempt}: {errors[0]!r}"
        position, user, item = log.user_major()
        for got in results:
            assert len(got) == 3
            np.testing.assert_array_equal(got[0], position)
        key = user * log.n_items + item
        assert np.all(np.diff(key) >= 0)
