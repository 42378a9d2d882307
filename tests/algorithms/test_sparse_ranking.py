"""The sparse ranking helpers of algorithms.base agree with the dense top_k and a reference."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.base import exclude_seen, top_k, top_k_sparse, top_n_mask

# Small value sets make ties the rule rather than the exception; 1e-300 and 1e300 probe the
# float32 rounding (they round to 0 and inf), 1 + 2^-40 ties with 1 in float32 but not in fact.
VALUES = st.sampled_from([0.0, 0.0, 0.0, 1.0, 2.0, 2.0, 3.5, 1e-300, 1e300, 1 + 2**-40])


def matrices(max_rows: int = 6, max_cols: int = 7):
    return st.integers(1, max_rows).flatmap(
        lambda r: st.integers(1, max_cols).flatmap(
            lambda c: st.lists(
                st.lists(VALUES, min_size=c, max_size=c), min_size=r, max_size=r
            )
        )
    )


def reference_top(dense: np.ndarray, n: int) -> np.ndarray:
    """Mask of each row's n largest non-zero cells, ties by column ascending."""
    mask = np.zeros(dense.shape, dtype=bool)
    for r, row in enumerate(dense):
        cells = sorted((c for c in range(len(row)) if row[c] != 0), key=lambda c: (-row[c], c))
        mask[r, cells[:n]] = True
    return mask


@settings(max_examples=150, deadline=None)
@given(data=matrices(), n=st.integers(1, 8), shuffle_seed=st.integers(0, 3))
def test_top_n_mask_matches_reference(data, n, shuffle_seed):
    dense = np.array(data)
    csr = sp.csr_matrix(dense)
    if shuffle_seed:  # columns need not be sorted within rows
        rng = np.random.default_rng(shuffle_seed)
        for r in range(csr.shape[0]):
            lo, hi = csr.indptr[r], csr.indptr[r + 1]
            perm = lo + rng.permutation(hi - lo)
            csr.indices[lo:hi], csr.data[lo:hi] = csr.indices[perm], csr.data[perm]
    mask = top_n_mask(csr.indptr, csr.indices, csr.data, n)
    rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    got = np.zeros(dense.shape, dtype=bool)
    got[rows[mask], csr.indices[mask]] = True
    np.testing.assert_array_equal(got, reference_top(dense, n))


@settings(max_examples=150, deadline=None)
@given(
    data=matrices(),
    seen_bits=st.lists(st.booleans(), min_size=42, max_size=42),
    k=st.integers(1, 9),
)
def test_top_k_sparse_equals_dense_top_k(data, seen_bits, k):
    scores = np.array(data)
    n, m = scores.shape
    seen = np.array(seen_bits[: n * m]).reshape(n, m)
    matrix = sp.csr_matrix(seen.astype(np.float32))
    rows = np.arange(n)
    dense = scores.copy()
    exclude_seen(dense, matrix, rows)
    expected = top_k(dense, k)
    np.testing.assert_array_equal(top_k_sparse(sp.csr_matrix(scores), matrix, rows, k), expected)


def test_top_k_sparse_on_a_subset_of_rows_with_stored_zeros():
    matrix = sp.csr_matrix(np.array([[1, 0, 0, 1, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 0]]))
    scores = sp.csr_matrix(
        (np.array([0.0, 2.0, 5.0, 2.0]), (np.array([0, 0, 1, 1]), np.array([1, 4, 0, 2]))),
        shape=(2, 5),
    )
    got = top_k_sparse(scores, matrix, np.array([2, 0]), 5)
    # Row 2 saw 0..3: only 4 is left (score 2). Row 0 saw 0, 3: 2 (score 2), 1, 4 (0, by id).
    assert got.tolist() == [[4, -1, -1, -1, -1], [2, 1, 4, -1, -1]]
