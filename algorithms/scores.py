"""Score rounding shared by the models and the rankers.

:mod:`algorithms.ranking_kernels` snaps alike.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Scores that are sums of floats (kNN, SVD) are rounded to this many decimals before ranking:
#: far above float64 noise for realistic magnitudes (|score| < 10⁵), far below any real
#: difference, so mathematically tied scores tie exactly and are ordered by item id.
SCORE_DECIMALS = 10


def snap_scores(scores: NDArray[np.float64]) -> NDArray[np.float64]:
    """Round scores to :data:`SCORE_DECIMALS` decimals, in place, and return them."""
    return np.round(scores, SCORE_DECIMALS, out=scores)
