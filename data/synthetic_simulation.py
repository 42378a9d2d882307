"""The click simulation of the synthetic generator: organic taste and the A/B logging policies.

:class:`Simulation` chooses the item of every planned row of a :class:`Plan`, day by day and
batch by batch: from the user's taste or, with probability ``bias``, from what the user's
bucket policy ("pop", "other", "item-knn") shows, recomputing the policies' state once per day
from the log generated so far. See :mod:`sweval.data.synthetic` for the model.
"""

from __future__ import annotations

import numpy as np

from sweval.data.synthetic_config import KNN, OTHER, POP, GeneratorConfig
from sweval.data.synthetic_population import Catalogue, Plan


class Simulation:
    """Chooses the item of every planned row, batch by batch, keeping the policies' state."""

    def __init__(
        self,
        cfg: GeneratorConfig,
        cat: Catalogue,
        plan: Plan,
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

        pop = np.flatnonzero(bucket == POP)
        if pop.size and self.pop_items.size:
            x = self.rng.random(pop.size) * self.pop_cdf[-1]
            out[pop] = self.pop_items[np.searchsorted(self.pop_cdf, x, side="right")]

        other = np.flatnonzero(bucket == OTHER)
        if other.size and self.new_items.size:
            out[other] = self.new_items[self.rng.integers(0, self.new_items.size, other.size)]

        knn = np.flatnonzero((bucket == KNN) & (self.last[users] >= 0))
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
