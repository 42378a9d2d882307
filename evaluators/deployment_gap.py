"""The validation-to-deployment gap (papers/003 §5.3–6, Table 2): how much an offline score
measured before deployment shrinks on the window the model is then deployed into.

::

    time ──────────────────────────────────────────────────────────────────────────▶
          D_T (everything before T): where a team validates            │ deployment
          ───────────────────────────────────────────────────[ T−tΔ, T )[ T, T+tΔ )
                                                               cut-off    test

    traditional   on D_T: a random share r of each user's transactions held out (random-split)
    proportional  on D_T: each user's last share r held out (temporal-user)
    cut-off       on D_T: train t < T − tΔ, test [T − tΔ, T) (temporal-global)
    test          train on D_T, test on the deployment window [T, T + tΔ) (one SW-EVAL fold)

For every algorithm, metric and k: each validation's value v, the test value t and the drop
100 · (t / v − 1) %: the number that tells a team how much its offline score will shrink after
deployment. 003's traditional set holds out 20 % of the interactions of *held-out users*; here it
holds out a share of *every* user's interactions (our hold-out protocols keep every user in
training), the other two sets follow 003.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols import (
    Protocol,
    RandomSplit,
    SlidingWindow,
    TemporalGlobal,
    TemporalUser,
)
from sweval.evaluators.windows import WindowSpec

#: The validation sets, in 003's order, with the protocol each one is.
VALIDATIONS = {"traditional": "random-split", "proportional": "temporal-user",
               "cut-off": "temporal-global"}


@dataclass(frozen=True)
class GapDesign:
    """The deployment window [deploy_start, deploy_start + width_s) and the validation share."""

    deploy_start: int
    width_s: int
    share: float = 0.2
    seed: int = 0

    def check(self, log: InteractionLog) -> None:
        """Raises SwevalError when the deployment window or the cut-off window lies outside
        the log."""
        if log.position(self.deploy_start) >= log.position(self.deploy_start + self.width_s):
            raise SwevalError(
                f"{log.source}: the deployment window starting at {self.deploy_start} holds no "
                "transaction; choose --start (T) and --window inside the log."
            )
        if self.deploy_start - self.width_s <= log.t_min:
            raise SwevalError(
                f"{log.source}: the cut-off validation window [T − tΔ, T) starts before the "
                "first transaction; choose a later --start or a shorter --window."
            )


def validation_protocols(design: GapDesign, *, u_min: int) -> dict[str, Protocol]:
    """The three validation protocols, run on D_T (:func:`before_deployment`)."""
    return {
        "traditional": RandomSplit(share=design.share, seed=design.seed, u_min=u_min),
        "proportional": TemporalUser(share=design.share, u_min=u_min),
        "cut-off": TemporalGlobal(start=design.deploy_start - design.width_s, u_min=u_min),
    }


def before_deployment(log: InteractionLog, design: GapDesign) -> InteractionLog:
    """D_T: the transactions before the deployment window (what validation may see)."""
    return log.restrict(log.timestamp < design.deploy_start)


def deployment_protocol(log: InteractionLog, design: GapDesign, *, u_min: int) -> Protocol:
    """The deployment test: one SW-EVAL fold, train on D_T, test on [T, T + tΔ)."""
    spec = WindowSpec(width_s=design.width_s, n_folds=1, start=design.deploy_start)
    return SlidingWindow.from_spec(log, spec, u_min=u_min)


def gap_table(validation: dict[str, pd.DataFrame], test: pd.DataFrame) -> pd.DataFrame:
    """003 Table 2: per algorithm, metric, k and validation set, its value, the test value and
    the drop in % (NaN where a value is missing or the validation value is 0).

    Args:
        validation: per validation name, its long results table (one split).
        test: the deployment fold's long results table.
    """
    def values(frame: pd.DataFrame) -> pd.Series:
        rows = frame[(frame["stratum"] == "all") & ~frame["skipped"].astype(bool)]
        return rows.groupby(["algorithm", "metric", "k"], dropna=False, sort=False)["value"].mean()

    deployed = values(test)
    parts = []
    for name, frame in validation.items():
        valid = values(frame)
        both = pd.concat({"validation_value": valid, "test_value": deployed}, axis=1)
        both = both[both["validation_value"].notna()]
        both.insert(0, "validation", name)
        parts.append(both)
    table = pd.concat(parts).reset_index()
    ratio = table["test_value"] / table["validation_value"].where(table["validation_value"] != 0)
    table["drop_pct"] = 100.0 * (ratio - 1.0)
    return table[["algorithm", "metric", "k", "validation", "validation_value", "test_value",
                  "drop_pct"]]
