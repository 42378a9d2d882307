"""Top-k list overlap (``overlap.csv``): how different the lists really are, from the stored
lists of the unstratified units.

For two top-k sets A, B of one user (empty slots left out)::

    J@k(A, B) = |A ∩ B| / |A ∪ B|        (1 when both are empty)

averaged over the users both lists rank. Three kinds of pairs, one row per pair and k:

- ``algorithms``: two algorithms on the same fold, over the fold's eligible users U_f;
- ``seeds``: two labels that are one configuration with two seeds (``--seeds``), same fold:
  the intrinsic overlap of a stochastic model (papers/000 Fig. 7);
- ``folds``: one algorithm on two consecutive evaluated folds (skipped folds left out), over
  the users eligible in both: how stable what a user is shown is. Items a user consumed in the
  earlier window are no longer candidates in the later one, so this is below 1 even for a
  model that did not change.

Columns: ``kind, fold_a, fold_b, algorithm_a, algorithm_b, k, jaccard, n_users``
(``fold_a = fold_b`` for algorithms and seeds, ``algorithm_a = algorithm_b`` for folds).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import pandas as pd
from numba import njit
from numpy.typing import NDArray

COLUMNS = ["kind", "fold_a", "fold_b", "algorithm_a", "algorithm_b", "k", "jaccard", "n_users"]
KINDS = ("algorithms", "seeds", "folds")

#: One unit's lists: (users ascending, (n_users, K) item codes, −1 = empty slot).
Lists = tuple[NDArray[np.int64], NDArray[np.int64]]


def jaccard(a: NDArray[np.int64], b: NDArray[np.int64], ks: list[int]) -> dict[int, NDArray[np.float64]]:
    """J@k per row of two aligned list matrices (−1 = empty slot; an item repeated in a row
    counts once), for every k (:func:`_jaccard_rows`; a k beyond the lists' width reads
    them whole). Only the first max(ks) slots are read: the lists run as deep as a user's
    relevant set (R-precision), and the kernel's cost grows with the square of the width."""
    width = min(a.shape[1], b.shape[1], max(ks))
    values = _jaccard_rows(np.ascontiguousarray(a[:, :width], dtype=np.int64),
                           np.ascontiguousarray(b[:, :width], dtype=np.int64),
                           np.minimum(np.asarray(ks, dtype=np.int64), width))
    return {k: values[i] for i, k in enumerate(ks)}


@njit(cache=True, nogil=True)
def _jaccard_rows(
    a: NDArray[np.int64], b: NDArray[np.int64], ks: NDArray[np.int64]
) -> NDArray[np.float64]:
    """``out[i, r]`` = J@ks[i] of row r, in one pass over each row: which slots hold an item
    not seen earlier in their row (empty slots: no), and where a's items first appear in b;
    then per k, |A ∩ B| and |A ∪ B| from the first k slots."""
    n, width = a.shape
    out = np.empty((len(ks), n))
    new_a = np.empty(width, dtype=np.bool_)
    new_b = np.empty(width, dtype=np.bool_)
    in_b = np.empty(width, dtype=np.int64)  # first slot of b holding a's item (width: none)
    for r in range(n):
        for i in range(width):
            new_a[i] = _new_at(a, r, i)
            new_b[i] = _new_at(b, r, i)
            in_b[i] = width
            if new_a[i]:
                for j in range(width):
                    if b[r, j] == a[r, i]:
                        in_b[i] = j
                        break
        for c in range(len(ks)):
            k = ks[c]
            common = n_a = n_b = 0
            for i in range(k):
                if new_a[i]:
                    n_a += 1
                    if in_b[i] < k:
                        common += 1
                if new_b[i]:
                    n_b += 1
            union = n_a + n_b - common
            out[c, r] = common / union if union > 0 else 1.0
    return out


@njit(cache=True, nogil=True, inline="always")
def _new_at(lists: NDArray[np.int64], row: int, slot: int) -> bool:
    """Whether ``lists[row, slot]`` holds an item not seen earlier in its row."""
    item = lists[row, slot]
    if item < 0:
        return False
    for j in range(slot):
        if lists[row, j] == item:
            return False
    return True


def _common(first: Lists, second: Lists) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """The two list matrices restricted to the users both rank, aligned."""
    users, in_first, in_second = np.intersect1d(first[0], second[0], return_indices=True)
    return first[1][in_first], second[1][in_second], len(users)


def _rows(kind: str, fold_a: int, fold_b: int, name_a: str, name_b: str, first: Lists,
          second: Lists, ks: list[int]) -> list[dict[str, object]]:
    a, b, n = _common(first, second)
    values = jaccard(a, b, ks) if n else {k: np.zeros(0) for k in ks}
    return [
        {"kind": kind, "fold_a": fold_a, "fold_b": fold_b, "algorithm_a": name_a,
         "algorithm_b": name_b, "k": k, "jaccard": float(values[k].mean()) if n else np.nan,
         "n_users": n}
        for k in ks
    ]


def list_overlap(
    lists: Mapping[tuple[int, str], Lists],
    folds: list[int],
    labels: list[str],
    ks: list[int],
    seed_pairs: list[tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """``overlap.csv`` of the evaluated folds' lists.

    Args:
        lists: ``{(fold, label): lists}`` of every evaluated (fold, algorithm).
        folds: the evaluated folds, in time order.
        labels: the algorithms, in display order.
        ks: cut-offs (the lists hold at least max(ks) columns).
        seed_pairs: label pairs that differ only in their seed (kind ``seeds``).
    """
    seeded = set(seed_pairs or [])
    rows: list[dict[str, object]] = []
    for fold in folds:
        for name_a, name_b in itertools.combinations(labels, 2):
            if (fold, name_a) in lists and (fold, name_b) in lists:
                kind = "seeds" if (name_a, name_b) in seeded else "algorithms"
                rows += _rows(kind, fold, fold, name_a, name_b, lists[(fold, name_a)],
                              lists[(fold, name_b)], ks)
    for name in labels:
        for fold_a, fold_b in itertools.pairwise(folds):
            if (fold_a, name) in lists and (fold_b, name) in lists:
                rows += _rows("folds", fold_a, fold_b, name, name, lists[(fold_a, name)],
                              lists[(fold_b, name)], ks)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    order = {kind: i for i, kind in enumerate(KINDS)}
    frame = frame.sort_values(["kind", "fold_a", "k"], key=lambda c: c.map(order)
                              if c.name == "kind" else c, kind="stable")
    return frame.reset_index(drop=True)


def overlap_means(overlap: pd.DataFrame) -> pd.DataFrame:
    """Mean J@k over folds (or fold pairs) per (kind, algorithm_a, algorithm_b, k), with the
    number of folds it averages."""
    used = overlap[overlap["jaccard"].notna()]
    grouped = used.groupby(["kind", "algorithm_a", "algorithm_b", "k"], sort=False)["jaccard"]
    return grouped.agg(mean="mean", n_folds="count").reset_index()


def overlap_matrix(overlap: pd.DataFrame, k: int) -> pd.DataFrame | None:
    """Mean J@k as an algorithm × algorithm matrix (labels in the table's order): off the
    diagonal between two algorithms or seeds on the same folds, on it one algorithm on
    consecutive folds. None when the table has no row at ``k``."""
    means = overlap_means(overlap[overlap["k"] == k])
    if means.empty:
        return None
    labels = list(dict.fromkeys([*overlap["algorithm_a"], *overlap["algorithm_b"]]))
    matrix = pd.DataFrame(np.nan, index=labels, columns=labels)
    for row in means.itertuples():
        matrix.loc[row.algorithm_a, row.algorithm_b] = row.mean
        matrix.loc[row.algorithm_b, row.algorithm_a] = row.mean
    return matrix
