"""Implicit-feedback ALS (SPEC §5) through the ``implicit`` library, on CPU or GPU."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from sweval.algorithms.base import Algorithm, AlgorithmConfig, WarmState
from sweval.algorithms.implicit_device import Device, OnDevice, to_numpy
from sweval.algorithms.serving import Delta, columns_of
from sweval.algorithms.threads import unit_threads
from sweval.algorithms.train_data import TrainData
from sweval.data.errors import SwevalError


class ALSConfig(AlgorithmConfig):
    factors: int = Field(default=64, ge=1, description="number of latent factors")
    regularization: float = Field(
        default=0.01, ge=0, description="L2 penalty λ on user and item factors"
    )
    alpha: float = Field(
        default=1.0,
        gt=0,
        description="confidence of a consumed pair, c = alpha·R[u, i] (unobserved pairs: 1); "
        "1.0 weighs observed and unobserved pairs alike",
    )
    iterations: int = Field(default=15, ge=1, description="ALS sweeps (users, then items)")
    seed: int = Field(default=0, description="random_state of the factor initialisation")
    device: Device = Field(
        default="auto",
        description="auto: GPU when implicit reports CUDA, else CPU; cpu; gpu (error without "
        "CUDA)",
    )
    warm_start: bool = Field(
        default=False,
        description="DEVIATION from the protocol, for speed: start each fold from the previous "
        "fitted fold's factors (new users and items: random) and run warm_iterations sweeps "
        "instead of iterations; Recall changes (benchmarks/RESULTS.md); CPU only",
    )
    warm_iterations: int = Field(
        default=3,
        ge=1,
        description="ALS sweeps of a warm-started fold (the first fold: iterations)",
    )


class ALS(OnDevice, Algorithm):
    """Implicit-feedback matrix factorisation (Hu, Koren & Volinsky 2008) via ``implicit``.

    implicit 0.7.3 minimises, over user factors x_u and item factors y_i::

        Σ_{u,i} c_ui (p_ui − x_u·y_i)² + λ (Σ_u |x_u|² + Σ_i |y_i|²)

    with p_ui = R[u, i] ∈ {0, 1}, c_ui = alpha · R[u, i] for consumed pairs and 1 otherwise
    (implicit multiplies the input by ``alpha``; it does not add 1 as in the paper's
    1 + α·r), solved by ``iterations`` alternating conjugate-gradient sweeps. Then::

        score(u, i) = x_u · y_i

    Every hyper-parameter is passed to implicit explicitly (its CPU and GPU classes have
    different defaults), training loss and progress bars are off, and CPU fits run under
    ``threadpool_limits(1, "blas")`` as implicit asks, with :data:`~algorithms.threads.unit_threads`
    OpenMP threads (all cores unless fold tasks share the process); every row's solve is done
    whole by one thread, so the factors do not depend on it. The device is resolved once, at
    construction (:func:`~algorithms.implicit_device.resolve_device`); :attr:`device` reports
    the one that ran.

    ``warm_start`` (off by default) is a labelled deviation for speed: fold f starts from
    the factors of the previous fitted fold (rows matched by global user/item code, new ones
    drawn as implicit draws them) and runs ``warm_iterations`` sweeps. The engine keeps the
    state with the fold's unit (:mod:`evaluators.units.store`), so folds then run in order.
    """

    name: ClassVar[str] = "als"
    Config: ClassVar[type[AlgorithmConfig]] = ALSConfig

    def _fit(self, train: TrainData) -> None:
        import implicit.als
        from threadpoolctl import threadpool_limits

        cfg = self.config
        warm = self.warm_ if cfg.warm_start else None
        if cfg.warm_start and self.resolved_device_ == "gpu":
            raise SwevalError(
                "--set als.warm_start=true runs on the CPU only: add --set als.device=cpu."
            )
        on_gpu = self.resolved_device_ == "gpu"
        # implicit's GPU class takes no thread count; on the CPU, 0 means every core.
        threads = {} if on_gpu else {"num_threads": unit_threads.get() or 0}
        with threadpool_limits(1, "blas"):
            model = implicit.als.AlternatingLeastSquares(
                factors=cfg.factors,
                regularization=cfg.regularization,
                alpha=cfg.alpha,
                iterations=cfg.iterations if warm is None else cfg.warm_iterations,
                calculate_training_loss=False,
                random_state=cfg.seed,
                use_gpu=on_gpu,
                **threads,
            )
            if warm is not None:
                rng = np.random.default_rng(cfg.seed)
                model.user_factors = _carry_over(
                    warm["user_codes"], warm["user_factors"], train.user_codes, rng
                )
                model.item_factors = _carry_over(
                    warm["item_codes"], warm["item_factors"], train.item_codes, rng
                )
            model.fit(train.matrix.astype(np.float32), show_progress=False)
        # implicit keeps float32 factors; scores are float64. Only the scored users' rows are
        # converted (in score): converting every user's row took 0.17 s a fold at scale 1
        # (96 MB of fresh float64), 3.6 % of the fit, for the ~1 % of users that are scored.
        self.user_factors_ = to_numpy(model.user_factors)
        self.item_factors_ = to_numpy(model.item_factors).astype(np.float64)

    def _serve(self, history: TrainData) -> None:
        """The item factors stay the fit's; every user of ``history`` gets the factors that
        minimise the loss above for their row given them (implicit's ``recalculate_user``,
        the ALS user step, on the CPU): the fold-in a live system applies to a user between
        two fits."""
        self.user_factors_ = self._implicit_cpu().recalculate_user(
            np.arange(history.n_users), history.matrix.astype(np.float32))

    def _update(self, delta: Delta, previous: TrainData) -> None:
        """implicit's own partial fit, on the CPU: the factors moved to the new rows and
        columns (new users and items start at 0), then the delta's users recomputed from their
        rows of the new R (``partial_fit_users``), the delta's items from their columns
        (``partial_fit_items``) and the delta's users once more. Not a refit: the other factors
        keep the fit's values (tests/algorithms/test_updates.py measures the difference)."""
        train = self.train_
        assert train is not None
        model = self._implicit_cpu()
        factors = self.item_factors_.shape[1]
        users = np.zeros((train.n_users, factors), dtype=np.float32)
        users[np.searchsorted(train.user_codes, previous.user_codes)] = self.user_factors_
        items = np.zeros((train.n_items, factors), dtype=np.float32)
        items[columns_of(previous.item_codes, train.item_codes)] = self.item_factors_
        model.user_factors, model.item_factors = users, items
        rows = np.unique(np.searchsorted(train.user_codes, delta.users))
        columns = np.unique(columns_of(delta.items, train.item_codes))
        matrix = train.matrix.astype(np.float32)
        if len(rows):
            model.partial_fit_users(rows, matrix[rows])
        if len(columns):
            model.partial_fit_items(columns, matrix.T.tocsr()[columns])
        if len(rows):
            model.partial_fit_users(rows, matrix[rows])
        self.user_factors_ = np.asarray(model.user_factors)
        self.item_factors_ = np.asarray(model.item_factors, dtype=np.float64)

    def _implicit_cpu(self) -> Any:
        """implicit's CPU model of this configuration holding the fitted item factors."""
        import implicit.cpu.als

        cfg = self.config
        model = implicit.cpu.als.AlternatingLeastSquares(
            factors=cfg.factors, regularization=cfg.regularization, alpha=cfg.alpha,
            iterations=cfg.iterations, calculate_training_loss=False, random_state=cfg.seed,
            num_threads=unit_threads.get() or 0,
        )
        model.item_factors = np.ascontiguousarray(self.item_factors_, dtype=np.float32)
        return model

    def warm_state(self) -> WarmState:
        if self.train_ is None:
            raise RuntimeError("als: call fit() before warm_state()")
        return {
            "user_codes": self.train_.user_codes,
            "item_codes": self.train_.item_codes,
            "user_factors": self.user_factors_,
            "item_factors": self.item_factors_.astype(np.float32),
        }

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        return self.user_factors_[rows].astype(np.float64) @ self.item_factors_.T


def _carry_over(
    old_codes: NDArray[np.int64],
    old_factors: NDArray[np.float32],
    codes: NDArray[np.int64],
    rng: np.random.Generator,
) -> NDArray[np.float32]:
    """Factors for ``codes``: the old row where the code had one, else implicit's CPU initial
    draw (uniform on [0, 0.01))."""
    factors = rng.random((len(codes), old_factors.shape[1]), dtype=np.float32) * np.float32(0.01)
    where = np.searchsorted(old_codes, codes)
    known = where < len(old_codes)
    known[known] = old_codes[where[known]] == codes[known]
    factors[known] = old_factors[where[known]]
    return factors

