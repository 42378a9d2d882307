"""Small synthetic logs for the flow tests (a module of its own: ``conftest`` names clash)."""

from __future__ import annotations

import numpy as np
import pandas as pd

DAY = 86_400
T0 = 1_704_067_200  # 2024-01-01T00:00:00Z


def log_frame(days: float, *, seed: int = 0, quiet_day: int | None = 3) -> pd.DataFrame:
    """A small log over ``days`` days from T0: 40 users, 30 items with skewed popularity.

    Every user interacts on about half of the days; on ``quiet_day`` only 2 users do, so that
    day's fold has fewer eligible users than u_min=5 and is skipped.
    """
    rng = np.random.default_rng(seed)
    rows = []
    popularity = 1.0 / np.arange(1, 31)
    popularity /= popularity.sum()
    for day in range(int(np.ceil(days))):
        users = range(2) if day == quiet_day else range(40)
        for user in users:
            if day != quiet_day and rng.random() < 0.5:
                continue
            for _ in range(rng.integers(1, 4)):
                t = T0 + day * DAY + int(rng.integers(0, DAY))
                if t < T0 + days * DAY:
                    rows.append((f"u{user}", f"i{rng.choice(30, p=popularity)}", t))
    return pd.DataFrame(rows, columns=["user", "item", "timestamp"])
