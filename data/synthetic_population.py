"""The population of the synthetic generator: the catalogue and who clicks when.

:class:`Catalogue` draws the items (categories, release days, appeal, partner items);
:class:`Plan` draws the users (taste cluster, A/B bucket, arrival, activity) and the schedule of
their planned interactions, with session timestamps. Which item each planned row clicks is
:mod:`sweval.data.synthetic_simulation`'s job. See :mod:`sweval.data.synthetic` for the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweval.data.synthetic_config import (
    POLICIES,
    REFERENCE_DAYS,
    SECONDS_PER_DAY,
    GeneratorConfig,
)


@dataclass(frozen=True)
class Catalogue:
    """Items in internal order, i.e. grouped by category (external ids are shuffled later)."""

    n_items: int
    category: np.ndarray  # category of each item, non-decreasing
    bounds: np.ndarray  # items of category c are bounds[c]:bounds[c + 1]
    release: np.ndarray  # release day (<= 0 for the initial catalogue)
    appeal: np.ndarray
    partners: np.ndarray  # (n_items, n_partners) items of the same category

    @classmethod
    def draw(cls, cfg: GeneratorConfig, scale: float, days: int, rng: np.random.Generator):
        share = cfg.initial_item_share
        size = cfg.n_items * scale**cfg.item_scale_exponent
        size *= share + (1.0 - share) * days / REFERENCE_DAYS
        n_items = max(cfg.min_items, round(size))
        n_cat = max(1, min(cfg.n_categories, n_items // 10))
        weights = rng.lognormal(0.0, 0.5, n_cat)
        sizes = 1 + rng.multinomial(n_items - n_cat, weights / weights.sum())
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        category = np.repeat(np.arange(n_cat), sizes)

        initial = rng.random(n_items) < share
        release = np.where(
            initial,
            -rng.integers(0, cfg.initial_max_age_days, n_items),
            rng.integers(1, max(days, 2), n_items),
        )
        appeal = rng.lognormal(0.0, cfg.appeal_sigma, n_items)
        lo, width = bounds[category], sizes[category]
        draws = rng.random((n_items, cfg.n_partners))
        partners = lo[:, None] + (draws * width[:, None]).astype(np.int64)
        return cls(n_items, category, bounds, release, appeal, partners)


@dataclass(frozen=True)
class Plan:
    """Who clicks when: one row per planned interaction, in generation order.

    Generation order is (day, within-day rank, user); ``segments`` delimits the batches of equal
    (day, rank), each user appearing at most once per batch.
    """

    n_users: int
    cluster: np.ndarray  # per user
    bucket: np.ndarray  # per user, index into POLICIES
    user: np.ndarray  # per row (internal user index)
    day: np.ndarray
    second: np.ndarray  # seconds since the row's midnight
    segments: np.ndarray  # row offsets of the (day, rank) batches
    day_starts: np.ndarray  # row offset of each day, length days + 1
    slot: np.ndarray  # per row, position in the per-user history buffer

    @classmethod
    def draw(cls, cfg: GeneratorConfig, scale: float, days: int, rng: np.random.Generator):
        factor = scale * days / REFERENCE_DAYS
        n_users = max(1, round(cfg.n_users * factor))
        target = max(n_users, round(cfg.n_interactions * factor))
        cluster = rng.integers(0, cfg.n_clusters, n_users)
        bucket = rng.choice(len(POLICIES), n_users, p=np.asarray(cfg.bucket_shares))
        dow = np.arange(days) % 7
        day_weight = 1.0 + cfg.weekly_amplitude * np.cos(2 * np.pi * (dow - 6) / 7)
        arrival = rng.choice(days, n_users, p=day_weight / day_weight.sum())
        activity = rng.lognormal(0.0, cfg.activity_sigma, n_users)
        activity /= activity.sum()

        # Draw the schedule once, measure how much the window cuts off, then redraw with the
        # planned total inflated accordingly (a trial draw is cheap compared to the simulation).
        kept_share = 1.0
        for _ in range(2):
            planned = round(n_users + (target - n_users) / kept_share)
            counts = 1 + rng.multinomial(planned - n_users, activity)
            np.minimum(counts, cfg.max_user_interactions, out=counts)
            user = np.repeat(np.arange(n_users), counts)
            first = np.concatenate([[0], np.cumsum(counts)[:-1]])
            gap = np.where(
                rng.random(user.size) < cfg.same_day_prob,
                0,
                rng.geometric(1.0 / max(cfg.mean_gap_days, 1.0), user.size),
            )
            gap[first] = 0
            offset = np.cumsum(gap)
            offset -= np.repeat(offset[first], counts)
            day = arrival[user] + offset
            inside = day < days
            kept_share = max(inside.sum() - n_users, 1) / max(planned - n_users, 1)
        user, day = user[inside], day[inside]

        # Rows are grouped by user with non-decreasing days: rank within each (user, day).
        n = user.size
        new_group = np.ones(n, dtype=bool)
        new_group[1:] = (user[1:] != user[:-1]) | (day[1:] != day[:-1])
        group_start = np.flatnonzero(new_group)
        group_len = np.diff(np.append(group_start, n))
        rank = np.arange(n) - np.repeat(group_start, group_len)
        slot = np.arange(n)  # rows are grouped by user: a ready-made history buffer layout

        second = _session_seconds(cfg, rank, group_start, group_len, rng)

        order = np.lexsort((user, rank, day))
        user, day, rank, second, slot = (a[order] for a in (user, day, rank, second, slot))
        change = np.ones(n, dtype=bool)
        change[1:] = (day[1:] != day[:-1]) | (rank[1:] != rank[:-1])
        segments = np.append(np.flatnonzero(change), n)
        day_starts = np.searchsorted(day, np.arange(days + 1))
        return cls(n_users, cluster, bucket, user, day, second, segments, day_starts, slot)


def _session_seconds(
    cfg: GeneratorConfig,
    rank: np.ndarray,
    group_start: np.ndarray,
    group_len: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Seconds after midnight: a session start from a daily cycle, then exponential gaps."""
    hours = np.arange(24)
    hour_weight = 0.08 + np.clip(np.cos(2 * np.pi * (hours - 20) / 24) + 0.35, 0.0, None)
    session_hour = rng.choice(24, group_start.size, p=hour_weight / hour_weight.sum())
    session_start = session_hour * 3600 + rng.integers(0, 3600, group_start.size)
    gaps = rng.exponential(cfg.session_gap_seconds, rank.size).astype(np.int64) + 1
    gaps[rank == 0] = 0
    elapsed = np.cumsum(gaps)
    elapsed -= np.repeat(elapsed[group_start], group_len)
    return np.minimum(np.repeat(session_start, group_len) + elapsed, SECONDS_PER_DAY - 1)
