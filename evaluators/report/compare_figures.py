"""The comparison's scatter figure (papers/002 Fig. 2): for every pair of protocols, each
algorithm configuration's mean metric@k under one (x) against the other (y), with Kendall's τ
between the two rankings in the panel's title. Points near the diagonal's order mean the two
protocols rank alike; each point is labelled with its configuration's name (up to
:data:`MAX_LABELLED` per panel); variants (``--algorithms 'item-knn(n_neighbors=10),...'``) add
points.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sweval.evaluators.metrics.names import LABELS
from sweval.evaluators.report.figures import DPI

MAX_LABELLED = 12
"""Up to this many configurations per panel, each point is labelled with its name."""


def protocol_scatter(summary: pd.DataFrame, kendall: pd.DataFrame, protocols: Sequence[str],
                     k: int, *, metric: str = "recall") -> Figure:
    """One panel per protocol pair (at most 6 columns wide)."""
    part = summary[(summary["metric"] == metric) & (summary["k"] == k)
                   & (summary["stratum"] == "all") & summary["mean"].notna()]
    pairs = list(combinations(protocols, 2))
    ncols = min(3, len(pairs))
    nrows = -(-len(pairs) // ncols)
    fig = Figure(figsize=(3.6 * ncols, 3.4 * nrows), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    label = f"{LABELS.get(metric, metric)}@{k}"
    for ax, (first, second) in zip(axes, pairs, strict=False):
        a = part[part["protocol"] == first].set_index("algorithm")["mean"]
        b = part[part["protocol"] == second].set_index("algorithm")["mean"]
        common = [name for name in a.index if name in b.index]
        ax.scatter(a[common], b[common], s=18, alpha=0.8, color="tab:blue")
        if len(common) <= MAX_LABELLED:
            for name in common:
                ax.annotate(str(name), (a[name], b[name]), xytext=(3, 3),
                            textcoords="offset points", fontsize=7, color="0.25")
        if common:
            top = float(max(a[common].max(), b[common].max())) * 1.05 or 1.0
            ax.plot([0, top], [0, top], color="grey", lw=0.8, ls=":")
        row = kendall[(kendall["protocol_a"] == first) & (kendall["protocol_b"] == second)
                      & (kendall["k"] == k)]
        tau = float(row["tau"].iloc[0]) if len(row) else np.nan
        ax.set_title(f"τ = {tau:+z.2f} over {len(common)} configurations", fontsize=9)
        ax.set_xlabel(f"{label}, {first}", fontsize=8)
        ax.set_ylabel(f"{label}, {second}", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[len(pairs):]:
        ax.set_visible(False)
    return fig
