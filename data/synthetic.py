"""Deterministic synthetic interaction logs shaped like the paper's "Retail" data set.

The Retail log of the paper is proprietary: four months of de-duplicated implicit feedback
(734,813 interactions, 189,343 users, 10,700 items) collected while three recommenders ran an
A/B test (25% popularity, 25% undisclosed, 50% item-kNN).  :func:`generate_log` produces a log
with the same shape and the properties that matter for sliding-window evaluation, so the whole
pipeline can be exercised and benchmarked without the original data.

Generative model (one row = a user's *first* consumption of an item):

* **Catalogue.**  Items belong to ``n_categories`` categories of unequal size.  A share
  ``initial_item_share`` of the catalogue is already on sale at the start (release day drawn
  uniformly in ``(-initial_max_age_days, 0]``); the rest is released uniformly over the
  window.  Each item has a log-normal *appeal* (heavy-tailed popularity) and *ages*: on day
  ``d`` its weight is ``appeal * (1 + age / ageing_tau_days) ** -ageing_power`` for
  ``age = d - release >= 0`` and zero before release.  Each item also has ``n_partners``
  random partner items of its own category (accessories, the next part of a series...), the
  ground-truth item-item structure that item-kNN can discover.
* **Users.**  Every user belongs to one of ``n_clusters`` taste clusters; a cluster has a sparse
  Dirichlet(``cluster_concentration``) preference over categories.  A user arrives on a day
  drawn with a mild weekly cycle, and plans ``1 + Multinomial`` interactions whose weights
  are log-normal (``activity_sigma``): most users click a handful of items, a few click many.
  Successive interactions stay on the same day with probability ``same_day_prob``, otherwise
  the next one comes ``Geometric(1 / mean_gap_days)`` days later, so each user is active for a
  short span.  Interactions falling after the window are cut off (the planned total is
  inflated once so that the kept total matches the target).  As every user arrives within the
  window, traffic ramps up over the first days (day 0 carries about 60% of a later day).
* **Organic clicks (taste).**  With probability ``p_partner`` the user clicks a partner of
  their previous item, with ``p_same_category`` an item of the previous item's category, with
  ``p_global`` an item of the whole catalogue, and otherwise an item of a category drawn from
  their cluster's preference.  Within the chosen set, items are drawn proportionally to their
  current (ageing) weight.  A user's first click skips the two "previous item" rules.
* **A/B buckets and presentation bias.**  Each *user* is assigned to a bucket ("pop" 25%,
  "other" 25%, "item-knn" 50%, as in §3.2 of the paper), stored in the ``policy`` column.
  With probability ``bias`` a click comes from what the bucket's policy would show at that
  moment instead of the user's taste:

  - ``"pop"``: an item of the ``pop_top_n`` most consumed items of the previous
    ``pop_window_days`` days, drawn proportionally to those counts;
  - ``"item-knn"``: an item co-occurring with the user's previous item (the anchor) in the log
    generated so far.  A candidate is drawn by picking a random consumer of the anchor over
    the previous ``knn_window_days`` days and taking the item that consumer clicked right
    after the anchor (right before it, if the anchor was their latest click): this samples
    neighbours proportionally to (sequential) co-occurrence counts.  Of ``knn_candidates``
    such draws the most frequent one, an estimate of the top neighbour, that the user has not
    consumed yet is clicked;
  - ``"other"``: a uniformly drawn new release, i.e. an item released within the last
    ``new_release_days`` days (today included).

  When the policy cannot propose anything (no history yet on day 0, no previous item, no new
  release, a proposal the user already consumed) the click falls back to the user's taste, so
  the effective biased share is slightly below ``bias``.  With ``bias=0`` the ``policy`` column
  is independent of behaviour.  Policy state (top items, consumer lists) is recomputed once per
  day from the previous days, as a live system refreshing its models nightly would.
* **De-duplication.**  A click on an item the user already consumed is redrawn from the user's
  taste (up to ``max_redraws`` times, then from the whole catalogue); if it still collides the
  interaction is dropped, which happens for a negligible share of rows.
* **Timestamps.**  Each active (user, day) opens a session at an hour drawn from a daily cycle
  (quiet nights, evening peak); further clicks of that day follow after exponential gaps with
  mean ``session_gap_seconds``.  Timestamps are UTC epoch seconds from ``start`` (midnight),
  so daily windows align with day boundaries.

Scaling: ``scale`` multiplies the number of users and interactions linearly and the catalogue by
``scale ** item_scale_exponent`` (0.5 by default, at least ``min_items`` items), so that small
logs keep a catalogue whose density stays realistic (at scale 0.01, 1,892 users meet 1,070 items
rather than 107).  The targets are per 120 days: for another ``days`` the user and interaction
totals and the number of items released during the window scale with ``days / 120`` (constant
daily traffic and release rate).

Generation is vectorised with numpy per (day, within-day rank) batch; only the duplicate check
uses a Python set.  Scale 1 takes a few seconds.  Everything is drawn from one
``np.random.default_rng(seed)``, so a seed fully determines the frame.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["POLICIES", "GeneratorConfig", "generate_log"]

_log = logging.getLogger(__name__)

#: Bucket names in the order of :attr:`GeneratorConfig.bucket_shares`.
POLICIES: tuple[str, str, str] = ("pop", "other", "item-knn")
_POP, _OTHER, _KNN = 0, 1, 2

_REFERENCE_DAYS = 120
_SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class GeneratorConfig:
    """Tunables of the synthetic Retail-like generator (defaults match the paper's data set).

    Attributes:
        n_users: Users at scale 1 over 120 days.
        n_interactions: Interactions at scale 1 over 120 days.
        n_items: Catalogue size at scale 1 over 120 days.
        item_scale_exponent: The catalogue scales with ``scale ** item_scale_exponent``.
        min_items: Lower bound on the catalogue size.
        n_categories: Item categories (capped at a tenth of the catalogue).
        n_clusters: User taste clusters.
        cluster_concentration: Dirichlet parameter of a cluster's category preference; small
            values concentrate a cluster on few categories.
        initial_item_share: Share of the catalogue already released on day 0.
        initial_max_age_days: Age range of the initially released items.
        appeal_sigma: Log-normal sigma of item appeal (tail of item popularity).
        ageing_tau_days: Time scale of the power-law popularity decay.
        ageing_power: Exponent of the popularity decay.
        activity_sigma: Log-normal sigma of user activity (tail of interactions per user).
        max_user_interactions: Cap on a user's planned interactions.
        same_day_prob: Probability that a user's next interaction falls on the same day.
        mean_gap_days: Mean gap in days between a user's active days.
        weekly_amplitude: Relative amplitude of the weekly cycle of user arrivals.
        n_partners: Partner items per item.
        p_partner: Organic probability of clicking a partner of the previous item.
        p_same_category: Organic probability of staying in the previous item's category.
        p_global: Organic probability of drawing from the whole catalogue.
        bucket_shares: Shares of the "pop", "other" and "item-knn" buckets.
        pop_window_days: Look-back of the popularity policy.
        pop_top_n: Length of the popularity policy's list.
        new_release_days: Look-back of the "other" policy (new releases).
        knn_window_days: Look-back of the consumer lists used by the item-kNN policy.
        knn_candidates: Co-occurrence draws per item-kNN click; the most frequent one is shown.
        max_redraws: Redraws of a click that hits an already consumed item.
        session_gap_seconds: Mean gap between clicks of one session.
    """

    n_users: int = 189_343
    n_interactions: int = 734_813
    n_items: int = 10_700
    item_scale_exponent: float = 0.5
    min_items: int = 200
    n_categories: int = 40
    n_clusters: int = 30
    cluster_concentration: float = 0.1
    initial_item_share: float = 0.5
    initial_max_age_days: int = 365
    appeal_sigma: float = 1.3
    ageing_tau_days: float = 14.0
    ageing_power: float = 1.0
    activity_sigma: float = 1.2
    max_user_interactions: int = 300
    same_day_prob: float = 0.7
    mean_gap_days: float = 2.0
    weekly_amplitude: float = 0.15
    n_partners: int = 4
    p_partner: float = 0.25
    p_same_category: float = 0.3
    p_global: float = 0.15
    bucket_shares: tuple[float, float, float] = (0.25, 0.25, 0.5)
    pop_window_days: int = 7
    pop_top_n: int = 20
    new_release_days: int = 14
    knn_window_days: int = 28
    knn_candidates: int = 32
    max_redraws: int = 4
    session_gap_seconds: float = 120.0


def generate_log(
    scale: float = 1.0,
    seed: int = 0,
    *,
    days: int = 120,
    bias: float = 0.3,
    start: str = "2015-06-01",
    config: GeneratorConfig | None = None,
) -> pd.DataFrame:
    """Generate a synthetic Retail-like interaction log (see the module docstring).

    Args:
        scale: Multiplier of users and interactions (1.0 gives about 735k interactions from
            189k users); the catalogue grows with ``scale ** config.item_scale_exponent``.
        seed: Seed of the single ``np.random.default_rng`` used; equal seeds give equal frames.
        days: Length of the log in days (targets are per 120 days and scale with ``days``).
        bias: Presentation bias in [0, 1]: the probability that a click comes from what the
            user's A/B bucket policy shows rather than from the user's own taste.
        start: First day of the log (UTC midnight), anything ``pd.Timestamp`` parses.
        config: Further tunables; defaults to ``GeneratorConfig()``.

    Returns:
        A frame with columns ``user`` (int64), ``item`` (int64), ``timestamp`` (int64 epoch
        seconds, UTC) and ``policy`` (string: "pop", "other" or "item-knn", constant per user),
        sorted by timestamp, without duplicate (user, item) pairs.

    Raises:
        ValueError: On a non-positive scale or days, or a bias outside [0, 1].
    """
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    if not 0.0 <= bias <= 1.0:
        raise ValueError(f"bias must lie in [0, 1], got {bias}")
    cfg = config or GeneratorConfig()
    rng = np.random.default_rng(seed)
    t0 = pd.Timestamp(start)
    t0 = t0.tz_localize("UTC") if t0.tzinfo is None else t0.tz_convert("UTC")
    origin = int(t0.normalize().timestamp())

    cat = _Catalogue.draw(cfg, scale, days, rng)
    plan = _Plan.draw(cfg, scale, days, rng)
    items = _Simulation(cfg, cat, plan, days, bias, rng).run()

    kept = items >= 0
    user_ids = rng.permutation(plan.n_users).astype(np.int64)
    item_ids = rng.permutation(cat.n_items).astype(np.int64)
    frame = pd.DataFrame(
        {
            "user": user_ids[plan.user[kept]],
            "item": item_ids[items[kept]],
            "timestamp": origin + plan.day[kept] * _SECONDS_PER_DAY + plan.second[kept],
            "policy": np.asarray(POLICIES, dtype=object)[plan.bucket[plan.user[kept]]],
        }
    )
    # Generation order is (day, within-day rank, user); sort by time, ties by that order.
    frame = frame.iloc[np.argsort(frame["timestamp"].to_numpy(), kind="stable")]
    frame = frame.reset_index(drop=True)
    _log.info(
        "generated %d interactions, %d users, %d items (scale=%g, seed=%d, bias=%g, dropped=%d)",
        len(frame),
        frame["user"].nunique(),
        frame["item"].nunique(),
        scale,
        seed,
        bias,
        int((~kept).sum()),
    )
    return frame


@dataclass(frozen=True)
class _Catalogue:
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
        size *= share + (1.0 - share) * days / _REFERENCE_DAYS
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
class _Plan:
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
        factor = scale * days / _REFERENCE_DAYS
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
    return np.minimum(np.repeat(session_start, group_len) + elapsed, _SECONDS_PER_DAY - 1)


class _Simulation:
    """Chooses the item of every planned row, batch by batch, keeping the policies' state."""

    def __init__(
        self,
        cfg: GeneratorConfig,
        cat: _Catalogue,
        plan: _Plan,
        days: int,
        bias: float,
        rng: np.random.Generator,
    ) -> None:
        self.cfg, self.cat, self.plan, self.rng = cfg, cat, plan, rng
        self.days, self.bias = days, bias
        n_clusters, n_cat = cfg.n_clusters, cat.bounds.size - 1
        pref = rng.dirichlet(np.full(n_cat, cfg.cluster_concentration), n_clusters)
        self.cluster_cdf = np.cumsum(pref, axis=1)
        self.items = np.full(plan.user.size, -1, dtype=np.int64)  # per row, generation order
        self.history = np.full(plan.user.size, -1, dtype=np.int64)  # per slot (grouped by user)
        self.pos = np.full(plan.user.size, -1, dtype=np.int64)  # per row, its history slot
        first = np.full(plan.n_users, plan.user.size, dtype=np.int64)
        np.minimum.at(first, plan.user, plan.slot)
        self.first_slot = first
        self.filled = np.zeros(plan.n_users, dtype=np.int64)
        self.last = np.full(plan.n_users, -1, dtype=np.int64)
        self.seen: set[int] = set()

    # -- per-day state ------------------------------------------------------------------------

    def _start_day(self, d: int) -> None:
        cfg, cat, plan = self.cfg, self.cat, self.plan
        age = d - cat.release
        weight = np.where(
            age >= 0,
            cat.appeal * (1.0 + np.maximum(age, 0) / cfg.ageing_tau_days) ** -cfg.ageing_power,
            0.0,
        )
        self.cdf = np.concatenate([[0.0], np.cumsum(weight)])
        self.released = age >= 0

        def logged(first_day: int) -> tuple[np.ndarray, np.ndarray]:
            """Rows and items logged from ``first_day`` up to yesterday (dropped rows left out)."""
            lo = plan.day_starts[max(first_day, 0)]
            found = self.items[lo : plan.day_starts[d]]
            return lo + np.flatnonzero(found >= 0), found[found >= 0]

        _, recent = logged(d - cfg.pop_window_days)
        counts = np.bincount(recent, minlength=cat.n_items)
        top = np.argsort(-counts, kind="stable")[: cfg.pop_top_n]
        top = top[counts[top] > 0]
        self.pop_items = top
        self.pop_cdf = np.cumsum(counts[top]).astype(float)

        self.new_items = np.flatnonzero((age >= 0) & (age < cfg.new_release_days))

        rows, window = logged(d - cfg.knn_window_days)
        order = np.argsort(window, kind="stable")
        self.consumer_user = plan.user[rows[order]]
        self.consumer_pos = self.pos[rows[order]]
        self.consumer_bounds = np.concatenate(
            [[0], np.cumsum(np.bincount(window, minlength=cat.n_items))]
        )

    # -- item choice ----------------------------------------------------------------------------

    def _from_weights(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Draws items within internal index ranges proportionally to today's weights."""
        a, b = self.cdf[lo], self.cdf[hi]
        x = a + self.rng.random(lo.size) * (b - a)
        picked = np.searchsorted(self.cdf, x, side="right") - 1
        picked = np.clip(picked, lo, hi - 1)
        empty = b <= a
        if empty.any():  # nothing released in that range: fall back to the whole catalogue
            picked[empty] = self._global(int(empty.sum()))
        return picked

    def _global(self, n: int) -> np.ndarray:
        x = self.rng.random(n) * self.cdf[-1]
        return np.clip(np.searchsorted(self.cdf, x, side="right") - 1, 0, self.cat.n_items - 1)

    def _taste(self, users: np.ndarray, final: bool = False) -> np.ndarray:
        """Organic clicks of ``users`` (``final``: the whole catalogue, last redraw)."""
        cfg, cat = self.cfg, self.cat
        n = users.size
        if final:
            return self._global(n)
        last = self.last[users]
        has_last = last >= 0
        p1 = cfg.p_partner
        p2 = p1 + cfg.p_same_category
        p3 = p2 + cfg.p_global
        r = self.rng.random(n)
        r = np.where(has_last, r, p2 + r * (1.0 - p2))  # no previous item: skip its two rules
        out = np.full(n, -1, dtype=np.int64)

        partner = np.flatnonzero(has_last & (r < p1))
        cand = cat.partners[last[partner], self.rng.integers(0, cfg.n_partners, partner.size)]
        ok = self.released[cand] & (cand != last[partner])
        out[partner[ok]] = cand[ok]

        same = (has_last & (r >= p1) & (r < p2)) | (has_last & (r < p1) & (out < 0))
        glob = (r >= p2) & (r < p3)
        rest = ~same & ~glob & (out < 0)
        category = np.zeros(n, dtype=np.int64)
        category[same] = cat.category[last[same]]
        idx = np.flatnonzero(rest)
        u = self.rng.random(idx.size)
        cdf = self.cluster_cdf[self.plan.cluster[users[idx]]]
        category[idx] = np.minimum((cdf <= u[:, None]).sum(axis=1), cdf.shape[1] - 1)
        ranged = np.flatnonzero(same | rest)
        c = category[ranged]
        out[ranged] = self._from_weights(cat.bounds[c], cat.bounds[c + 1])
        g = np.flatnonzero(glob)
        out[g] = self._global(g.size)
        return out

    def _policy(self, users: np.ndarray) -> np.ndarray:
        """What each user's bucket policy shows and the user clicks; -1 when it has nothing."""
        out = np.full(users.size, -1, dtype=np.int64)
        bucket = self.plan.bucket[users]

        pop = np.flatnonzero(bucket == _POP)
        if pop.size and self.pop_items.size:
            x = self.rng.random(pop.size) * self.pop_cdf[-1]
            out[pop] = self.pop_items[np.searchsorted(self.pop_cdf, x, side="right")]

        other = np.flatnonzero(bucket == _OTHER)
        if other.size and self.new_items.size:
            out[other] = self.new_items[self.rng.integers(0, self.new_items.size, other.size)]

        knn = np.flatnonzero((bucket == _KNN) & (self.last[users] >= 0))
        anchor = self.last[users[knn]]
        lo, hi = self.consumer_bounds[anchor], self.consumer_bounds[anchor + 1]
        has = np.flatnonzero(hi > lo)
        if has.size:
            # A candidate is what a random consumer of the anchor clicked next to it (a draw
            # proportional to co-occurrence); the most frequent valid candidate approximates the
            # top of an item-kNN list that skips the anchor and the user's own history.
            m = self.cfg.knn_candidates
            lo, span, anchor = lo[has, None], (hi - lo)[has, None], anchor[has, None]
            pick = lo + (self.rng.random((has.size, m)) * span).astype(np.int64)
            other_user, pos = self.consumer_user[pick], self.consumer_pos[pick]
            first = self.first_slot[other_user]
            adjacent = np.where(pos + 1 < first + self.filled[other_user], pos + 1, pos - 1)
            cand = np.where(adjacent >= first, self.history[np.maximum(adjacent, 0)], -1)
            owner = np.repeat(users[knn[has]], m)
            consumed = self._collides(owner, cand.ravel()).reshape(cand.shape)
            valid = (cand >= 0) & (cand != anchor) & ~consumed
            votes = (cand[:, :, None] == cand[:, None, :]).sum(axis=2)
            best = np.argmax(np.where(valid, votes, -1), axis=1)
            rows = np.arange(has.size)
            hit = valid[rows, best]
            out[knn[has[hit]]] = cand[rows, best][hit]
        return out

    def _collides(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        keys = (users * self.cat.n_items + items).tolist()
        seen = self.seen
        return np.fromiter((k in seen for k in keys), dtype=bool, count=len(keys))

    def _batch(self, lo: int, hi: int) -> None:
        cfg, plan = self.cfg, self.plan
        users = plan.user[lo:hi]
        items = np.full(users.size, -1, dtype=np.int64)
        if self.bias > 0:
            biased = np.flatnonzero(self.rng.random(users.size) < self.bias)
            items[biased] = self._policy(users[biased])
        bad = items < 0
        bad[~bad] = self._collides(users[~bad], items[~bad])
        for attempt in range(cfg.max_redraws + 1):
            todo = np.flatnonzero(bad)
            if not todo.size:
                break
            items[todo] = self._taste(users[todo], final=attempt == cfg.max_redraws)
            bad[todo] = self._collides(users[todo], items[todo])
        items[bad] = -1

        ok = np.flatnonzero(~bad)
        u, it = users[ok], items[ok]
        self.items[lo:hi] = items
        pos = self.first_slot[u] + self.filled[u]
        self.history[pos] = it
        self.pos[lo + ok] = pos
        self.filled[u] += 1
        self.last[u] = it
        self.seen.update((u * self.cat.n_items + it).tolist())

    def run(self) -> np.ndarray:
        """Returns the internal item index of every planned row (-1 for dropped rows)."""
        plan = self.plan
        seg = plan.segments
        s = 0
        for d in range(self.days):
            self._start_day(d)
            end = plan.day_starts[d + 1]
            while s < seg.size - 1 and seg[s] < end:
                self._batch(int(seg[s]), int(seg[s + 1]))
                s += 1
        return self.items
