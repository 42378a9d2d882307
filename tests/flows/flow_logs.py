"""The flow tests' log (a module of its own: ``conftest`` names clash): the shared small log
with a quiet day 3, whose fold has fewer eligible users than u_min=5 and is skipped."""

from __future__ import annotations

import pandas as pd
from sweval_testing import log_frame as _log_frame


def log_frame(days: float, *, seed: int = 0, quiet_day: int | None = 3) -> pd.DataFrame:
    """:func:`sweval_testing.log_frame` with day 3 quiet."""
    return _log_frame(days, seed=seed, quiet_day=quiet_day)
