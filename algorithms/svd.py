"""PureSVD (SPEC §5): a truncated SVD of the binary user×item matrix R."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import Field

from algorithms.base import Algorithm, AlgorithmConfig, TrainData, snap_scores

#: Matrices with at most this many cells are decomposed with the dense LAPACK SVD (Lanczos is
#: faster beyond, for the usual f ≪ min(n_users, n_items)).
DENSE_SVD_CELLS = 250_000


class SVDConfig(AlgorithmConfig):
    factors: int = Field(
        default=50,
        ge=1,
        description="f: number of leading singular vectors kept (at most min(n_users, n_items))",
    )
    seed: int = Field(
        default=0, description="seed of the Lanczos start vector (the SVD itself is exact)"
    )


class PureSVD(Algorithm):
    """PureSVD (Cremonesi et al. 2010) on the binary R of D_{t_f}.

    With R ≈ U_f Σ_f V_fᵀ the rank-f truncated SVD (V_f: n_items × f, orthonormal columns)::

        score(u, ·) = R[u, :] · V_f · V_fᵀ

    i.e. the user's history projected onto the span of the f leading right singular vectors.
    Scores do not depend on the signs of the vectors, nor on a rotation within tied singular
    values; they are rounded like kNN scores (:func:`algorithms.base.snap_scores`) so that
    floating-point noise cannot reorder items whose exact scores tie.

    The decomposition is exact, not randomized: V_f holds the f leading eigenvectors of the
    Gram matrix RᵀR, found by ARPACK's Lanczos method (``scipy.sparse.linalg.eigsh``) on the
    operator v ↦ Rᵀ(R v), started from a vector drawn with ``seed`` (so a seed gives the same
    floats; other seeds agree to ~1e-10). Small matrices (≤ :data:`DENSE_SVD_CELLS` cells)
    use the dense LAPACK SVD. Both run with one BLAS thread. ``f`` is clamped to
    ``min(n_users, n_items)``, the rank bound of R; at full rank the projection keeps every
    history as it is, so every unseen item scores 0 and the list falls back to item id order.
    """

    name: ClassVar[str] = "svd"
    Config: ClassVar[type[AlgorithmConfig]] = SVDConfig

    def _fit(self, train: TrainData) -> None:
        self.matrix_ = train.matrix.astype(np.float64)
        cfg = self.config
        self.components_ = leading_right_vectors(self.matrix_, cfg.factors, cfg.seed)

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        latent = self.matrix_[rows] @ self.components_  # (len(rows), f)
        scores = np.ascontiguousarray(latent @ self.components_.T, dtype=np.float64)
        return snap_scores(scores)


def leading_right_vectors(
    matrix: sp.csr_matrix, factors: int, seed: int
) -> NDArray[np.float64]:
    """The f' = min(f, n_rows, n_cols) leading right singular vectors, as columns (n_cols × f').

    Args:
        matrix: the sparse float64 n_rows × n_cols matrix.
        factors: the requested f.
        seed: seed of the Lanczos start vector.
    """
    from threadpoolctl import threadpool_limits

    n_rows, n_cols = matrix.shape
    rank_bound = min(n_rows, n_cols)
    kept = min(factors, rank_bound)
    if kept == 0:
        return np.zeros((n_cols, 0))
    from scipy.sparse.linalg import LinearOperator, eigsh

    # The dense steps here are small: extra BLAS threads only add contention (on a busy
    # machine, spinning OpenBLAS threads made a 0.1 s decomposition take seconds).
    with threadpool_limits(1, "blas"):
        # ARPACK needs k < n - 1 for the n-dimensional operator (here n = n_cols).
        if n_rows * n_cols <= DENSE_SVD_CELLS or kept >= n_cols - 1:
            _, _, vt = np.linalg.svd(matrix.toarray(), full_matrices=False)
            return np.ascontiguousarray(vt[:kept].T)
        transposed = matrix.T.tocsr()
        gram = LinearOperator(
            (n_cols, n_cols), matvec=lambda v: transposed @ (matrix @ v), dtype=np.float64
        )
        start = np.random.default_rng(seed).uniform(-1.0, 1.0, n_cols)
        _, vectors = eigsh(gram, k=kept, which="LA", v0=start)
    return np.ascontiguousarray(vectors[:, ::-1])
