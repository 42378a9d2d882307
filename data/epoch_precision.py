"""Numeric epochs that cannot carry their time unit exactly: refused, not read as exact.

Two ways a number loses the digits that the time unit (``--time-unit``, seconds by default) needs:

- **Scientific notation that stops short of the unit** (:func:`check_scientific_epochs`). A
  spreadsheet showing ``1694123456`` in a narrow column writes ``1.69E+09`` when it saves the
  sheet as CSV: the file then gives the time only to the nearest 10^7 seconds (116 days), and
  the digits are gone. Programs that write a float's shortest form (Java's and Spark's
  ``Double.toString``: ``1.694E9`` for ``1694000000.0``) also stop early, but only where the
  value has zeros: most of their values (those not ending in 0) reach the unit. So the
  notation is refused when *none* of the column's values written so reaches the unit, which
  is what cut digits look like, and read as written when one does.
- **Binary floating point beyond 2**53 units** (:func:`check_float_epochs`): a float64 column
  (Parquet ``double``, a JSON Lines column of integers with a missing value) holds whole numbers
  exactly only up to 2**53; beyond, it rounds them to 2, 4, ... 256 units. Epoch nanoseconds are
  all beyond it (2**53 ns is 104 days after 1970), epoch microseconds after the year 2255. SW-EVAL
  uses whole seconds: a value is refused when it lies within that rounding of a whole second
  (``1704067199999999999`` ns is stored as ``1.7040672e18``, the next second), read otherwise.
  A CSV column of integers with a missing cell is not affected: its text is read exactly
  (:mod:`data.csv_reader`).

Decimal fractions (``881250949.5`` seconds) carry the unit and more: they are read, floored to
whole seconds (SPEC §1). Either problem is an error rather than a warning: the times a run would
use may not be the ones that happened (by months, for cut digits), and no option brings them
back.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.errors import SwevalError, file_rows, first_rows

#: A number in scientific notation: its mantissa's digits after the point and its exponent.
_SCIENTIFIC = r"^\s*[+-]?\d*(?:\.(\d*))?[eE]([+-]?\d+)\s*$"
#: Floats hold every whole number up to 2**53 exactly.
MAX_EXACT_FLOAT = 2**53

TimeUnit = Literal["s", "ms", "us", "ns"]
#: Units of numeric epochs (``--time-unit``) per second.
UNIT_SECONDS: dict[str, int] = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
UNIT_NAMES = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def check_scientific_epochs(text: pd.Series, *, time_unit: str, source: str, column: str) -> None:
    """Refuse epochs in scientific notation whose digits stop short of the time unit, when none
    of the column's values in that notation reaches it (module docstring).

    Args:
        text: the column as written in the file (its index: the file's data rows).
        time_unit: the unit of the numbers (s, ms, us or ns).
        source, column: for the message.

    Raises:
        SwevalError: naming the file, column and rows, and the precision left.
    """
    maybe = text.str.contains("[eE]", regex=True, na=False).to_numpy(dtype=bool)
    if not maybe.any():
        return
    parts = text[maybe].str.extract(_SCIENTIFIC)
    written = parts[1].notna().to_numpy()
    if not written.any():
        return  # an "e" in something else: not a number, said elsewhere
    fraction = parts[0][written].fillna("").str.len().to_numpy()
    last_digit = parts[1][written].astype(int).to_numpy() - fraction  # its power of ten
    if last_digit.min() <= 0:
        return  # a value reaches the unit: a float's shortest form, exact
    rows = np.flatnonzero(maybe)[written]
    unit = UNIT_NAMES[time_unit]
    example = 10 ** int(last_digit[0])
    raise SwevalError(
        f"{source}: column {column!r} holds {len(rows)} epoch value(s) in scientific notation "
        f"that stop short of whole {unit} (data rows {first_rows(file_rows(text, rows))}, e.g. "
        f"{text.iloc[rows[0]].strip()!r}, which gives the time only to the nearest {example:,} "
        f"{unit}, {duration(example / UNIT_SECONDS[time_unit])}; none of them reaches one "
        f"{unit[:-1]}). A spreadsheet cut their digits when it saved the file, and the times "
        "cannot be recovered from it: format the column as whole numbers (or ISO 8601 "
        "date-times) and save it again."
    )


def check_float_epochs(
    values: pd.Series, numbers: NDArray[np.float64], *, time_unit: str, source: str, column: str
) -> None:
    """Refuse floating-point epochs beyond 2**53 units that lie so close to a whole second that
    the float cannot tell which second the time fell in (module docstring). Values farther from
    a second's edge give their second exactly and are read.

    Args:
        values: the column (its dtype says whether it holds floats; its index: the data rows).
        numbers: its values as float64.
        time_unit, source, column: for the message.

    Raises:
        SwevalError: naming the file, column and rows, and the spacing of floats there.
    """
    if not pd.api.types.is_float_dtype(values.dtype):
        return
    size = np.abs(numbers)
    beyond = size >= MAX_EXACT_FLOAT
    if not beyond.any():
        return
    per_second = UNIT_SECONDS[time_unit]
    half = np.spacing(size) / 2  # the float stands for any whole number this close to it
    into = np.fmod(size, per_second)  # exact: how far past a whole second
    uncertain = np.flatnonzero(beyond & ((into <= half) | (into >= per_second - half)))
    if not len(uncertain):
        return
    unit = UNIT_NAMES[time_unit]
    raise SwevalError(
        f"{source}: column {column!r} holds epoch {unit} as floating-point numbers beyond 2**53, "
        f"which floating point holds only to the nearest {2 * half[beyond].max():,.0f} {unit}; "
        f"{len(uncertain)} of them lie that close to a whole second, so the second they fall in "
        f"is unknown (data rows {first_rows(file_rows(values, uncertain))}, e.g. "
        f"{numbers[uncertain[0]]:.0f}). Store the timestamps as integers or ISO 8601 text (a "
        "column of integers becomes floats when a value is missing: drop those rows first)."
    )


def duration(seconds: float) -> str:
    """A span for messages, in the largest unit that keeps it at 1 or more: ``116 days``,
    ``2.8 hours``, ``10 milliseconds``."""
    for size, name in ((86_400, "days"), (3600, "hours"), (60, "minutes"), (1, "seconds"),
                       (1e-3, "milliseconds"), (1e-6, "microseconds")):
        if seconds >= size:
            return f"{seconds / size:.3g} {name}"
    return f"{seconds * 1e9:.3g} nanoseconds"
