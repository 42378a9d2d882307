"""ALS through implicit: known-answer behaviour, determinism, device resolution."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

import sweval.algorithms.implicit_device as device_module
from sweval.algorithms.als import ALS
from sweval.algorithms.implicit_device import cuda_available
from sweval.algorithms.registry import build_algorithm
from sweval.data.errors import SwevalError

HAS_CUDA = cuda_available()
DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)] if HAS_CUDA else ["cpu"]


@pytest.mark.parametrize("device", DEVICES)
def test_withheld_in_block_item_ranks_first(lib, device):
    dense = lib.block_matrix()
    train = lib.train_from_dense(dense)
    model = ALS(factors=8, iterations=10, device=device).fit(train)
    assert model.device == device
    rows = np.arange(train.n_users)
    first = model.recommend(rows, 1)[:, 0]
    np.testing.assert_array_equal(first, rows)
    # The withheld item beats every out-of-block item by a clear margin.
    scores = model.score(rows)
    in_block = dense | np.eye(len(dense), dtype=bool)
    assert (scores[rows, rows] > scores[~in_block].reshape(len(rows), -1).max(axis=1)).all()


@pytest.mark.parametrize("device", DEVICES)
def test_same_seed_same_factors(lib, device, rng):
    train = lib.train_from_dense(lib.random_binary(rng, 30, 20, 0.2))
    a = ALS(factors=6, iterations=5, seed=11, device=device).fit(train)
    b = ALS(factors=6, iterations=5, seed=11, device=device).fit(train)
    c = ALS(factors=6, iterations=5, seed=12, device=device).fit(train)
    np.testing.assert_array_equal(a.user_factors_, b.user_factors_)
    np.testing.assert_array_equal(a.item_factors_, b.item_factors_)
    assert not np.array_equal(a.item_factors_, c.item_factors_)


def test_fit_does_not_warn_about_blas_threads(lib, monkeypatch):
    import implicit.als
    import implicit.utils
    from threadpoolctl import threadpool_limits

    train = lib.train_from_dense(lib.block_matrix())
    with threadpool_limits(2, "blas"):
        # Control: implicit itself warns when BLAS runs several threads (once per process).
        monkeypatch.setattr(implicit.utils, "_checked_blas_config", False)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            implicit.als.AlternatingLeastSquares(factors=4, use_gpu=False)
        if not any("OpenBLAS" in str(w.message) or "MKL" in str(w.message) for w in caught):
            pytest.skip("this BLAS does not run several threads, nothing to check")
        monkeypatch.setattr(implicit.utils, "_checked_blas_config", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ALS(factors=4, iterations=2, device="cpu").fit(train)


@pytest.fixture
def implicit_arguments(monkeypatch):
    """The keyword arguments of the latest ``implicit.als.AlternatingLeastSquares(...)`` call."""
    import implicit.als

    seen = {}
    real = implicit.als.AlternatingLeastSquares

    def spy(**kwargs):
        seen.clear()
        seen.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(implicit.als, "AlternatingLeastSquares", spy)
    return seen


def test_hyper_parameters_reach_implicit(lib, implicit_arguments):
    seen = implicit_arguments
    params = {"factors": 5, "regularization": 0.5, "alpha": 3.0, "iterations": 2, "seed": 4}
    ALS(**params, device="cpu").fit(lib.train_from_dense(lib.block_matrix()))
    assert seen == {
        "factors": 5,
        "regularization": 0.5,
        "alpha": 3.0,
        "iterations": 2,
        "random_state": 4,
        "calculate_training_loss": False,
        "use_gpu": False,
        "num_threads": 0,  # every core: no fold tasks share this process
    }


def test_unit_threads_reach_implicit_and_leave_the_factors_unchanged(lib, implicit_arguments, rng):
    """Fold tasks sharing a process give each ALS fit a share of the cores (unit_threads).

    implicit solves each user's and item's factors whole in one OpenMP thread, so the factors
    must be bit-identical whatever the count: checked on a matrix large enough to be split.
    """
    from sweval.algorithms.threads import thread_budget, unit_threads

    train = lib.train_from_dense(lib.random_binary(rng, 600, 400, 0.05))
    every_core = ALS(factors=16, iterations=4, device="cpu").fit(train)

    with thread_budget(1):
        one_thread = ALS(factors=16, iterations=4, device="cpu").fit(train)
    assert unit_threads.get() is None
    assert implicit_arguments["num_threads"] == 1
    np.testing.assert_array_equal(one_thread.user_factors_, every_core.user_factors_)
    np.testing.assert_array_equal(one_thread.item_factors_, every_core.item_factors_)


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA")
def test_gpu_without_cuda_is_a_user_error():
    with pytest.raises(SwevalError, match="als.device=gpu needs CUDA"):
        build_algorithm("als", {"device": "gpu"})


@pytest.mark.skipif(HAS_CUDA, reason="this machine has CUDA")
def test_auto_falls_back_to_cpu_and_says_so_once(lib, monkeypatch, caplog):
    monkeypatch.setattr(device_module, "_fallback_announced", set())
    with caplog.at_level(logging.INFO, logger="sweval.algorithms.implicit_device"):
        first = build_algorithm("als", {"device": "auto", "factors": 4, "iterations": 2})
        second = build_algorithm("als", {"device": "auto"})
    assert first.device == second.device == "cpu"
    assert sum("training on the CPU" in r.message for r in caplog.records) == 1
    first.fit(lib.train_from_dense(lib.block_matrix()))
    assert first.device == "cpu"


@pytest.fixture
def gpu_off(monkeypatch):
    """implicit.gpu as it is where CUDA is off, whatever this machine has; returns the module."""
    import implicit.gpu

    monkeypatch.setattr(implicit.gpu, "HAS_CUDA", False)
    monkeypatch.delattr(implicit.gpu, "_cuda", raising=False)
    return implicit.gpu


def extension(monkeypatch, gpu, error: Exception) -> None:
    """Make ``implicit.gpu._cuda`` a module whose device count raises ``error``."""
    import types

    def get_device_count():
        raise error

    module = types.SimpleNamespace(get_device_count=get_device_count)
    monkeypatch.setattr(gpu, "_cuda", module, raising=False)


def test_the_gpu_error_says_rmm_is_missing(gpu_off, monkeypatch):
    monkeypatch.setattr(gpu_off, "HAS_RMM", False)
    with pytest.raises(SwevalError, match="rmm is not installed"):
        build_algorithm("als", {"device": "gpu"})


def test_the_gpu_error_names_an_rmm_release_implicit_was_not_built_against(gpu_off, monkeypatch):
    """What implicit 0.7.3 does with rmm-cu13 26.10 (seen on an H100): the symbol is missing."""
    monkeypatch.setattr(gpu_off, "HAS_RMM", True)
    extension(monkeypatch, gpu_off,
              ImportError("_cuda.so: undefined symbol: _ZTIN3rmm9bad_allocE"))
    with pytest.raises(SwevalError) as caught:
        build_algorithm("bpr", {"device": "gpu"})
    message = str(caught.value)
    assert "bpr.device=gpu needs CUDA" in message
    assert "undefined symbol: _ZTIN3rmm9bad_allocE" in message
    assert "pins the one it was" in message


def test_the_gpu_error_points_at_the_loader_path_and_auto_logs_why(gpu_off, monkeypatch, caplog):
    monkeypatch.setattr(gpu_off, "HAS_RMM", True)
    extension(monkeypatch, gpu_off, ImportError(
        "libcublas.so.13: cannot open shared object file: No such file or directory"))
    with pytest.raises(SwevalError, match="on LD_LIBRARY_PATH"):
        build_algorithm("als", {"device": "gpu"})
    monkeypatch.setattr(device_module, "_fallback_announced", set())
    with caplog.at_level(logging.INFO, logger="sweval.algorithms.implicit_device"):
        assert build_algorithm("als", {"device": "auto"}).device == "cpu"
    assert any("libcublas.so.13" in r.message for r in caplog.records)


def test_no_device_is_a_reason_too(gpu_off, monkeypatch):
    monkeypatch.setattr(gpu_off, "HAS_RMM", True)
    extension(monkeypatch, gpu_off, RuntimeError("no CUDA-capable device is detected"))
    assert device_module.cuda_unavailable_reason() == (
        "implicit's CUDA extension does not load: no CUDA-capable device is detected")
    assert not device_module.cuda_available()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs implicit with CUDA (implicit.gpu.HAS_CUDA)")
def test_auto_uses_the_gpu_when_available(lib):
    model = build_algorithm("als", {"device": "auto", "factors": 8, "iterations": 10})
    assert model.device == "gpu"
    model.fit(lib.train_from_dense(lib.block_matrix()))
    assert isinstance(model.user_factors_, np.ndarray)
    rows = np.arange(model.train_.n_users)
    np.testing.assert_array_equal(model.recommend(rows, 1)[:, 0], rows)


# ------------------------------------------------------------------ warm start (a deviation)
def test_carry_over_keeps_known_rows_and_draws_new_ones(rng):
    from sweval.algorithms.als import _carry_over

    old_codes = np.array([2, 5, 9])
    old = np.arange(6, dtype=np.float32).reshape(3, 2) + 1
    carried = _carry_over(old_codes, old, np.array([1, 5, 9, 12]), rng)
    np.testing.assert_array_equal(carried[1:3], old[1:3])
    for row in (carried[0], carried[3]):  # new codes: implicit's initial draw, in [0, 0.01)
        assert ((row >= 0) & (row < 0.01)).all()


def test_warm_start_continues_from_the_previous_factors(lib):
    """One warm sweep from converged factors stays at the optimum; one cold sweep does not."""
    train = lib.train_from_dense(lib.block_matrix())
    converged = ALS(factors=8, iterations=30, device="cpu").fit(train)
    rows = np.arange(train.n_users)
    target = converged.score(rows)

    warm = ALS(factors=8, iterations=30, warm_start=True, warm_iterations=1, device="cpu")
    warm.warm_ = converged.warm_state()
    warm.fit(train)
    cold = ALS(factors=8, iterations=1, device="cpu").fit(train)
    warm_gap = np.abs(warm.score(rows) - target).max()
    cold_gap = np.abs(cold.score(rows) - target).max()
    assert warm_gap < 0.01 < cold_gap


def test_warm_start_without_state_is_the_cold_fit(lib):
    train = lib.train_from_dense(lib.block_matrix())
    rows = np.arange(train.n_users)
    cold = ALS(factors=8, iterations=5, device="cpu").fit(train)
    first = ALS(factors=8, iterations=5, warm_start=True, device="cpu").fit(train)
    np.testing.assert_array_equal(first.score(rows), cold.score(rows))


def test_warm_start_on_the_gpu_is_refused_clearly(lib):
    model = ALS(factors=4, warm_start=True, device="cpu")
    model.resolved_device_ = "gpu"  # as on a CUDA machine; the check comes before any GPU call
    with pytest.raises(SwevalError, match="warm_start=true runs on the CPU only"):
        model.fit(lib.train_from_dense(lib.block_matrix()))
