"""The sparse ranking helpers of algorithms.ranking agree with the dense top_k and a reference."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import exclude_seen

from sweval.algorithms.ranking import top_k, top_k_of_product, top_k_unseen

# Small value sets make ties the rule rather than the exception; 1e-300 and 1e300 probe the
# float32 rounding (they round to 0 and inf), 1 + 2^-40 ties with 1 in float32 but not in fact.
VALUES = st.sampled_from([0.0, 0.0, 0.0, 1.0, 2.0, 2.0, 3.5, 1e-300, 1e300, 1 + 2**-40])


def top_k_sparse(scores: sp.csr_matrix, matrix: sp.csr_matrix, rows: np.ndarray, k: int):
    """Ranking of given sparse scores: the product path with H = identity, no snapping."""
    identity = sp.identity(scores.shape[0], format="csr", dtype=np.float64)
    return top_k_of_product(identity, scores, matrix, rows, k, snap=False)


#: Seen flags for up to 6 × 7 cells (row-major; a test takes the first n·m).
SEEN_BITS = st.lists(st.booleans(), min_size=42, max_size=42)


def seen_matrix(seen_bits: list[bool], n: int, m: int) -> sp.csr_matrix:
    """The training matrix R (n × m) of the first n·m seen flags."""
    return sp.csr_matrix(np.array(seen_bits[: n * m]).reshape(n, m).astype(np.float32))


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
@given(data=matrices(), k=st.integers(1, 8))
def test_top_k_matches_reference(data, k):
    dense = np.array(data)
    dense[dense == 0] = -np.inf  # -inf cells are never returned
    expected = np.full((dense.shape[0], k), -1)
    for r, row in enumerate(dense):
        cells = sorted((c for c in range(len(row)) if row[c] > -np.inf), key=lambda c: (-row[c], c))
        expected[r, : len(cells[:k])] = cells[:k]
    np.testing.assert_array_equal(top_k(dense, k), expected)


@settings(max_examples=100, deadline=None)
@given(
    data=matrices(),
    seen_bits=SEEN_BITS,
    k=st.integers(1, 9),
)
def test_top_k_unseen_equals_exclude_seen_then_top_k(data, seen_bits, k):
    scores = np.array(data)
    n, m = scores.shape
    matrix = seen_matrix(seen_bits, n, m)
    rows = np.arange(n)[::-1].copy()  # rows of R need not be in order
    expected_scores = scores.copy()
    exclude_seen(expected_scores, matrix, rows)
    expected = top_k(expected_scores, k)
    np.testing.assert_array_equal(top_k_unseen(scores.copy(), matrix, rows, k), expected)


@settings(max_examples=100, deadline=None)
@given(
    h_bits=st.lists(st.integers(0, 2), min_size=24, max_size=24),
    w_data=matrices(max_rows=4, max_cols=7).filter(lambda d: len(d) == 4),
    seen_bits=SEEN_BITS,
    k=st.integers(1, 9),
)
def test_top_k_of_product_equals_dense_product(h_bits, w_data, seen_bits, k):
    w = np.array(w_data)
    w[w > 1e200] = 5.0  # sums of huge values overflow; scores are sums of bounded terms
    m = w.shape[1]
    h = np.array(h_bits[:24]).reshape(6, 4).astype(float) / 2
    matrix = seen_matrix(seen_bits, 6, m)
    rows = np.arange(6)
    dense = np.round(h @ w, 10)
    exclude_seen(dense, matrix, rows)
    dense[dense == 0] = 0.0
    expected = top_k(dense, k)
    got = top_k_of_product(sp.csr_matrix(h), sp.csr_matrix(w), matrix, rows, k, snap=True)
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=150, deadline=None)
@given(
    data=matrices(),
    seen_bits=SEEN_BITS,
    k=st.integers(1, 9),
)
def test_top_k_sparse_equals_dense_top_k(data, seen_bits, k):
    scores = np.array(data)
    n, m = scores.shape
    matrix = seen_matrix(seen_bits, n, m)
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


def test_kernels_give_the_same_result_on_any_number_of_threads(monkeypatch, rng):
    """Row chunks run in parallel threads: the lists must not depend on how rows are split."""
    from sweval.algorithms.knn import top_cosines

    n_users, n_items = 700, 90
    matrix = sp.random(n_users, n_items, density=0.06, random_state=rng, format="csr")
    matrix.data[:] = 1.0
    rows = rng.permutation(n_users)[:500]
    sizes_u = np.maximum(np.diff(matrix.indptr), 1).astype(float)
    transposed = matrix.T.tocsr()
    dense = rng.integers(0, 4, size=(len(rows), n_items)).astype(float)

    def everything():
        neighbours = top_cosines(rows, matrix, transposed, sizes_u, sizes_u, 7)
        return (
            neighbours.toarray(),
            top_k_of_product(neighbours, matrix, matrix, rows, 12, snap=True),
            top_k_unseen(dense.copy(), matrix, rows, 12),
            top_k(dense, 12),
        )

    monkeypatch.setenv("SWEVAL_KERNEL_THREADS", "1")
    single = everything()
    monkeypatch.setenv("SWEVAL_KERNEL_THREADS", "3")
    for got, expected in zip(everything(), single, strict=True):
        np.testing.assert_array_equal(got, expected)
