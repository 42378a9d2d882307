"""The tunables and shared constants of the synthetic Retail-like generator.

:class:`GeneratorConfig` holds every parameter of the generative model that
:mod:`sweval.data.synthetic` describes; :data:`POLICIES` names the A/B buckets written to the
``policy`` column.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bucket names in the order of :attr:`GeneratorConfig.bucket_shares`.
POLICIES: tuple[str, str, str] = ("pop", "other", "item-knn")
#: Bucket codes: indices into :data:`POLICIES`.
POP, OTHER, KNN = 0, 1, 2

#: The generator's targets (users, interactions, releases) are per this many days.
REFERENCE_DAYS = 120
SECONDS_PER_DAY = 86_400


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
