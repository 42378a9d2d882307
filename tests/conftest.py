"""Shared fixtures: tiny logs built from (user, item, timestamp) tuples."""

from __future__ import annotations

import os

import pandas as pd
import pytest

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from data.log import InteractionLog  # noqa: E402

DAY = 86_400


def make_log(rows: list[tuple], columns: tuple[str, ...] = ("user", "item", "timestamp"), **kw) -> InteractionLog:
    """An InteractionLog from tuples; ``policy`` is picked up when a 4th column is given."""
    frame = pd.DataFrame(rows, columns=list(columns))
    if "policy" in frame.columns:
        kw.setdefault("policy_col", "policy")
    return InteractionLog.from_frame(frame, **kw)


@pytest.fixture
def log_factory():
    return make_log
