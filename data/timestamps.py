"""Timestamps to int64 epoch seconds, UTC (SPEC §1).

:func:`normalise_timestamps` reads numeric epochs (seconds, milliseconds, microseconds or
nanoseconds, also written as text), datetimes and ISO-8601 strings, and rejects values whose
range betrays the wrong unit (seconds that look like milliseconds and the reverse, units mixed,
numbers that look like YYYYMMDD dates) and numbers that cannot carry their unit (scientific
notation cut short by a spreadsheet, floats beyond 2**53 units: :mod:`data.epoch_precision`).
"""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.epoch_precision import (
    UNIT_NAMES,
    UNIT_SECONDS,
    TimeUnit,
    check_float_epochs,
    check_scientific_epochs,
)
from sweval.data.errors import SwevalError, file_rows, first_rows

_log = logging.getLogger(__name__)

#: Epoch seconds beyond this (year 5138) are not plausible seconds: most likely milliseconds.
_MAX_PLAUSIBLE_SECONDS = 10**11
#: Epoch seconds of 1973-03-03 and 2100-01-01: read as milliseconds, such values fall between
#: 1970-01-02 and 1970-02-17.
_EPOCH_1973_S = 100_000_000
_EPOCH_2100_S = 4_102_444_800
#: 2000-01-01: a log read in a unit finer than seconds whose other values all come after it
#: has no values before 1973 but wrong ones (seconds among milliseconds, placeholders).
_EPOCH_2000_S = 946_684_800



def normalise_timestamps(
    values: pd.Series, *, time_unit: TimeUnit, source: str, column: str
) -> NDArray[np.int64]:
    """Normalise timestamps to int64 epoch seconds, UTC (SPEC §1).

    Accepts numeric epochs (seconds, or ``time_unit`` ms, us or ns; numbers written as text
    too), datetimes (naive ones are taken as UTC) and ISO-8601 strings, RFC 3339's lower-case
    ``t`` and ``z`` and a decimal comma (``2024-01-01t10:00:00,5z``) included. Sub-second parts
    are floored.

    Raises:
        SwevalError: unparsable values or a column mixing numbers and dates (naming rows), an
            implausible epoch range: seconds that look like milliseconds, milliseconds that look
            like seconds, or numbers that look like YYYYMMDD dates; or numbers that cannot carry
            the unit (:mod:`data.epoch_precision`).
    """
    if time_unit not in UNIT_SECONDS:
        raise SwevalError(f"--time-unit must be s, ms, us or ns, not {time_unit!r}.")
    if pd.api.types.is_bool_dtype(values.dtype):
        raise SwevalError(f"{source}: column {column!r} holds booleans, not timestamps.")
    if pd.api.types.is_numeric_dtype(values.dtype):
        return _epoch_seconds(values, time_unit=time_unit, source=source, column=column)
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        stamps = values
    else:
        text = values.astype(str)
        stamps = _parsed_dates(text)
        is_date = stamps.notna().to_numpy()
        if not is_date.all():  # epochs written as text (a Parquet string column)? mixed?
            numbers = pd.to_numeric(text.str.strip(), errors="coerce")
            is_number = numbers.notna().to_numpy()
            if is_number.all():
                check_scientific_epochs(text, time_unit=time_unit, source=source, column=column)
                return _epoch_seconds(numbers, time_unit=time_unit, source=source, column=column)
        else:
            is_number = np.zeros(len(text), dtype=bool)
        bad = np.flatnonzero(~is_date & ~is_number)  # neither a date nor an epoch number
        if len(bad):
            raise SwevalError(
                f"{source}: column {column!r} has {len(bad)} unparsable timestamp(s) "
                f"(data rows {first_rows(file_rows(values, bad))}, e.g. {text.iloc[bad[0]]!r}); "
                "expected epoch seconds, epoch milliseconds with --time-unit ms, or ISO-8601 "
                "(e.g. 2015-08-01T12:00:00Z; a time without an offset is UTC)."
            )
        if is_number.any():
            numeric_rows = file_rows(values, np.flatnonzero(is_number))
            date_rows = file_rows(values, np.flatnonzero(~is_number))
            raise SwevalError(
                f"{source}: column {column!r} mixes epoch numbers (data rows "
                f"{first_rows(numeric_rows)}, e.g. {text.iloc[np.flatnonzero(is_number)[0]]!r}) "
                f"and date/time text (data rows {first_rows(date_rows)}, e.g. "
                f"{text.iloc[np.flatnonzero(~is_number)[0]]!r}); write every timestamp the same way."
            )
    if getattr(stamps.dt, "tz", None) is None:
        stamps = stamps.dt.tz_localize("UTC")
    else:
        stamps = stamps.dt.tz_convert("UTC")
    # Integers in the column's own resolution (s, ms, us or ns), floored to seconds: no detour
    # through nanoseconds, which cannot hold dates before 1677 or after 2262.
    naive = stamps.dt.tz_localize(None).to_numpy()
    per_second = np.timedelta64(1, "s") // np.timedelta64(1, np.datetime_data(naive.dtype)[0])
    return np.floor_divide(naive.view(np.int64), per_second).astype(np.int64)


#: RFC 3339 date-times that pandas' ISO 8601 parser refuses: a lower-case ``t`` separator or
#: ``z`` zone (RFC 3339 §5.6 allows both) and a comma before the fraction of a second (ISO 8601
#: allows it, and prefers it): ``2024-01-01t10:00:00,5z``.
_RFC3339_VARIANT = (r"^\s*(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}(?::\d{2})?)(?:[.,](\d+))?"
                    r"([Zz]|[+-]\d{2}:\d{2})?\s*$")


def _parsed_dates(text: pd.Series) -> pd.Series:
    """ISO 8601 / RFC 3339 text as UTC datetimes; NaT where a value is not one.

    The variants of :data:`_RFC3339_VARIANT` that pandas refuses are spelled as it reads them
    (``T``, ``Z``, a decimal point) and parsed again; only values that failed the first parse
    are looked at, so a column pandas reads whole costs nothing more.
    """
    stamps = _to_datetime(text)
    unparsed = stamps.isna().to_numpy()
    if unparsed.any():
        variants = unparsed & text.str.match(_RFC3339_VARIANT).fillna(False).to_numpy(dtype=bool)
        if variants.any():
            respelled = text.astype(object)
            respelled[variants] = text[variants].str.replace(
                _RFC3339_VARIANT, _pandas_spelling, regex=True)
            stamps = _to_datetime(respelled)
    return stamps


def _pandas_spelling(match: re.Match[str]) -> str:
    """An :data:`_RFC3339_VARIANT` match as pandas reads it: ``2024-01-01T10:00:00.5Z``."""
    date, time, fraction, zone = match.groups()
    return f"{date}T{time}" + (f".{fraction}" if fraction else "") + (zone or "").upper()


def _to_datetime(text: pd.Series) -> pd.Series:
    """pandas' ISO 8601 parse of ``text`` (NaT where it fails), UTC."""
    try:
        return pd.to_datetime(text, utc=True, errors="coerce", format="ISO8601")
    except (ValueError, TypeError):
        return pd.to_datetime(text, utc=True, errors="coerce", format="mixed")


def _epoch_seconds(
    values: pd.Series, *, time_unit: TimeUnit, source: str, column: str
) -> NDArray[np.int64]:
    """Numeric epochs to int64 seconds (floored), rejecting ranges that betray the wrong unit:

    - read in a coarser unit, every value would be a date in 1973–2100 (``ms`` on seconds);
    - values too large for the unit: beyond year 5138 in seconds (:data:`_MAX_PLAUSIBLE_SECONDS`),
      with the unit that fits them named;
    - with a unit finer than seconds, values before 1973 among others all after 2000 (seconds
      among milliseconds, a ``0`` placeholder; a log that runs through 1973 is left alone);
    - numbers that look like ``YYYYMMDDhhmmss`` (in any unit) or ``YYYYMMDD`` (in seconds).
    """
    numbers = values.to_numpy(dtype=np.float64)
    if not np.isfinite(numbers).all():
        bad = np.flatnonzero(~np.isfinite(numbers))
        raise SwevalError(
            f"{source}: column {column!r} has non-finite timestamps "
            f"(data rows {first_rows(file_rows(values, bad))})."
        )
    if _look_like_yyyymmddhhmmss(numbers):  # as epochs: years 2286 (ms) to 5138 (s) and beyond
        raise SwevalError(
            f"{source}: column {column!r} has values like {int(numbers[0])} that look like "
            "YYYYMMDDhhmmss date-times, not epoch time; write them as ISO 8601 "
            "(2015-08-01T12:00:00Z) or as epoch seconds."
        )
    per_second = UNIT_SECONDS[time_unit]
    for coarser in (unit for unit in UNIT_SECONDS if UNIT_SECONDS[unit] < per_second):
        as_seconds = numbers / UNIT_SECONDS[coarser]  # the values read in a coarser unit
        if len(numbers) and (as_seconds >= _EPOCH_1973_S).all() and (
            as_seconds < _EPOCH_2100_S).all():
            remedy = (f"drop --time-unit {time_unit}" if coarser == "s"
                      else f"use --time-unit {coarser}")
            raise SwevalError(
                f"{source}: column {column!r} has values like {int(numbers[0])}, epoch "
                f"{UNIT_NAMES[coarser]} of {iso_utc(int(as_seconds[0]))}, but --time-unit "
                f"{time_unit} reads them as {UNIT_NAMES[time_unit]} in January or February "
                f"1970: {remedy}."
            )
    seconds = numbers / per_second
    if np.abs(seconds).max() >= _MAX_PLAUSIBLE_SECONDS:
        bad = np.flatnonzero(np.abs(seconds) >= _MAX_PLAUSIBLE_SECONDS)
        fitting = [unit for unit in UNIT_SECONDS if UNIT_SECONDS[unit] > per_second
                   and np.abs(numbers).max() / UNIT_SECONDS[unit] < _MAX_PLAUSIBLE_SECONDS]
        advice = (f"they look like {UNIT_NAMES[fitting[0]]}: pass --time-unit {fitting[0]}"
                  if fitting else "they are not epoch time in any unit SW-EVAL reads")
        raise SwevalError(
            f"{source}: column {column!r} has epoch values too large for "
            f"{UNIT_NAMES[time_unit]} (data rows {first_rows(file_rows(values, bad))}, e.g. "
            f"{int(numbers[bad[0]])}); {advice}."
        )
    if time_unit != "s":
        early = seconds < _EPOCH_1973_S
        if early.any() and not early.all() and seconds[~early].min() >= _EPOCH_2000_S:
            bad = np.flatnonzero(early)
            raise SwevalError(
                f"{source}: column {column!r} has values that --time-unit {time_unit} puts "
                f"before 1973 (data rows {first_rows(file_rows(values, bad))}, e.g. "
                f"{int(numbers[bad[0]])} = {iso_utc(int(np.floor(seconds[bad[0]])))}) among "
                f"others all after 2000 (e.g. {iso_utc(int(np.floor(seconds[~early][0])))}): "
                "timestamps in another unit, or placeholders? Write every timestamp in one unit."
            )
    elif _look_like_yyyymmdd(numbers):
        raise SwevalError(
            f"{source}: column {column!r} has values like {int(numbers[0])} that look like "
            f"YYYYMMDD dates, not epoch seconds (as seconds they would be {iso_utc(int(numbers[0]))}); "
            "write them as ISO dates (2015-08-01) or as epoch seconds."
        )
    check_float_epochs(values, numbers, time_unit=time_unit, source=source, column=column)
    if pd.api.types.is_integer_dtype(values.dtype):  # exact: floats round ns epochs to 256 ns
        return np.floor_divide(values.to_numpy(dtype=np.int64), per_second)
    return np.floor(seconds).astype(np.int64)


def _look_like_yyyymmddhhmmss(numbers: NDArray[np.float64]) -> bool:
    """Every value is a 14-digit number that parses as YYYYMMDDhhmmss."""
    if not len(numbers) or (numbers < 10**13).any() or (numbers >= 10**14).any():
        return False
    distinct = pd.Series(np.unique(numbers).astype(np.int64).astype(str))
    parsed = pd.to_datetime(distinct, format="%Y%m%d%H%M%S", errors="coerce")
    return bool(parsed.notna().all())


def _look_like_yyyymmdd(numbers: NDArray[np.float64]) -> bool:
    """Every value is a whole number that reads as a valid date YYYYMMDD of 1900-2100."""
    if not len(numbers) or not ((numbers >= 19000101) & (numbers <= 21001231)).all():
        return False
    if not (numbers == np.round(numbers)).all():
        return False
    distinct = pd.Series(np.unique(numbers).astype(np.int64).astype(str))
    return bool(pd.to_datetime(distinct, format="%Y%m%d", errors="coerce").notna().all())


def minute_utc(seconds: int) -> str:
    """Epoch seconds to the minute in UTC, as tables and pages show them: ``2015-08-01 12:00 UTC``."""
    minute = np.datetime64(int(seconds), "s").astype("datetime64[m]")  # floors, as strftime
    return np.datetime_as_string(minute).replace("T", " ") + " UTC"


def iso_utc(seconds: int) -> str:
    """Epoch seconds as ISO 8601 in UTC, as messages show them: ``2015-08-01T12:00:00Z``."""
    return np.datetime_as_string(np.datetime64(int(seconds), "s")) + "Z"


#: The least gap that sets a log's first or last transactions apart from the rest
#: (:func:`isolated_ends`).
ISOLATED_GAP_S = 365 * 86_400


def isolated_ends(seconds: NDArray[np.int64]) -> tuple[int, int]:
    """How many of the earliest and of the latest transactions lie apart from the rest of the
    log: a row cut short (``64,231,88974`` for ``...,889740000``: a day of 1970) or a time in
    another unit, which would otherwise pass as data.

    With ``seconds`` sorted (n of them) and m = max(1, n // 1000), the first j ≤ m transactions
    are isolated when the gap after them is the largest among the first m + 1, is at least
    :data:`ISOLATED_GAP_S`, and is longer than the rest spans up to its last m transactions
    (which may be isolated themselves); the same, mirrored, for the last ones. Logs under 10
    transactions have none.

    Returns:
        (early, late): the number of isolated transactions at each end (0 for none).
    """
    n = len(seconds)
    if n < 10:
        return 0, 0
    m = max(1, n // 1000)
    head = np.diff(seconds[: m + 1])
    j = int(np.argmax(head))  # the first largest gap: after transaction j
    gap, span = head[j], seconds[n - m - 1] - seconds[j + 1]
    early = j + 1 if gap >= ISOLATED_GAP_S and gap > span else 0
    tail = np.diff(seconds[n - m - 1:])
    j = len(tail) - 1 - int(np.argmax(tail[::-1]))  # the last largest gap: before n − m + j
    count = len(tail) - j
    gap, span = tail[j], seconds[n - count - 1] - seconds[m]
    late = count if gap >= ISOLATED_GAP_S and gap > span else 0
    return early, late


def warn_isolated_ends(
    seconds: NDArray[np.int64], order: NDArray[np.int64], times: pd.Series, *, source: str,
    column: str,
) -> None:
    """Warn about transactions far before or after the rest of the log
    (:func:`sweval.data.timestamps.isolated_ends`), naming their data rows: they stay in the log,
    where a row cut short would enter every fold's training data (and, with ``--dedup first``,
    replace the pair's real transaction)."""
    early, late = isolated_ends(seconds)
    for count, lone, rest, side, edge in (
        (early, slice(0, early), early, "before", "begins"),
        (late, slice(len(seconds) - late, None), len(seconds) - late - 1, "after", "ends"),
    ):
        if not count:
            continue
        years = abs(int(seconds[rest]) - int(seconds[lone][-1 if side == "before" else 0]))
        rows = file_rows(times, order[lone])
        _log.warning(
            "%s: %d transaction(s) lie %.1f years %s the rest of the log in column %r (%s, data "
            "rows %s; the rest %s at %s): a row cut short, or a time in another unit? They are "
            "kept: check those rows.",
            source, count, years / (365.25 * 86_400), side, column, iso_utc(int(seconds[lone][0])),
            first_rows(np.sort(rows)), edge, iso_utc(int(seconds[rest])),
        )
