"""Leakage severity (papers/000 §3–4, Tables 4–6, Figs 7–8; 004 §3.2): how much a model's score
and lists change when "future" data reaches its training set.

::

    time ─────────────────────────────────────────────────────────────────────────────▶
          history            P = [t_P, t_P + tΔ)   P+1         P+2    ...    P+J
          ──────────────────[───●──○──●─────○──)[──────────)[──────────)
                                   ○ = a user's last transaction in P: the test instance

    j = 0:  train on every transaction with t < t_P + tΔ, minus the test instances
    j ≥ 1:  also on the j periods after P: t < t_P + (j + 1)·tΔ, minus the test instances
            "now" (the cut-off of a model that reads the time, decay-pop) is that end

The test instances are the same for every j: each user's last transaction in P (ties in t: the
later row), for the users with an earlier transaction in the log (SPEC §7's "≥ 2 transactions",
counted up to the instance). Splits are hold-out splits of the log's prefix, so candidates,
history exclusion and ties follow SPEC §3 with "training" in place of D_{t_f}.

Reported per algorithm and j (one split per j, index j):

- every metric at every k (``results.csv``, fold = j): HR@k and NDCG@k are 000's;
- **future items** (000 Table 4): recommended items (top-k, over all test users) whose first
  transaction in the log is at or after P's end. Training at j = 0 ends at P's end, so the count
  is 0 by construction; ``n_future_instance`` counts instead the items first seen after the user's
  own test instance (the within-P leakage 000 leaves out by design: not 0 at j = 0);
- the **% change** of each metric against j = 0, its minimum and maximum over j ≥ 1 (Table 5);
- the algorithms' **ranking** per j (Table 6), by mean value, ties sharing the better rank;
- **extrinsic overlap**: the mean over test users of the Jaccard index |A ∩ B| / |A ∪ B| of the
  top-k sets at j and at j = 0 (Fig. 7), next to the **intrinsic overlap** of a seeded model:
  the same Jaccard between its lists at j = 0 with its seed and with seed + 1 (how much of the
  change is the model's own randomness).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.data.timestamps import minute_utc
from sweval.evaluators.config.text import parse_variant
from sweval.evaluators.protocols.holdout import Protocol
from sweval.evaluators.protocols.splits import Split, holdout_split
from sweval.evaluators.stats.overlap import jaccard
from sweval.evaluators.units.algorithm_spec import AlgorithmSpec, variant_label

NAME = "leak-severity"



@dataclass(frozen=True)
class SeverityDesign:
    """The test period P = [test_start, test_start + period) and the J future periods after it."""

    test_start: int
    period_s: int
    periods: int

    @property
    def test_end(self) -> int:
        return self.test_start + self.period_s

    def train_end(self, j: int) -> int:
        """Training at step j holds the transactions with t < train_end(j) (minus the tests)."""
        return self.test_end + j * self.period_s

    def check(self, log: InteractionLog) -> None:
        """Raises SwevalError when P holds no transaction or J exceeds the periods after P."""
        if self.periods < 0:
            raise SwevalError(f"--leak-periods must be ≥ 0, got {self.periods}.")
        lo, hi = log.position(self.test_start), log.position(self.test_end)
        if hi <= lo:
            raise SwevalError(
                f"{log.source}: the test period [{minute_utc(self.test_start)}, {minute_utc(self.test_end)}) "
                f"holds no transaction (the log spans {minute_utc(log.t_min)} to {minute_utc(log.t_max)}); "
                "choose --leak-test-start and --window inside the log."
            )
        after = max(0, -((-(log.t_max + 1 - self.test_end)) // self.period_s))
        if self.periods > after:
            raise SwevalError(
                f"{log.source}: --leak-periods {self.periods} needs {self.periods} periods of "
                f"{self.period_s} s after the test period, but the log ends "
                f"{minute_utc(log.t_max)}: at most {after}."
            )


def held_out_positions(log: InteractionLog, start: int, end: int) -> NDArray[np.int64]:
    """Each user's last transaction in [start, end), for users with an earlier transaction,
    in user-code order (positions in the log)."""
    lo, hi = log.position(start), log.position(end)
    users = log.user[lo:hi]
    last = np.full(log.n_users, -1, dtype=np.int64)
    last[users] = np.arange(lo, hi, dtype=np.int64)  # later rows win: the last transaction
    first = np.full(log.n_users, len(log), dtype=np.int64)
    first[log.user[::-1]] = np.arange(len(log) - 1, -1, -1, dtype=np.int64)
    chosen = np.flatnonzero((last >= 0) & (first < last))
    return last[chosen]


class LeakageSeverity(Protocol):
    """``leak-severity``: one split per j = 0..J (see the module docstring)."""

    name: ClassVar[str] = NAME

    def __init__(self, design: SeverityDesign, *, u_min: int = 0) -> None:
        self.design = design
        self.u_min = u_min

    def splits(self, log: InteractionLog) -> Iterator[Split]:
        design = self.design
        design.check(log)
        held = held_out_positions(log, design.test_start, design.test_end)
        for j in range(design.periods + 1):
            end = design.train_end(j)
            prefix = log.restrict(log.timestamp < end)
            split = holdout_split(
                prefix, held, index=j, u_min=self.u_min, cutoff=end,
                definition={"kind": NAME, "test_start": design.test_start,
                            "period": design.period_s, "j": j},
            )  # fmt: skip
            yield replace(split, t_start=design.test_start, t_end=design.test_end)

    def describe(self) -> dict[str, Any]:
        d = self.design
        return {"test_start": d.test_start, "test_end": d.test_end, "period_s": d.period_s,
                "periods": d.periods}


# ---------------------------------------------------------------------- tables
def future_item_counts(
    lists: NDArray[np.int64],
    reference_time: NDArray[np.int64],
    first_seen: NDArray[np.int64],
    test_end: int,
    k: int,
) -> dict[str, int]:
    """Future items among the top-k lists: first seen at or after P's end (``n_future``) and
    after the user's own test instance (``n_future_instance``); -1 pads are not items."""
    top = lists[:, :k]
    valid = top >= 0
    seen = np.where(valid, first_seen[np.maximum(top, 0)], np.iinfo(np.int64).min)
    return {
        "n_recommended": int(valid.sum()),
        "n_future": int((valid & (seen >= test_end)).sum()),
        "n_future_instance": int((valid & (seen > reference_time[:, None])).sum()),
    }


def mean_jaccard(a: NDArray[np.int64], b: NDArray[np.int64], k: int) -> float:
    """Mean over rows of the Jaccard index of the top-k sets of ``a`` and ``b`` (pads ignored;
    two empty lists count 1): :func:`evaluators.stats.overlap.jaccard`, as in ``overlap.csv``."""
    if len(a) != len(b):
        raise ValueError("the two list matrices rank different numbers of users")
    return float(jaccard(a, b, [k])[k].mean()) if len(a) else float("nan")


def change_table(results: pd.DataFrame) -> pd.DataFrame:
    """000 Table 5: per algorithm, metric and k, the min and max % change over j ≥ 1 of the
    value against j = 0 (100 · (v_j / v_0 − 1)); NaN when v_0 is 0 or no j ≥ 1 exists."""
    values = _values(results)
    rows = []
    for (algorithm, metric, k), part in values.groupby(["algorithm", "metric", "k"], sort=False,
                                                          dropna=False):
        by_j = part.set_index("fold")["value"]
        base = by_j.get(0, np.nan)
        later = by_j.drop(index=0, errors="ignore")
        change = 100.0 * (later / base - 1.0) if base and np.isfinite(base) else later * np.nan
        rows.append({"algorithm": algorithm, "metric": metric, "k": k, "value_j0": base,
                     "min_change_pct": change.min() if len(change) else np.nan,
                     "max_change_pct": change.max() if len(change) else np.nan})
    return pd.DataFrame(rows)


def ranking_table(results: pd.DataFrame) -> pd.DataFrame:
    """000 Table 6: the algorithms' rank per j, metric and k (1 = best; ties share the better
    rank, ``method="min"``)."""
    values = _values(results).copy()
    values["rank"] = (values.groupby(["fold", "metric", "k"], dropna=False)["value"]
                      .rank(ascending=False, method="min").astype("Int64"))
    return values.rename(columns={"fold": "j"})[["j", "metric", "k", "algorithm", "value",
                                                 "rank"]]


def _values(results: pd.DataFrame) -> pd.DataFrame:
    rows = results[(results["stratum"] == "all") & ~results["skipped"].astype(bool)]
    return rows[["fold", "algorithm", "metric", "k", "value"]].reset_index(drop=True)


def pivot_by_j(frame: pd.DataFrame, value: str, algorithms: Sequence[str]) -> pd.DataFrame:
    """``value`` as a table: one row per algorithm (in the given order), one column per j."""
    table = frame.pivot_table(index="algorithm", columns="j", values=value, aggfunc="first")
    return table.reindex([a for a in algorithms if a in table.index])


@dataclass
class Severity:
    """The experiment's tables (see the module docstring; j is the ``fold`` of ``results``).

    Attributes:
        results: the long table (SPEC §8), fold = j.
        splits: per j: the training end, training transactions and test users.
        future: per (j, algorithm, k): recommended, future and instance-future items.
        change: 000 Table 5.
        ranking: 000 Table 6.
        overlap: per (j, algorithm, k): mean Jaccard of the top-k sets against j = 0.
        fingerprint: the data fingerprint of the log.
    """

    results: pd.DataFrame
    splits: pd.DataFrame
    future: pd.DataFrame
    change: pd.DataFrame
    ranking: pd.DataFrame
    overlap: pd.DataFrame
    fingerprint: str = ""


def severity_tables(
    log: InteractionLog,
    protocol: LeakageSeverity,
    results: pd.DataFrame,
    units: pd.DataFrame,
    lists_of: Any,
    ks: Sequence[int],
) -> Severity:
    """Assemble the tables from a run of ``protocol``.

    Args:
        results: the run's long table.
        units: one row per evaluated (fold = j, algorithm) with its ``unit_key``.
        lists_of: ``unit_key -> (n_users, K) global item codes`` (the stored lists).
        ks: the cut-offs.
    """
    from sweval.evaluators.protocols.splits import item_first_seen

    design = protocol.design
    first_seen = item_first_seen(log)
    held = held_out_positions(log, design.test_start, design.test_end)
    reference = log.timestamp[held]
    split_rows = []
    for j in range(design.periods + 1):
        end = design.train_end(j)
        split_rows.append({"j": j, "train_end": end,
                           "n_train": int(log.position(end)) - len(held),
                           "n_test": len(held)})
    lists = {(int(row.fold), row.algorithm): lists_of(row.unit_key)
             for row in units.itertuples(index=False)}
    future_rows, overlap_rows = [], []
    for (j, algorithm), top in sorted(lists.items()):
        base = lists.get((0, algorithm))
        for k in ks:
            future_rows.append({"j": j, "algorithm": algorithm, "k": k}
                               | future_item_counts(top, reference, first_seen,
                                                    design.test_end, k))
            if base is not None:
                overlap_rows.append({"j": j, "algorithm": algorithm, "k": k,
                                     "jaccard_vs_j0": mean_jaccard(top, base, k)})
    return Severity(
        results=results,
        splits=pd.DataFrame(split_rows),
        future=pd.DataFrame(future_rows),
        change=change_table(results),
        ranking=ranking_table(results),
        overlap=pd.DataFrame(overlap_rows),
        fingerprint=log.fingerprint(),
    )


def reseeded_entry(entry: str, settings: dict[str, dict[str, Any]]) -> str | None:
    """The ``--algorithms`` entry of the same configuration with seed + 1, for a model with a
    ``seed`` parameter (else None)."""
    spec = AlgorithmSpec.from_entry(entry, settings)
    if "seed" not in spec.canonical:
        return None
    _, own = parse_variant(entry)
    return variant_label(spec.name, own | {"seed": int(spec.canonical["seed"]) + 1})


def with_intrinsic(
    overlap: pd.DataFrame,
    seed_units: pd.DataFrame,
    reseeded: dict[str, str],
    lists_of: Any,
    units: pd.DataFrame,
    ks: Sequence[int],
) -> pd.DataFrame:
    """``overlap`` with an ``intrinsic`` column: per algorithm and k, the mean Jaccard between
    its j = 0 lists and those of its seed + 1 entry (NaN for unseeded models)."""
    own = {row.algorithm: row.unit_key for row in units.itertuples(index=False) if row.fold == 0}
    other = {row.algorithm: row.unit_key for row in seed_units.itertuples(index=False)}
    values = {}
    for entry, reseed in reseeded.items():
        if entry in own and reseed in other:
            a, b = lists_of(own[entry]), lists_of(other[reseed])
            values.update({(entry, k): mean_jaccard(a, b, k) for k in ks})
    overlap = overlap.copy()
    overlap["intrinsic"] = [values.get((a, k), np.nan)
                            for a, k in zip(overlap["algorithm"], overlap["k"], strict=True)]
    return overlap
