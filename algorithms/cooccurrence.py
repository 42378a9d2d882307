"""Item co-occurrence counts C = RᵀR carried from fold to fold (issue 20, incremental folds).

With R the binary user×item matrix of the training data, ``C[j, i]`` (i ≠ j) is the number of
users who consumed both j and i, and ``a_j`` the number of users of j: item-kNN's cosine is
``C[j, i] / sqrt(a_j · a_i)`` (:class:`algorithms.knn.ItemKNN`). C lives in the log's *global*
item codes, which sort like the raw ids and never change, so a later fold's C is the earlier
one plus the window's contribution, without renumbering.

Timeline of the update from the training data of [0, hi) to that of [0, hi')::

    [──── D_{t_f}: user u's items O_u ────)[── window: u's new items N_u ──)
    C' = C + Σ_u (N_u × O_u + O_u × N_u + N_u × N_u − diagonal)      a' = a + [new users of j]

Only the window's new (user, item) pairs enter: a repeat of a pair u already had adds
nothing (R is binary), and a user with a single item adds no off-diagonal entry.

Storage: two column-sorted CSRs over the global items, ``base`` and ``recent``, with summed
counts; a row of C is the sum of its two rows. Each advance merges the window's increments
(sorted once, O(w log w)) into ``recent`` (one pass over it), and ``recent`` into ``base``
when it outgrows ``RECENT_SHARE`` · sqrt(|base| · |increments|), so that a fold rewrites
about sqrt(|C| · |window's increments|) entries on average, not |C|. Every array is new at
each advance and never written afterwards: a fold's :class:`Cooccurrence` is a snapshot that
stays valid while the next folds advance (threads may still be ranking an earlier fold).

The counts are exact integers (int32) and equal, entry for entry, to RᵀR of the fold's
training matrix; tests/evaluators/test_training_state.py checks them, and item-kNN's rows
computed from them, against the from-scratch path on random logs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit
from numpy.typing import NDArray

#: ``recent`` is merged into ``base`` once it holds more than this many times
#: sqrt(|base| · |the advance's increments|) entries.
RECENT_SHARE = 2.0


@dataclass(frozen=True, eq=False)
class Cooccurrence:
    """C = RᵀR off the diagonal, and the users per item, in global item codes (a snapshot).

    Attributes:
        base_indptr, base_indices, base_counts: the older part of C, a CSR over the global
            items (int64 offsets, int32 columns ascending within a row, int32 counts > 0).
        recent_indptr, recent_indices, recent_counts: the newer part, the same layout; a
            column may be in both (its count is the sum).
        item_users: a_j, the number of distinct users of each global item (int64).
    """

    base_indptr: NDArray[np.int64]
    base_indices: NDArray[np.int32]
    base_counts: NDArray[np.int32]
    recent_indptr: NDArray[np.int64]
    recent_indices: NDArray[np.int32]
    recent_counts: NDArray[np.int32]
    item_users: NDArray[np.int64]

    @property
    def n_items(self) -> int:
        return len(self.item_users)

    @property
    def nnz(self) -> int:
        """Stored entries (a column in both parts counts twice)."""
        return len(self.base_indices) + len(self.recent_indices)

    @property
    def nbytes(self) -> int:
        """Memory of the arrays."""
        return sum(array.nbytes for array in (
            self.base_indptr, self.base_indices, self.base_counts, self.recent_indptr,
            self.recent_indices, self.recent_counts, self.item_users))  # fmt: skip

    @classmethod
    def empty(cls, n_items: int) -> Cooccurrence:
        indptr = np.zeros(n_items + 1, dtype=np.int64)
        none = np.zeros(0, dtype=np.int32)
        return cls(indptr, none, none, indptr, none, none, np.zeros(n_items, dtype=np.int64))

    @classmethod
    def from_matrix(cls, matrix: sp.csr_matrix, item_codes: NDArray[np.int64],
                    n_items: int) -> Cooccurrence:
        """C of a training matrix (compact columns ``item_codes``) over ``n_items`` global items,
        counted item by item (its users' items), in chunks of items on the kernel threads."""
        from sweval.algorithms.incidence_kernels import shared_incidence
        from sweval.algorithms.row_chunks import over_row_chunks

        n_cols = matrix.shape[1]
        lengths = np.diff(matrix.indptr)
        n_pairs = int(lengths[lengths > 1].sum())
        user_items = np.empty(n_pairs, dtype=np.int32)
        item_users = np.empty(n_pairs, dtype=np.int64)
        sizes, item_indptr, user_indptr = shared_incidence(
            matrix.indptr, matrix.indices, n_cols, user_items, item_users)
        codes = item_codes.astype(np.int64)
        pieces = over_row_chunks(n_cols, lambda lo, hi: _count_rows(
            lo, hi, item_indptr, item_users, user_indptr, user_items, codes))
        row_lengths = np.concatenate([piece[0] for piece in pieces])
        indptr = np.zeros(n_items + 1, dtype=np.int64)
        indptr[codes + 1] = row_lengths
        np.cumsum(indptr, out=indptr)
        indices = np.concatenate([piece[1] for piece in pieces])
        counts = np.concatenate([piece[2] for piece in pieces])
        users = np.zeros(n_items, dtype=np.int64)
        users[codes] = sizes
        empty = cls.empty(n_items)
        return cls(indptr, indices, counts, empty.recent_indptr, empty.recent_indices,
                   empty.recent_counts, users)

    def advanced(
        self,
        old_matrix: sp.csr_matrix | None,
        old_user_codes: NDArray[np.int64],
        old_item_codes: NDArray[np.int64],
        pair_user: NDArray[np.int64],
        pair_item: NDArray[np.int64],
    ) -> Cooccurrence:
        """C after adding the window's distinct pairs to the training data it was counted on.

        Args:
            old_matrix, old_user_codes, old_item_codes: the training data C was counted on
                (None: no training data yet).
            pair_user, pair_item: the window's distinct (user, item) pairs, global codes, sorted
                by (user, item); pairs already in ``old_matrix`` are allowed (they add nothing).
        """
        n_items = self.n_items
        if old_matrix is None or len(old_user_codes) == 0:
            old_indptr = np.zeros(1, dtype=np.int64)
            old_indices = np.zeros(0, dtype=np.int32)
            old_rows = np.full(len(pair_user), -1, dtype=np.int64)
        else:
            old_indptr, old_indices = old_matrix.indptr, old_matrix.indices
            old_rows = np.searchsorted(old_user_codes, pair_user).astype(np.int64)
            inside = old_rows < len(old_user_codes)
            known = np.zeros(len(pair_user), dtype=bool)
            known[inside] = old_user_codes[old_rows[inside]] == pair_user[inside]
            old_rows[~known] = -1
        keys, new_pair = _increments(
            old_rows, pair_user, pair_item, old_indptr, old_indices,
            old_item_codes.astype(np.int64), n_items,
        )  # fmt: skip
        item_users = self.item_users + np.bincount(pair_item[new_pair], minlength=n_items)
        if len(keys) == 0:
            return Cooccurrence(self.base_indptr, self.base_indices, self.base_counts,
                                self.recent_indptr, self.recent_indices, self.recent_counts,
                                item_users)
        keys.sort()
        fresh_indptr, fresh_indices, fresh_counts = _runs(keys, n_items)
        recent = _merge(self.recent_indptr, self.recent_indices, self.recent_counts,
                        fresh_indptr, fresh_indices, fresh_counts)
        base = (self.base_indptr, self.base_indices, self.base_counts)
        if len(recent[1]) > RECENT_SHARE * math.sqrt(len(base[1]) * len(keys)):
            base = _merge(*base, *recent)
            empty = Cooccurrence.empty(n_items)
            recent = (empty.recent_indptr, empty.recent_indices, empty.recent_counts)
        return Cooccurrence(*base, *recent, item_users)

    def to_csr(self, item_codes: NDArray[np.int64]) -> sp.csr_matrix:
        """C restricted to ``item_codes`` (ascending), as an int64 CSR in their compact order
        (for tests and inspection)."""
        n = self.n_items
        whole = (sp.csr_matrix((self.base_counts.astype(np.int64), self.base_indices,
                                self.base_indptr), shape=(n, n))
                 + sp.csr_matrix((self.recent_counts.astype(np.int64), self.recent_indices,
                                  self.recent_indptr), shape=(n, n)))  # fmt: skip
        return sp.csr_matrix(whole[item_codes][:, item_codes])


def _runs(keys: NDArray[np.int64], n_items: int):
    """A CSR (int64 offsets, int32 columns, int32 counts) of sorted keys row·n_items + column,
    repeats summed."""
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    counts = np.diff(np.append(starts, len(keys))).astype(np.int32)
    rows, columns = np.divmod(keys[starts], np.int64(n_items))
    indptr = np.zeros(n_items + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_items), out=indptr[1:])
    return indptr, columns.astype(np.int32), counts


@njit(cache=True, nogil=True)
def _increments(old_rows, pair_user, pair_item, old_indptr, old_indices, old_item_codes,
                n_items):
    """The keys j·n_items + i of the window's unit increments of C, and which pairs are new.

    Per user (a run of ``pair_user``), with O its old items (global codes, from its old CSR
    row ``old_rows``; -1: none) and N its window items not in O: every (n, o) and (o, n), and
    every (n, n') with n ≠ n'. Two passes: count, then fill.
    """
    n_pairs = len(pair_user)
    new_pair = np.zeros(n_pairs, dtype=np.bool_)
    keys = np.empty(0, dtype=np.int64)
    total = 0
    for phase in range(2):
        if phase == 1:
            keys = np.empty(total, dtype=np.int64)
        z = 0
        g = 0
        while g < n_pairs:
            h = g
            while h < n_pairs and pair_user[h] == pair_user[g]:
                h += 1
            a, b = 0, 0
            if old_rows[g] >= 0:
                a, b = old_indptr[old_rows[g]], old_indptr[old_rows[g] + 1]
            n_old = b - a
            if phase == 0:  # which window items are new: a merge of two ascending lists
                p = a
                for q in range(g, h):
                    while p < b and old_item_codes[old_indices[p]] < pair_item[q]:
                        p += 1
                    new_pair[q] = not (p < b and old_item_codes[old_indices[p]] == pair_item[q])
                n_new = 0
                for q in range(g, h):
                    n_new += new_pair[q]
                total += n_new * (2 * n_old + n_new - 1)
            else:
                for q in range(g, h):
                    if not new_pair[q]:
                        continue
                    j = pair_item[q]
                    for p in range(a, b):
                        i = old_item_codes[old_indices[p]]
                        keys[z] = j * n_items + i
                        keys[z + 1] = i * n_items + j
                        z += 2
                    for q2 in range(g, h):
                        if new_pair[q2] and q2 != q:
                            keys[z] = j * n_items + pair_item[q2]
                            z += 1
            g = h
    return keys, new_pair


@njit(cache=True, nogil=True)
def _merge(a_indptr, a_indices, a_counts, b_indptr, b_indices, b_counts):
    """The row-wise sum of two CSRs with ascending columns (same number of rows)."""
    n_rows = len(a_indptr) - 1
    bound = len(a_indices) + len(b_indices)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    indices = np.empty(bound, dtype=np.int32)
    counts = np.empty(bound, dtype=np.int32)
    z = 0
    for r in range(n_rows):
        p, p_end = a_indptr[r], a_indptr[r + 1]
        q, q_end = b_indptr[r], b_indptr[r + 1]
        if q == q_end:  # most rows of the base: untouched by the newer part
            indices[z : z + p_end - p] = a_indices[p:p_end]
            counts[z : z + p_end - p] = a_counts[p:p_end]
            z += p_end - p
        else:
            while p < p_end or q < q_end:
                if q >= q_end or (p < p_end and a_indices[p] < b_indices[q]):
                    indices[z], counts[z] = a_indices[p], a_counts[p]
                    p += 1
                elif p >= p_end or b_indices[q] < a_indices[p]:
                    indices[z], counts[z] = b_indices[q], b_counts[q]
                    q += 1
                else:
                    indices[z], counts[z] = a_indices[p], a_counts[p] + b_counts[q]
                    p += 1
                    q += 1
                z += 1
        indptr[r + 1] = z
    return indptr, indices[:z], counts[:z]  # shorter where a column was in both


@njit(cache=True, nogil=True)
def _count_rows(lo, hi, item_indptr, item_users, user_indptr, user_items, item_codes):
    """Rows lo..hi-1 (compact items) of C from the incidence without single-item users
    (:func:`algorithms.incidence_kernels.shared_incidence`): each item's users' items counted
    into a dense array, then read back in column order (a scan when they are many, else a
    sort of the touched columns), in global codes.

    Returns:
        (lengths, indices, counts): entries per row, then the rows' columns and counts.
    """
    n_cols = len(item_indptr) - 1
    counts = np.zeros(n_cols, dtype=np.int32)
    touched = np.empty(n_cols + 1, dtype=np.int64)  # +1: the branch-free writes below
    lengths = np.zeros(hi - lo, dtype=np.int64)
    # room for the rows' entries, at most min(n_cols - 1, their users' other items) each,
    # plus one slot: the branch-free read-back below stores one entry past a row's last before
    # it is dropped. Allocated once (pages past what is written are never mapped).
    bound = 0
    widest = 16
    for j in range(lo, hi):
        visits = 0
        for p in range(item_indptr[j], item_indptr[j + 1]):
            u = item_users[p]
            visits += user_indptr[u + 1] - user_indptr[u] - 1
        bound += min(n_cols - 1, visits)
        widest = max(widest, item_indptr[j + 1] - item_indptr[j])
    out_indices = np.empty(bound + 1, dtype=np.int32)
    out_counts = np.empty(bound + 1, dtype=np.int32)
    starts = np.empty(widest, dtype=np.int64)  # the bounds of one item's users' rows
    ends = np.empty(widest, dtype=np.int64)
    z = 0
    for j in range(lo, hi):
        n_users = item_indptr[j + 1] - item_indptr[j]
        for p in range(n_users):  # looked up first: the reads of several rows in flight
            u = item_users[item_indptr[j] + p]
            starts[p] = user_indptr[u]
            ends[p] = user_indptr[u + 1]
        m = 0
        for p in range(n_users):
            for x in range(starts[p], ends[p]):
                s = user_items[x]
                touched[m] = s  # branch-free: kept only at the first visit
                m += counts[s] == 0
                counts[s] += 1
        counts[j] = 0  # the diagonal is left out
        start = z
        if 8 * m > n_cols:
            for s in range(n_cols):
                c = counts[s]
                out_indices[z] = item_codes[s]  # branch-free: kept when c > 0
                out_counts[z] = c
                z += c > 0
                counts[s] = 0
        else:
            order = np.sort(touched[:m])
            for x in range(m):
                s = order[x]
                c = counts[s]
                out_indices[z] = item_codes[s]
                out_counts[z] = c
                z += c > 0  # j itself (count reset to 0) is skipped
                counts[s] = 0
        lengths[j - lo] = z - start
    return lengths, out_indices[:z], out_counts[:z]
