"""Evaluation windows: n equal, half-open windows of width tΔ (SPEC §2).

::

    time ───────────────────────────────────────────────────────────────────────▶
          │◀──────────── D_{t_0} (training of fold 0) ────────────▶│
          ├──────────────────────────────────────────────────────────┼────┬────┬─ ─ ─┬────┤
                                                                    t_0  t_1  t_2      t_n
                                                                    [ f0 )[ f1 )     [fn-1)
          │◀──────────────── D_{t_1} (training of fold 1) ────────────────▶│

    fold f tests on [t_f, t_f + tΔ) and trains on every transaction with t < t_f
    (or, with a training window L, on t_f - L ≤ t < t_f).

t_0 is ``--start`` when given. Otherwise the last window ends at the first multiple of tΔ
(counted from 1970-01-01T00:00:00Z) at or after t_max + 1 s, and the n windows are counted back
from there: daily windows start at UTC midnight, hourly ones on the hour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError

#: Bounds that keep every window boundary a plausible int64 epoch: durations and instants within
#: 10**11 s (~3,000 years) of 1970, at most 100,000 windows.
MAX_SECONDS = 10**11
MAX_FOLDS = 100_000

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


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """How to cut the evaluation period.

    Attributes:
        width_s: tΔ in seconds.
        n_folds: number of windows n.
        start: t_0 in epoch seconds, or None for windows aligned to end after the last event.
        train_window_s: length of a sliding training window, or None for expanding training.
    """

    width_s: int
    n_folds: int
    start: int | None = None
    train_window_s: int | None = None

    def __post_init__(self) -> None:
        if self.width_s <= 0:
            raise SwevalError(f"window width must be > 0 seconds, got {self.width_s}.")
        if self.n_folds <= 0:
            raise SwevalError(f"--folds must be at least 1, got {self.n_folds}.")
        if self.n_folds > MAX_FOLDS:
            raise SwevalError(
                f"--folds {self.n_folds}: at most {MAX_FOLDS:,} windows; use a wider --window."
            )
        if self.train_window_s is not None and self.train_window_s <= 0:
            raise SwevalError(f"--train-window must be > 0, got {self.train_window_s} s.")

    def first_start(self, t_max: int) -> int:
        """t_0: ``start`` if set, else aligned so the last window ends at ceil((t_max+1)/tΔ)·tΔ."""
        if self.start is not None:
            return self.start
        end = -((-(t_max + 1)) // self.width_s) * self.width_s  # ceil division
        return end - self.n_folds * self.width_s

    def bounds(self, t_max: int) -> list[tuple[int, int]]:
        """The windows [t_f, t_f + tΔ), f = 0..n-1."""
        t0 = self.first_start(t_max)
        return [(t0 + f * self.width_s, t0 + (f + 1) * self.width_s) for f in range(self.n_folds)]
