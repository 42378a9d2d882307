"""EASE (SPEC §5): Steck's closed-form item-item model, on a dense item × item matrix."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.scores import snap_scores
from sweval.algorithms.threads import unit_threads
from sweval.algorithms.train_data import TrainData
from sweval.data.errors import SwevalError

#: Rows of the item × item matrix mirrored at a time (keeps the mirror's temporaries small).
_MIRROR_ROWS = 1024


class EASEConfig(AlgorithmConfig):
    l2: float = Field(
        default=500.0,
        gt=0,
        description="λ, the L2 penalty added to the diagonal of RᵀR (Steck 2019 used 500 on "
        "MovieLens-20M)",
    )
    max_matrix_gb: float = Field(
        default=4.0,
        gt=0,
        description="memory budget in GiB for the dense item × item float64 matrix "
        "(n_items² · 8 bytes); a fold with more items is an error, not a swap storm",
    )


class EASE(Algorithm):
    """EASE^R (Steck 2019, "Embarrassingly Shallow Autoencoders for Sparse Data").

    With R the binary user × item matrix of D_{t_f} and λ = ``l2``::

        P = (RᵀR + λ I)⁻¹
        B = I − P · diagMat(1 / diag(P))      i.e. B_ij = −P_ij / P_jj (i ≠ j), B_jj = 0
        score(u, ·) = R[u, :] · B             i.e. score(u, i) = Σ_{j ∈ I_u} B_ji

    B is the closed-form minimiser of |R − R B|²_F + λ |B|²_F subject to diag(B) = 0.
    RᵀR + λI is symmetric positive definite (λ > 0), so P comes from its Cholesky
    factorisation (LAPACK ``potrf`` then ``potri``, in place: one dense n_items × n_items
    float64 matrix, besides the sparse RᵀR it is built from). BLAS/LAPACK use the unit's thread
    budget (:data:`~algorithms.threads.unit_threads`); scores are rounded like kNN's
    (:func:`~algorithms.scores.snap_scores`), so float noise, from the thread count or the
    summation order, cannot reorder items whose exact scores tie.

    Guard: that matrix takes n_items² · 8 bytes. When this exceeds ``max_matrix_gb`` GiB the
    fit raises :class:`~data.errors.SwevalError` naming the fold's item count and the budget,
    before allocating anything.
    """

    name: ClassVar[str] = "ease"
    Config: ClassVar[type[AlgorithmConfig]] = EASEConfig

    def _fit(self, train: TrainData) -> None:
        from scipy.linalg import lapack
        from threadpoolctl import threadpool_limits

        n = train.n_items
        check_item_budget(n, self.config.max_matrix_gb)
        self.matrix_ = train.matrix.astype(np.float64)
        gram = (self.matrix_.T @ self.matrix_).toarray()
        gram[np.diag_indices(n)] += self.config.l2
        with threadpool_limits(unit_threads.get(), "blas"):
            # gram is symmetric: its transpose is the Fortran-ordered array LAPACK works on in
            # place; the upper triangle (Fortran view) receives the factor, then the inverse.
            view = gram.T
            factor, info = lapack.dpotrf(view, lower=0, clean=0, overwrite_a=1)
            if info != 0:
                raise ValueError(f"ease: Cholesky factorisation failed (info={info})")
            inverse, info = lapack.dpotri(factor, lower=0, overwrite_c=1)
            if info != 0:
                raise ValueError(f"ease: inverting the Cholesky factor failed (info={info})")
        weights = _mirror_upper(inverse)  # P, symmetric
        diagonal = weights.diagonal().copy()
        weights /= -diagonal  # column j divided by −P_jj
        weights[np.diag_indices(n)] = 0.0
        self.weights_ = weights

    def _serve(self, history: TrainData) -> None:
        """B stays the fit's; a user's row comes from ``history``."""
        self.matrix_ = history.matrix.astype(np.float64)

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        scores = np.ascontiguousarray(self.matrix_[rows] @ self.weights_, dtype=np.float64)
        return snap_scores(scores)


def check_item_budget(n_items: int, max_matrix_gb: float) -> None:
    """Refuse a fold whose dense item × item float64 matrix exceeds ``max_matrix_gb`` GiB.

    Raises:
        SwevalError: naming the item count, the size it needs and the budget.
    """
    needed = n_items * n_items * 8
    if needed > max_matrix_gb * 2**30:
        largest = int(np.sqrt(max_matrix_gb * 2**30 / 8))
        raise SwevalError(
            f"ease: this fold's training data has {n_items:,} items; EASE's dense item × item "
            f"matrix would take {needed / 2**30:.1f} GiB, over the budget "
            f"ease.max_matrix_gb={max_matrix_gb:g} (at most {largest:,} items). Raise it with "
            "--set ease.max_matrix_gb=... if the machine has the memory, or train on fewer "
            "items (--train-window)."
        )


def _mirror_upper(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    """Copy the upper triangle onto the lower one, in place, a block of rows at a time."""
    n = matrix.shape[0]
    for lo in range(0, n, _MIRROR_ROWS):
        hi = min(n, lo + _MIRROR_ROWS)
        matrix[lo:hi, :lo] = matrix[:lo, lo:hi].T
        block = matrix[lo:hi, lo:hi]
        block[...] = np.triu(block) + np.triu(block, 1).T
    return matrix
