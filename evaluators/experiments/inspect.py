"""Dataset diagnostics for choosing tΔ and u_min (``sweval inspect``; paper 000 Figs 1, 3, 4).

Everything is computed from the log alone, before any model runs:

- **Active time** of a user (item): t_last − t_first over its transactions, in days (000 §3.1);
  0 for a single transaction.
- **Windows** of width tΔ are placed as ``sweval run`` places them (:class:`WindowSpec`: the last
  window ends at the first multiple of tΔ at or after t_max + 1 s), counted back until the first
  window contains t_min. For window w = [t_w, t_w + tΔ):

  - ``interactions``: transactions with t in w;
  - ``active_users``: distinct users with a transaction in w (the test users U_w);
  - ``new_users`` / ``new_items``: users / items whose first transaction is in w (000 Fig. 4's
    "item releases");
  - ``last_interactions``: users whose last transaction is in w (000 Fig. 4);
  - ``eligible_users``: |U_w ∩ users with a transaction before t_w| = active_users − new_users
    (a user first seen in w has no history before t_w), i.e. SW-EVAL's eligible users with an
    expanding training set (SPEC §2).

- **Eligibility by width**: for each candidate tΔ, how many windows cover the log and how many
  keep at least u_min eligible users (the others would be skipped folds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.windows import MAX_FOLDS, WindowSpec

DAY_S = 86_400
#: Candidate window widths shown when none are asked for.
DEFAULT_WIDTHS = ("1h", "1D", "7D", "30D")


def first_and_last(codes: NDArray[np.int64], times: NDArray[np.int64], n: int) -> tuple[
    NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]
]:
    """Per code 0..n-1: time of its first and last transaction, and whether it has any.

    ``times`` must be non-decreasing (the log's order), so first/last occurrences suffice.
    """
    present = np.bincount(codes, minlength=n) > 0
    first = np.zeros(n, dtype=np.int64)
    last = np.zeros(n, dtype=np.int64)
    # assignment keeps the last write: reversed order writes the first occurrence last
    first[codes[::-1]] = times[::-1]
    last[codes] = times
    return first, last, present


def active_time(log: InteractionLog) -> pd.DataFrame:
    """Active time in days of users and items: one row per entity kind with its distribution.

    Columns: ``entity`` (users | items), ``n``, ``single`` (share whose transactions all fall at
    one instant: active time 0 days; shown as "0 days %"),
    ``mean_days``, ``median_days``, ``p90_days``, ``max_days``.
    """
    rows = []
    for entity, codes, n in (("users", log.user, log.n_users), ("items", log.item, log.n_items)):
        first, last, present = first_and_last(codes, log.timestamp, n)
        days = (last[present] - first[present]) / DAY_S
        rows.append({
            "entity": entity,
            "n": int(present.sum()),
            "single": float(np.mean(days == 0)) if len(days) else float("nan"),
            "mean_days": float(days.mean()) if len(days) else float("nan"),
            "median_days": float(np.median(days)) if len(days) else float("nan"),
            "p90_days": float(np.quantile(days, 0.9)) if len(days) else float("nan"),
            "max_days": float(days.max()) if len(days) else float("nan"),
        })  # fmt: skip
    return pd.DataFrame(rows)


def active_days(log: InteractionLog, entity: str) -> NDArray[np.float64]:
    """Every user's (``entity="users"``) or item's active time in days."""
    codes, n = (log.user, log.n_users) if entity == "users" else (log.item, log.n_items)
    first, last, present = first_and_last(codes, log.timestamp, n)
    return (last[present] - first[present]) / DAY_S


def covering_windows(log: InteractionLog, width_s: int) -> WindowSpec:
    """The SW-EVAL windows of width ``width_s`` that cover the whole log (the latest
    :data:`MAX_FOLDS` when more would be needed)."""
    end = -((-(log.t_max + 1)) // width_s) * width_s
    n = -((-(end - log.t_min)) // width_s)
    return WindowSpec(width_s=width_s, n_folds=max(1, min(n, MAX_FOLDS)))


@dataclass(frozen=True)
class WindowActivity:
    """Per-window counts of one width (see the module docstring for each column)."""

    width_s: int
    frame: pd.DataFrame  # t_start, interactions, active_users, new_users, new_items,
    #                      last_interactions, eligible_users


def window_activity(log: InteractionLog, width_s: int) -> WindowActivity:
    """Counts per covering window of width ``width_s`` (every window, empty ones included)."""
    spec = covering_windows(log, width_s)
    t0 = spec.first_start(log.t_max)
    n = spec.n_folds

    def window_of(times: NDArray[np.int64]) -> NDArray[np.int64]:
        return (times - t0) // width_s

    inside = log.timestamp >= t0
    user, when = log.user[inside], window_of(log.timestamp[inside])
    first_u, last_u, has_u = first_and_last(log.user, log.timestamp, log.n_users)
    first_i, _, has_i = first_and_last(log.item, log.timestamp, log.n_items)

    def count(windows: NDArray[np.int64]) -> NDArray[np.int64]:
        windows = windows[windows >= 0]
        return np.bincount(windows, minlength=n)[:n]

    pairs = np.unique(when * np.int64(log.n_users) + user)
    active = count(pairs // log.n_users)
    new_users = count(window_of(first_u[has_u]))
    frame = pd.DataFrame({
        "t_start": t0 + np.arange(n, dtype=np.int64) * width_s,
        "interactions": count(when),
        "active_users": active,
        "new_users": new_users,
        "new_items": count(window_of(first_i[has_i])),
        "last_interactions": count(window_of(last_u[has_u])),
        "eligible_users": active - new_users,
    })  # fmt: skip
    return WindowActivity(width_s=width_s, frame=frame)


def eligibility_by_width(
    log: InteractionLog, widths: Sequence[tuple[str, int]], u_min: int
) -> pd.DataFrame:
    """One row per candidate width: windows covering the log, how many keep ≥ u_min eligible
    users (and at least one: ``sweval run`` skips a window without any, whatever u_min), and
    the eligible users' median and 10th percentile per window.

    Args:
        widths: (label, seconds) pairs, e.g. ``[("1D", 86400)]``.
        u_min: the fold threshold of ``sweval run``.
    """
    rows = []
    for label, seconds in widths:
        frame = window_activity(log, seconds).frame
        eligible = frame["eligible_users"].to_numpy()
        usable = int((eligible >= max(u_min, 1)).sum())
        rows.append({
            "window": label,
            "windows": len(frame),
            "usable": usable,
            "usable_share": usable / len(frame),
            "median_eligible": float(np.median(eligible)),
            "p10_eligible": float(np.quantile(eligible, 0.1)),
            "median_interactions": float(frame["interactions"].median()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def top_item_popularity(log: InteractionLog, width_s: int, n_items: int = 3) -> pd.DataFrame:
    """Transactions per window of the ``n_items`` most popular items (000 Fig. 1): columns
    ``t_start`` and one per item, named by its raw id."""
    spec = covering_windows(log, width_s)
    t0 = spec.first_start(log.t_max)
    counts = np.bincount(log.item, minlength=log.n_items)
    top = np.argsort(-counts, kind="stable")[:n_items]
    when = (log.timestamp - t0) // width_s
    frame = {"t_start": t0 + np.arange(spec.n_folds, dtype=np.int64) * width_s}
    for code in top:
        mine = when[(log.item == code) & (when >= 0)]
        frame[str(log.item_ids[code])] = np.bincount(mine, minlength=spec.n_folds)
    return pd.DataFrame(frame)
