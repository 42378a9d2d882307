"""Helpers shared by the test modules (imported by name; ``tests/`` is on sys.path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from sweval.data.log import InteractionLog

DAY = 86_400


def make_log(rows: list[tuple], columns: tuple[str, ...] = ("user", "item", "timestamp"), **kw) -> InteractionLog:
    """An InteractionLog from tuples; a 4th ``policy`` column is picked up as the policy."""
    frame = pd.DataFrame(rows, columns=list(columns) + (["policy"] if rows and len(rows[0]) == len(columns) + 1 else []))
    if "policy" in frame.columns:
        kw.setdefault("policy_col", "policy")
    return InteractionLog.from_frame(frame, **kw)


def exclude_seen(scores: np.ndarray, matrix: sp.csr_matrix, rows: np.ndarray) -> None:
    """Reference seen-item filter: set each row's training items to -inf, in place."""
    sub = matrix[rows]
    block_row = np.repeat(np.arange(len(rows)), np.diff(sub.indptr))
    scores[block_row, sub.indices] = -np.inf


def group_members(pgid: int) -> list[str]:
    """Live (non-zombie) processes of process group ``pgid``, as ``pid command`` lines."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(f"{entry.name} {stat[: stat.rindex(')') + 1]}")
    return members
