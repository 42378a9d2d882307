"""Numeric epochs that cannot carry their unit are refused (data/epoch_precision.py); the
catalogue's ``ts-scientific-*`` and ``ts-ns-*`` cases read whole files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweval.data.epoch_precision import check_float_epochs, check_scientific_epochs, duration
from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log

T0 = 1_704_067_200


def _check_text(*values: str, unit: str = "s") -> None:
    check_scientific_epochs(pd.Series(values, dtype="str"), time_unit=unit, source="log.csv",
                            column="timestamp")


@pytest.mark.parametrize("value, nearest", [
    ("1.69e+09", "10,000,000 seconds"), ("16.9E8", "10,000,000 seconds"),
    ("169e7", "10,000,000 seconds"), (" +1.6941234E+09 ", "100 seconds"), ("1.7e9", "100,000,000"),
])
def test_scientific_notation_short_of_a_second_is_refused(value: str, nearest: str) -> None:
    pattern = rf"log\.csv: column 'timestamp' holds 1 epoch .*nearest {nearest}"
    with pytest.raises(SwevalError, match=pattern):
        _check_text(value)


@pytest.mark.parametrize("values", [
    ("1.694123456e9",), ("1.6941234565E9",), ("1694123456", "1.69e9x"), ("881250949.5",),
    ("1.694E9", "1.694123457E9"),  # a float's shortest form: one value reaches the unit
])
def test_scientific_notation_reaching_the_unit_and_plain_numbers_pass(
    values: tuple[str, ...],
) -> None:
    _check_text(*values)


def test_the_unit_sets_the_digits_needed() -> None:
    _check_text("1.704067200123e12", unit="ms")
    with pytest.raises(SwevalError, match=r"nearest 10,000 milliseconds, 10 seconds"):
        _check_text("1.70406720e12", unit="ms")


def _check_floats(numbers: list[float], unit: str = "ns") -> None:
    values = pd.Series(numbers, dtype="float64")
    check_float_epochs(values, values.to_numpy(), time_unit=unit, source="log.parquet",
                       column="timestamp")


def test_floats_far_from_a_seconds_edge_give_their_second() -> None:
    _check_floats([(T0 + 0.5) * 1e9, (T0 + 0.25) * 1e9, -(T0 + 0.5) * 1e9])
    _check_floats([float(T0)], unit="s")  # below 2**53: exact
    _check_floats([float(T0 * 10**6)], unit="us")  # 2024 in microseconds: below 2**53


def test_floats_at_a_seconds_edge_are_refused_naming_rows() -> None:
    with pytest.raises(SwevalError, match=r"nearest 256 nanoseconds; 2 of them .*data rows 2, 3"):
        _check_floats([(T0 + 0.5) * 1e9, float(T0 * 10**9), float(1704067199999999999)])
    beyond_2255 = float(9_100_000_000 * 10**6)  # microseconds after 2**53
    with pytest.raises(SwevalError, match=r"epoch microseconds .*nearest 2 microseconds"):
        _check_floats([beyond_2255], unit="us")


def test_an_integer_column_is_never_checked_as_floats() -> None:
    values = pd.Series([T0 * 10**9], dtype="int64")
    check_float_epochs(values, values.to_numpy(dtype=np.float64), time_unit="ns", source="x",
                       column="t")


@pytest.mark.parametrize("seconds, text", [
    (10_000_000, "116 days"), (10_000, "2.78 hours"), (100, "1.67 minutes"), (10, "10 seconds"),
    (0.01, "10 milliseconds"), (5e-9, "5 nanoseconds"),
])
def test_durations_read_in_the_largest_fitting_unit(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_a_part_file_with_cut_digits_is_named(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "part-0.csv").write_text(f"user,item,timestamp\nu1,i1,{T0}\n")
    (tmp_path / "events" / "part-1.csv").write_text("user,item,timestamp\nu2,i1,1.70E+09\n")
    with pytest.raises(SwevalError, match=r"events/part-1\.csv: column 'timestamp' holds 1 epoch"):
        load_log(tmp_path / "events")


def test_whole_seconds_with_a_missing_cell_read_as_before(tmp_path: Path) -> None:
    """A float column of whole seconds (a missing cell) becomes exact integers: the same seconds."""
    path = tmp_path / "log.csv"
    path.write_text(f"user,item,timestamp\nu1,i1,{T0}\nu2,i1,\nu3,i2,{T0 + 7}\n")
    assert load_log(path, on_invalid="drop").timestamp.tolist() == [T0, T0 + 7]
