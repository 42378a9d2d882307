"""Durations and instants as users write them (``--window 7D``, ``--start 2015-08-01``), to
seconds: one reading for every option and every command."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError

#: Durations and instants within 10**11 s (~3,000 years) of 1970: every window boundary stays a
#: plausible int64 epoch.
MAX_SECONDS = 10**11

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")
_UNITS = {
    "s": 1, "sec": 1, "second": 1, "seconds": 1,
    "min": 60, "m": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}


def parse_duration(text: str | int, *, option: str = "--window") -> int:
    """Parse a duration (``1D``, ``12h``, ``7D``, ``3600s``, ``30min``, ``2W``) into seconds.

    Raises:
        SwevalError: unparsable, or not a positive whole number of seconds.
    """
    if isinstance(text, int | np.integer):
        seconds = int(text)
    else:
        match = _DURATION.match(str(text))
        if match and match.group(2) == "M":  # pandas' month, or minutes? Never guess.
            raise SwevalError(
                f"{option} {text!r}: 'M' is ambiguous; write 'min' for minutes (30min), and "
                "days for months, which have no fixed length (30D)."
            )
        unit = match.group(2).lower() if match else ""
        if not match or unit not in _UNITS:
            raise SwevalError(
                f"{option} {text!r}: not a duration; use a number and a unit, e.g. 1D, 12h, "
                "7D, 3600s, 30min, 2W."
            )
        value = float(match.group(1)) * _UNITS[unit]
        if value != int(value):
            raise SwevalError(f"{option} {text!r}: must be a whole number of seconds.")
        seconds = int(value)
    if seconds <= 0:
        raise SwevalError(f"{option} {text!r}: must be longer than zero.")
    if seconds > MAX_SECONDS:
        raise SwevalError(f"{option} {text!r}: longer than any log (at most {MAX_SECONDS:.0e} s).")
    return seconds


def parse_time(text: str | int, *, option: str = "--start") -> int:
    """Parse an instant (ISO 8601 date/time, or epoch seconds) into int epoch seconds, UTC.

    Refused: ``YYYYMMDD`` numbers (a date, or seconds in 1970?), other date spellings
    (``01/03/2024``: day or month first?) and words relative to now (``today``)."""
    if isinstance(text, int | np.integer):
        return _plausible(int(text), text, option)
    value = str(text).strip()
    if re.fullmatch(r"(19|20|21)\d{6}", value) and _is_yyyymmdd(value):
        raise SwevalError(
            f"{option} {text!r}: ambiguous; write {value[:4]}-{value[4:6]}-{value[6:]} for the "
            "date (as epoch seconds it would be in 1970)."
        )
    if re.fullmatch(r"-?\d+", value):
        return _plausible(int(value), text, option)
    if value.lower() in ("now", "today", "tomorrow", "yesterday"):
        raise SwevalError(
            f"{option} {text!r}: relative to when the command runs, so the same command would cut "
            "other windows tomorrow; write the date (2015-08-01)."
        )
    try:  # ISO 8601 only: 01/03/2024 is January 3 or March 1 depending on who wrote it
        stamp = pd.to_datetime(value, format="ISO8601")
    except (ValueError, TypeError):
        stamp = None
    try:  # year-month-day first, in the spellings ISO's strict form does not take (2015-08-01
        # 12:00:00 UTC, lowercase t and z, a decimal comma): not ambiguous either
        if stamp is None and re.match(r"\d{4}-\d{2}-\d{2}([ Tt]|$)", value):
            stamp = pd.Timestamp(value.replace(",", "."))
        if stamp is None:
            raise ValueError(value)
    except (ValueError, TypeError) as exc:
        raise SwevalError(
            f"{option} {text!r}: not an ISO date/time (2015-08-01, 2015-08-01T12:00:00Z) or "
            "epoch seconds."
        ) from exc
    if pd.isna(stamp):
        raise SwevalError(f"{option} {text!r}: not an ISO date/time or epoch seconds.")
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    # in the Timestamp's own unit (s, ms, us or ns): years beyond 1677..2262 do not fit in ns
    seconds = np.datetime64(stamp.tz_localize(None).asm8).astype("datetime64[s]").astype(np.int64)
    return _plausible(int(seconds), text, option)


def _plausible(seconds: int, text: object, option: str) -> int:
    if abs(seconds) > MAX_SECONDS:
        raise SwevalError(
            f"{option} {text!r}: too far from 1970 (more than {MAX_SECONDS:.0e} s, about 3,000 years)."
        )
    return seconds


def _is_yyyymmdd(value: str) -> bool:
    return not pd.isna(pd.to_datetime(value, format="%Y%m%d", errors="coerce"))
