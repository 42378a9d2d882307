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

from dataclasses import dataclass

from sweval.data.errors import SwevalError

#: At most this many windows (window boundaries stay plausible int64 epochs).
MAX_FOLDS = 100_000


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
