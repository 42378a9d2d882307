"""Many comparisons and the power of a design: adjusted p-values, the smallest p a design can
give, and the minimum detectable effect.

A family is the rows of one test at one (stratum, metric, k) and unit: the m pairs compared
(every pair of algorithms, or each algorithm against ``--baseline``: m − 1). With its m
p-values sorted p_(1) ≤ … ≤ p_(m) (rows without one are not counted in m)::

    holm  p_(i) ← min(1, max_{j ≤ i} (m − j + 1) · p_(j))        (--correction holm, default)
    bh    p_(i) ← min(1, min_{j ≥ i} m / j · p_(j))               Benjamini–Hochberg:
                                                                  scipy.stats.false_discovery_control
    none  p_(i) ← p_(i)

``p_holm`` is always Holm's; ``p_adjusted`` is the chosen correction's.

**The smallest p a design can give** (``min_p_reachable``): a rank or sign-flip test on n
paired units has a floor, whatever the data: Wilcoxon's is its p-value when every difference
has the same sign (scipy's ``wilcoxon(|d|)``: 2 / 2^n exactly without ties, 0.00195 for 10
folds), the permutation test's likewise (its p-value of |d|), the t-test has none (0). After
the correction the best case is every pair at its floor: Holm multiplies it by m, BH and none
keep it. When ``min_p_reachable`` ≥ α no data could make that row significant: the design
cannot tell, whatever ``p_value`` says.

**Minimum detectable effect** (``mde``, in the units of ``mean_diff``) at 80 % power, from the
observed standard deviation s of the paired differences: the δ at which the two-sided paired
t-test at level α' rejects with probability 0.8, the statistic being non-central t with n − 1
degrees of freedom and non-centrality δ√n / s::

    P(|T| > t_{1 − α'/2, n−1}) = 0.8,   T ~ nct(n − 1, δ √n / s)

α' = α / m for Holm and BH (the level the one true difference among m must reach) and α for
none. It is the t-test's; the Wilcoxon test's is close to it (asymptotic relative efficiency
3/π ≈ 0.955 for normal differences) unless its floor is above α, where no effect is
detectable: ``mde`` is then infinite.
"""

from __future__ import annotations

import functools
import warnings
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

Correction = Literal["holm", "bh", "none"]
CORRECTIONS: tuple[Correction, ...] = ("holm", "bh", "none")
#: How the corrections are named in the terminal and the report.
CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg", "none": "no correction"}
#: The power at which the minimum detectable effect is given.
POWER = 0.8


def holm(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm's step-down adjusted p-values; NaN entries stay NaN and are not counted in m."""
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    present = np.flatnonzero(~np.isnan(p))
    order = present[np.argsort(p[present], kind="stable")]
    m = len(order)
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order]) if m else np.array([])
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def benjamini_hochberg(p_values: ArrayLike) -> NDArray[np.float64]:
    """Benjamini–Hochberg adjusted p-values (scipy's ``false_discovery_control``); NaN entries
    stay NaN and are not counted in m."""
    from scipy.stats import false_discovery_control

    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    present = ~np.isnan(p)
    if present.any():
        adjusted[present] = false_discovery_control(p[present], method="bh")
    return adjusted


def adjust(p_values: ArrayLike, correction: Correction) -> NDArray[np.float64]:
    """The family's p-values adjusted by ``correction``."""
    if correction == "holm":
        return holm(p_values)
    if correction == "bh":
        return benjamini_hochberg(p_values)
    return np.asarray(p_values, dtype=np.float64).copy()


def reachable(floor: ArrayLike, m: int, correction: Correction) -> NDArray[np.float64]:
    """The smallest adjusted p each row can reach: its floor, times m under Holm (module
    docstring)."""
    factor = m if correction == "holm" else 1
    return np.minimum(np.asarray(floor, dtype=np.float64) * factor, 1.0)


def detection_level(alpha: float, m: int, correction: Correction) -> float:
    """α': the level one true difference among m must reach (α / m; α without correction)."""
    return alpha if correction == "none" else alpha / max(m, 1)


@functools.lru_cache(maxsize=4096)
def standardised_mde(n: int, level: float, power: float = POWER) -> float:
    """δ / s at which the two-sided paired t-test at ``level`` over n units has ``power``
    (module docstring); NaN with fewer than two units."""
    if n < 2:
        return np.nan
    from scipy.optimize import brentq
    from scipy.stats import nct, norm
    from scipy.stats import t as student

    df = n - 1
    critical = float(student.ppf(1 - level / 2, df))

    def shortfall(effect: float) -> float:
        nc = effect * np.sqrt(n)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            reached = float(nct.sf(critical, df, nc) + nct.cdf(-critical, df, nc))
        if not np.isfinite(reached):  # far tails scipy's series cannot evaluate: the normal
            spread = np.sqrt(1 + critical**2 / (2 * df))  # approximation of nct's tails
            reached = float(norm.cdf((nc - critical) / spread)
                            + norm.cdf((-nc - critical) / spread))
        return reached - power

    upper = 1.0
    while shortfall(upper) < 0:
        upper *= 2
        if upper > 1e12:
            return np.inf
    return float(brentq(shortfall, 0.0, upper, xtol=1e-10))


def mde(sd: ArrayLike, n: int, level: float, power: float = POWER) -> NDArray[np.float64]:
    """The minimum detectable mean difference at ``power``: ``standardised_mde · sd``; NaN
    where the differences have no variance."""
    s = np.asarray(sd, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(s > 0, standardised_mde(n, level, power) * s, np.nan)
