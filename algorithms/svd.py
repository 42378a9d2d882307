"""PureSVD (SPEC §5): a truncated SVD of the binary user×item matrix R."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.scores import snap_scores
from sweval.algorithms.train_data import TrainData

#: Matrices with at most this many cells are decomposed with the dense LAPACK SVD (Lanczos is
#: faster beyond, for the usual f ≪ min(n_users, n_items)).
DENSE_SVD_CELLS = 250_000

#: A Gram matrix of at most this side is eigendecomposed densely (LAPACK ``eigh``, about 0.1 s
#: at 1,000): for few users and many items (MovieLens: 610 × 9,724) that beats Lanczos.
DENSE_GRAM_SIDE = 1_000


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
    values; they are rounded like kNN scores (:func:`algorithms.scores.snap_scores`) so that
    floating-point noise cannot reorder items whose exact scores tie.

    The decomposition is exact, not randomized: V_f comes from the f leading eigenpairs of the
    Gram matrix on R's smaller side, RᵀR or R Rᵀ (:func:`leading_right_vectors`), found by
    ARPACK's Lanczos method (``scipy.sparse.linalg.eigsh``) on the operator v ↦ Rᵀ(R v) (or
    R(Rᵀ v)), started from a vector drawn with ``seed`` (so a seed gives the same floats;
    other seeds agree to ~1e-10), or densely by LAPACK when that side is small. Small matrices
    (≤ :data:`DENSE_SVD_CELLS` cells) use the dense LAPACK SVD. Both run with one BLAS thread.
    ``f`` is clamped to ``min(n_users, n_items)``, the rank bound of R; at full rank the
    projection keeps every history as it is, so every unseen item scores 0 and the list falls
    back to item id order.
    """

    name: ClassVar[str] = "svd"
    Config: ClassVar[type[AlgorithmConfig]] = SVDConfig

    def _fit(self, train: TrainData) -> None:
        self.matrix_ = train.matrix.astype(np.float64)
        cfg = self.config
        self.components_ = leading_right_vectors(self.matrix_, cfg.factors, cfg.seed)

    def _serve(self, history: TrainData) -> None:
        """V stays the fit's; a user's row R[u, :] comes from ``history``."""
        self.matrix_ = history.matrix.astype(np.float64)

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        latent = self.matrix_[rows] @ self.components_  # (len(rows), f)
        scores = np.ascontiguousarray(latent @ self.components_.T, dtype=np.float64)
        return snap_scores(scores)


def leading_right_vectors(
    matrix: sp.csr_matrix, factors: int, seed: int
) -> NDArray[np.float64]:
    """The f' = min(f, n_rows, n_cols) leading right singular vectors, as columns (n_cols × f').

    The eigenproblem is solved on the smaller side of R. Tall R (users ≥ items): the leading
    eigenvectors of RᵀR are V_f. Wide R (fewer users than items, e.g. MovieLens): the leading
    eigenpairs (λ_i, u_i) of the small R Rᵀ give v_i = Rᵀ u_i / sqrt(λ_i), the same right
    singular vectors; directions with λ_i ≈ 0 are dropped, which leaves every score unchanged
    (R v = 0 for them, so they add nothing to R[u] V Vᵀ). A side of at most
    :data:`DENSE_GRAM_SIDE` is solved densely (LAPACK ``eigh``), a larger one with ARPACK.

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
    # The dense steps here are small: extra BLAS threads only add contention (on a busy
    # machine, spinning OpenBLAS threads made a 0.1 s decomposition take seconds).
    with threadpool_limits(1, "blas"):
        if n_rows * n_cols <= DENSE_SVD_CELLS:
            _, _, vt = np.linalg.svd(matrix.toarray(), full_matrices=False)
            return np.ascontiguousarray(vt[:kept].T)
        if n_rows >= n_cols:
            _, vectors = _leading_eigenpairs(matrix.T.tocsr(), matrix, kept, seed)
            return np.ascontiguousarray(vectors)
        transposed = matrix.T.tocsr()
        values, vectors = _leading_eigenpairs(matrix, transposed, kept, seed)
        positive = values > values[0] * n_rows * np.finfo(np.float64).eps
        right = transposed @ (vectors[:, positive] / np.sqrt(values[positive]))
    return np.ascontiguousarray(right)


def _leading_eigenpairs(
    left: sp.csr_matrix, right: sp.csr_matrix, kept: int, seed: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The ``kept`` largest eigenpairs of the Gram matrix ``left @ right`` (n × n), descending."""
    n = left.shape[0]
    if n <= DENSE_GRAM_SIDE or kept >= n - 1:  # ARPACK needs k < n - 1
        from scipy.linalg import eigh

        gram = (left @ right).toarray()
        values, vectors = eigh(gram, subset_by_index=[n - kept, n - 1], driver="evr")
        return values[::-1], vectors[:, ::-1]
    from scipy.sparse.linalg import LinearOperator, eigsh

    gram = LinearOperator((n, n), matvec=lambda v: left @ (right @ v), dtype=np.float64)
    start = np.random.default_rng(seed).uniform(-1.0, 1.0, n)
    values, vectors = eigsh(gram, k=kept, which="LA", v0=start)
    return values[::-1], vectors[:, ::-1]
