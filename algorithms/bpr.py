"""Bayesian Personalized Ranking (SPEC §5) through the ``implicit`` library, on CPU or GPU."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms.base import Algorithm, AlgorithmConfig
from sweval.algorithms.implicit_device import Device, OnDevice, to_numpy
from sweval.algorithms.train_data import TrainData


class BPRConfig(AlgorithmConfig):
    factors: int = Field(default=100, ge=1, description="f: number of latent factors")
    learning_rate: float = Field(default=0.01, gt=0, description="SGD step size")
    regularization: float = Field(
        default=0.01, ge=0, description="L2 penalty on the factors and item biases, per step"
    )
    iterations: int = Field(
        default=100, ge=1, description="epochs; an epoch is nnz(R) sampled (u, i, j) steps"
    )
    verify_negative_samples: bool = Field(
        default=True,
        description="skip a step whose sampled negative j the user has consumed (R[u, j] = 1)",
    )
    seed: int = Field(
        default=0, description="random_state: the initial factors and the samplers' seeds"
    )
    threads: int = Field(
        default=1,
        ge=1,
        description="CPU threads of the SGD. 1: the same seed gives the same lists. More: "
        "threads update shared factors without locks (Hogwild), so two runs differ",
    )
    device: Device = Field(
        default="cpu",
        description="cpu; gpu: implicit's CUDA kernel, a measurably different model (docs/"
        "protocol.md §5.5; error without CUDA); auto: GPU when implicit reports CUDA, else CPU",
    )


class BPR(OnDevice, Algorithm):
    """Bayesian Personalized Ranking (Rendle et al. 2009), by implicit 0.7.3's SGD.

    User vectors x_u = (p_u, 1) and item vectors y_i = (q_i, b_i) have f + 1 components (the
    last: a constant 1 for users, the item bias b_i for items); they start uniform in
    [−0.5, 0.5)/f, drawn with ``seed``. An epoch makes nnz(R) steps; a step draws a consumed
    pair (u, i) uniformly among R's non-zeros (so users in proportion to their history) and
    a negative j as the item of another uniformly drawn non-zero (items in proportion to
    their popularity), skips the step if ``verify_negative_samples`` and R[u, j] = 1, and
    with z = 1 / (1 + exp(x_u · (y_i − y_j))) moves, at rate η = ``learning_rate`` and
    λ = ``regularization``::

        p_u += η (z (q_i − q_j) − λ p_u)
        q_i += η (z p_u − λ q_i)          b_i += η (z − λ b_i)
        q_j += η (−z p_u − λ q_j)         b_j += η (−z − λ b_j)

    (ascent on ln σ(x_u · y_i − x_u · y_j) minus the L2 penalty). Then::

        score(u, i) = x_u · y_i = p_u · q_i + b_i

    Every hyper-parameter is passed to implicit explicitly. On the CPU the steps of an epoch
    are split among ``threads`` OpenMP threads, each with its own sampler seeded from
    ``seed``: with one thread a seed gives bit-identical factors; with more, the threads
    write the shared factors without locks and runs differ (measured on a 2,000 × 500
    matrix: factors up to 0.02 apart between two 4-thread runs), and the thread count itself
    changes the samples — so it is a parameter, part of the unit key, never the machine's core
    count. BLAS is limited to one thread during the fit, as implicit asks.

    ``device=gpu`` (or ``auto`` on a machine with CUDA) runs implicit's CUDA kernel: each step's
    arithmetic is the update above (``benchmarks/gpu_step.py``: 8 to 128 factors), but an
    epoch's steps are drawn by cuRAND and run thousands at a time, unlocked, and its Recall@10
    moved away from the CPU seeds' in both directions (+3 % with 100 factors, −10 % with 95,
    on the generated log; ``benchmarks/RESULTS.md``). So the default is the CPU, on any
    machine, and the GPU is asked for by name. The device is resolved at construction like
    ALS's.
    """

    name: ClassVar[str] = "bpr"
    Config: ClassVar[type[AlgorithmConfig]] = BPRConfig

    def _fit(self, train: TrainData) -> None:
        import implicit.bpr
        from threadpoolctl import threadpool_limits

        cfg = self.config
        on_gpu = self.resolved_device_ == "gpu"
        with threadpool_limits(1, "blas"):
            model = implicit.bpr.BayesianPersonalizedRanking(
                factors=cfg.factors,
                learning_rate=cfg.learning_rate,
                regularization=cfg.regularization,
                dtype=np.float32,
                iterations=cfg.iterations,
                use_gpu=on_gpu,
                num_threads=cfg.threads,
                verify_negative_samples=cfg.verify_negative_samples,
                random_state=cfg.seed,
            )
            model.fit(train.matrix.astype(np.float32), show_progress=False)
        self.user_factors_ = to_numpy(model.user_factors)
        self.item_factors_ = to_numpy(model.item_factors).astype(np.float64)

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.user_factors_[rows].astype(np.float64) @ self.item_factors_.T
