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
daily traffic and release rate). A scale whose generation would take more than half the machine's
memory is refused before anything is allocated (:func:`check_memory`).

Generation is vectorised with numpy per (day, within-day rank) batch; only the duplicate check
uses a Python set.  Scale 1 takes a few seconds.  Everything is drawn from one
``np.random.default_rng(seed)``, so a seed fully determines the frame.

This module holds :func:`generate_log`; the tunables (:class:`GeneratorConfig`,
:data:`POLICIES`) are in :mod:`sweval.data.synthetic_config`, the catalogue and the users'
schedule in :mod:`sweval.data.synthetic_population`, the click choice (taste and A/B policies)
in :mod:`sweval.data.synthetic_simulation`.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.synthetic_config import (
    POLICIES,
    REFERENCE_DAYS,
    SECONDS_PER_DAY,
    GeneratorConfig,
)
from sweval.data.synthetic_population import Catalogue, Plan
from sweval.data.synthetic_simulation import Simulation

__all__ = ["check_memory", "generate_log"]

_log = logging.getLogger(__name__)

#: Peak memory the generator takes per interaction, with a margin: 218-243 bytes measured at
#: scales 0.5 to 4 (120 days) and at scale 1 over 480 days, plus about 20 MB.
BYTES_PER_INTERACTION = 250
#: The share of the machine's memory a generation may take; the evaluation that reads the log
#: needs about as much again (benchmarks/RESULTS.md: 4.1 GB at scale 30).
MEMORY_SHARE = 0.5


def check_memory(
    scale: float, days: int, cfg: GeneratorConfig, *, total: int | None = None
) -> None:
    """Refuse a scale whose generation would take more than :data:`MEMORY_SHARE` of the
    machine's memory, before allocating anything (instead of a MemoryError part way).

    Args:
        scale, days, cfg: as :func:`generate_log` takes them.
        total: the machine's memory in bytes; default: what psutil reports.

    Raises:
        SwevalError: naming the interactions and memory the scale needs, the memory there is,
            and the largest scale accepted (for these ``days``).
    """
    per_scale = cfg.n_interactions * days / REFERENCE_DAYS * BYTES_PER_INTERACTION
    if total is None:
        import psutil

        total = psutil.virtual_memory().total
    budget = MEMORY_SHARE * total
    if scale * per_scale <= budget:
        return
    largest = math.floor(budget / per_scale * 100) / 100
    interactions = scale * cfg.n_interactions * days / REFERENCE_DAYS
    raise SwevalError(
        f"--scale {scale:g}: the generated log would hold about {_about(interactions)} "
        f"interactions and take about {_about(scale * per_scale / 2**30)} GiB while it is "
        f"generated, more than {MEMORY_SHARE:.0%} of this machine's {total / 2**30:,.1f} GiB; "
        f"the largest scale accepted here is {largest:g} (over {days} days). Use a smaller "
        "--scale, or --data."
    )


def _about(value: float) -> str:
    """A large number for messages: with thousands separators, or as ``7.35e+17`` beyond."""
    return f"{value:,.0f}" if value < 1e12 else f"{value:.3g}"


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
        SwevalError: A scale whose generation would not fit in memory (:func:`check_memory`).
    """
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    if not 0.0 <= bias <= 1.0:
        raise ValueError(f"bias must lie in [0, 1], got {bias}")
    cfg = config or GeneratorConfig()
    check_memory(scale, days, cfg)
    rng = np.random.default_rng(seed)
    t0 = pd.Timestamp(start)
    t0 = t0.tz_localize("UTC") if t0.tzinfo is None else t0.tz_convert("UTC")
    origin = int(t0.normalize().timestamp())

    cat = Catalogue.draw(cfg, scale, days, rng)
    plan = Plan.draw(cfg, scale, days, rng)
    items = Simulation(cfg, cat, plan, days, bias, rng).run()

    kept = items >= 0
    user_ids = rng.permutation(plan.n_users).astype(np.int64)
    item_ids = rng.permutation(cat.n_items).astype(np.int64)
    frame = pd.DataFrame(
        {
            "user": user_ids[plan.user[kept]],
            "item": item_ids[items[kept]],
            "timestamp": origin + plan.day[kept] * SECONDS_PER_DAY + plan.second[kept],
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
