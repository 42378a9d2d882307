"""What a comparison's diagnostics look like as text: one frame of display strings per table.

``sweval compare`` prints these frames (rich tables, ``flows/cli/compare_tables.py``) and its
directory's ``report.html`` shows them (:mod:`evaluators.report.protocols`), so the terminal and
the page always say the same thing. Each function takes the frame a comparison writes to CSV:

- :func:`kendall_view`: ``kendall.csv``, one row per pair of protocols, one column per k with
  "τ (p=…)";
- :func:`rank_shift_view`: ``rank_shift.csv`` at one k, one row per algorithm, its rank under
  each protocol with ↑n / ↓n, the places gained or lost against the first protocol;
- :func:`leakage_view`: ``leakage.csv`` at one k (papers/000 Table 4);
- :func:`overlap_view`: ``overlap_protocols.csv`` at one k, mean Jaccard of each protocol's lists
  against SW-EVAL's, pooled over the paired users of every split.

Cells are plain text; an empty string is "not defined", "—" is "defined but absent".
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

TIMELINE_PROTOCOLS = ("sw-eval", "temporal-global")
"""The protocols that train only on what precedes the test instance: no future item, ever."""

LEAKAGE_BUG = "BUG: must be 0"


def observes_timeline(protocol: str) -> bool:
    """Whether ``protocol`` trains only on transactions before its test instances."""
    return protocol in TIMELINE_PROTOCOLS


def kendall_view(kendall: pd.DataFrame, ks: Sequence[int]) -> pd.DataFrame:
    """Columns ``protocols, n, k=<k>…``: τ between two protocols' rankings with its p-value,
    "—" where τ is undefined (fewer than two algorithms ranked by both)."""
    rows = []
    for (first, second), part in kendall.groupby(["protocol_a", "protocol_b"], sort=False):
        row = {"protocols": f"{first} vs {second}", "n": str(int(part["n_algorithms"].max()))}
        for k in ks:
            at = part[part["k"] == k]
            if at.empty or pd.isna(at["tau"].iloc[0]):
                row[f"k={k}"] = "—"
            else:
                row[f"k={k}"] = f"{at['tau'].iloc[0]:+z.2f} (p={at['p_value'].iloc[0]:.2f})"
        rows.append(row)
    return pd.DataFrame(rows, columns=["protocols", "n", *(f"k={k}" for k in ks)])


def rank_shift_view(shifts: pd.DataFrame, protocols: Sequence[str], k: int) -> pd.DataFrame:
    """Columns ``algorithm, <protocol>…`` at ``k``: the rank, "3 ↑2" when it gained two places
    against ``protocols[0]``, "—" when the protocol does not evaluate the algorithm."""
    part = shifts[shifts["k"] == k]
    rows = []
    for algorithm, ranks in part.groupby("algorithm", sort=False):
        row = {"algorithm": str(algorithm)}
        for r in ranks.itertuples(index=False):
            if pd.isna(r.rank):
                cell = "—"
            elif pd.isna(r.shift) or r.shift == 0 or r.protocol == protocols[0]:
                cell = str(int(r.rank))
            else:
                cell = f"{int(r.rank)} {'↑' if r.shift > 0 else '↓'}{abs(int(r.shift))}"
            row[str(r.protocol)] = cell
        rows.append(row)
    return pd.DataFrame(rows, columns=["algorithm", *protocols]).fillna("—")


def leakage_view(leakage: pd.DataFrame, k: int) -> pd.DataFrame:
    """Columns ``protocol, algorithm, lists, recommended, future items, share, lists with one,
    note`` at ``k``: counts summed over splits, the share of recommended items that first appear
    in the log after the test instance; the note says why it is 0 or why it is not."""
    rows = []
    for r in leakage[leakage["k"] == k].itertuples(index=False):
        if observes_timeline(r.protocol):
            note = "0 by construction" if r.n_future == 0 else LEAKAGE_BUG
        else:
            note = "ignores the timeline"
        rows.append({
            "protocol": r.protocol, "algorithm": str(r.algorithm),
            "lists": f"{r.n_lists:,}", "recommended": f"{r.n_recommended:,}",
            "future items": f"{r.n_future:,}",
            "share": "—" if pd.isna(r.share_future) else f"{100 * r.share_future:.2f}%",
            "lists with one": f"{r.n_lists_with_future:,}", "note": note,
        })
    return pd.DataFrame(rows, columns=["protocol", "algorithm", "lists", "recommended",
                                       "future items", "share", "lists with one", "note"])


def overlap_view(overlap: pd.DataFrame, k: int) -> pd.DataFrame | None:
    """Columns ``protocol, <algorithm>…`` at ``k``: "0.54 (120)", the mean Jaccard of the
    protocol's top-k against SW-EVAL's for the same user and test instance, weighted by the
    users paired in each split (their number in brackets); "— (0)" where the protocol paired
    no user (its test instances never fall in SW-EVAL's windows); None when no protocol did."""
    at_k = overlap[overlap["k"] == k]
    part = at_k[at_k["n_users"] > 0]
    if part.empty:
        return None
    pooled = part.assign(weighted=part["jaccard"] * part["n_users"]).groupby(
        ["protocol", "algorithm"], sort=False)[["weighted", "n_users"]].sum()
    algorithms = [str(a) for a in dict.fromkeys(part["algorithm"])]
    rows = []
    for protocol in dict.fromkeys(at_k["protocol"]):
        row = {"protocol": str(protocol)}
        for algorithm in algorithms:
            if (protocol, algorithm) in pooled.index:
                at = pooled.loc[(protocol, algorithm)]
                row[algorithm] = f"{at['weighted'] / at['n_users']:.2f} ({int(at['n_users'])})"
            elif ((at_k["protocol"] == protocol) & (at_k["algorithm"] == algorithm)).any():
                row[algorithm] = "— (0)"
            else:
                row[algorithm] = ""
        rows.append(row)
    return pd.DataFrame(rows, columns=["protocol", *algorithms])
