"""Logistic Matrix Factorization (SPEC §5) through the ``implicit`` library, on the CPU."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.implicit_device import to_numpy
from sweval.algorithms.train_data import TrainData


class LMFConfig(AlgorithmConfig):
    factors: int = Field(default=30, ge=1, description="f: number of latent factors")
    learning_rate: float = Field(default=1.0, gt=0, description="Adagrad step size")
    regularization: float = Field(
        default=0.6, ge=0, description="L2 penalty λ on the user and item vectors"
    )
    iterations: int = Field(
        default=30, ge=1, description="epochs; an epoch updates every user, then every item"
    )
    neg_prop: int = Field(
        default=30,
        ge=0,
        description="negative samples per consumed pair of a row (implicit caps a row's "
        "count at f + 2)",
    )
    seed: int = Field(
        default=0, description="random_state: the initial vectors and the samplers' seeds"
    )
    threads: int = Field(
        default=1,
        ge=1,
        description="CPU threads; a seed gives the same lists for a given count, but another "
        "count draws other negatives",
    )


class LMF(Algorithm):
    """Logistic Matrix Factorization (Johnson 2014), by implicit 0.7.3's Adagrad; CPU only.

    User vectors x_u = (p_u, 1, c_u) and item vectors y_i = (q_i, b_i, 1) have f + 2
    components (the user bias c_u meets the item's constant 1, the item bias b_i the user's);
    they start standard normal, drawn with ``seed``. An epoch updates every user row with
    the item vectors fixed, then every item row with the user vectors fixed; for a user u
    with consumed items I_u (R is binary) the ascent direction is::

        g_u = Σ_{i ∈ I_u} (1 − σ(x_u · y_i)) y_i − Σ_{j ∈ N_u} σ(x_u · y_j) y_j − λ x_u

    where N_u holds min(f + 2, |I_u| · ``neg_prop``) negatives, each the item of a uniformly
    drawn non-zero of R (items in proportion to their popularity, a consumed one included;
    implicit 0.7.3 caps the count with the vector width f + 2), and the Adagrad step is
    G_u += g_u², x_u += η g_u / sqrt(10⁻⁶ + G_u) (element-wise; η = ``learning_rate``), the
    constant component reset to 1 afterwards. Items are updated alike over their users. Then::

        score(u, i) = x_u · y_i = p_u · q_i + b_i + c_u

    (c_u is the same for all of u's candidates: it does not change the list).

    Every hyper-parameter is passed to implicit explicitly. Rows are split statically among
    ``threads`` OpenMP threads, each with its own sampler seeded from ``seed`` and each row
    updated whole by one thread: a seed and a thread count give bit-identical vectors, but
    another count draws other negatives, so the count is a parameter (part of the unit key),
    never the machine's core count. implicit has no GPU LMF (``use_gpu=True`` raises), so
    there is no ``device`` parameter. BLAS is limited to one thread during the fit.
    """

    name: ClassVar[str] = "lmf"
    Config: ClassVar[type[AlgorithmConfig]] = LMFConfig

    def _fit(self, train: TrainData) -> None:
        import implicit.lmf
        from threadpoolctl import threadpool_limits

        cfg = self.config
        with threadpool_limits(1, "blas"):
            model = implicit.lmf.LogisticMatrixFactorization(
                factors=cfg.factors,
                learning_rate=cfg.learning_rate,
                regularization=cfg.regularization,
                dtype=np.float32,
                iterations=cfg.iterations,
                neg_prop=cfg.neg_prop,
                use_gpu=False,
                num_threads=cfg.threads,
                random_state=cfg.seed,
            )
            model.fit(train.matrix.astype(np.float32), show_progress=False)
        self.user_factors_ = to_numpy(model.user_factors)
        self.item_factors_ = to_numpy(model.item_factors).astype(np.float64)

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.user_factors_[rows].astype(np.float64) @ self.item_factors_.T
