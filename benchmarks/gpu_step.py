"""Is one step of implicit's GPU kernels the CPU's arithmetic?  A probe for any factor count.

Run on demand on a machine with an NVIDIA GPU and ``implicit[gpu]``, from the repository root::

    python -m benchmarks.gpu_step            # GPU and CPU
    python -m benchmarks.gpu_step --devices cpu

The kernels run one thread block of f + 1 threads (BPR: the factors and the item bias) or f
(ALS) and reduce dot products warp by warp, so a block that is not a whole number of 32-thread
warps is the case to check. Two probes, for f from 8 to 128:

- **BPR, one step.** R = [[1, 0], [1, 1]] (user 0 consumed item 0, user 1 both): the only step
  that is not skipped is (u, i, j) = (0, 0, 1). A one-epoch fit (3 draws) at learning rate 1 and
  no regularisation that made exactly one step (2 skipped, read from implicit's callback) moved
  user 0 by z (q_0 − q_1), with z = 1 / (1 + exp(s)). So the kernel's score is
  s = ln(1/z − 1), z the median over the f components of Δp_u / (q_0 − q_1); it is compared with
  x_0 · (y_0 − y_1) in float64 from the initial factors (normal, σ = 0.1).
- **ALS, one iteration.** The same initial factors (uniform · 0.01) on a 300 × 200 matrix of
  density 0.05, one conjugate-gradient iteration on each device (CPU: one thread); the largest
  difference of the item factors, relative to their largest magnitude.

The CPU's BPR row checks the probe itself (its error is float32 rounding).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: this folder must not shadow the package
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import argparse  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

FACTORS = (8, 31, 32, 63, 64, 95, 96, 100, 127, 128)


def _bpr_model(device: str, factors: int, seed: int) -> tuple[Any, Any, Any]:
    """A one-epoch BPR at rate 1, no regularisation, and how to put and read its factors."""
    params = {"factors": factors, "learning_rate": 1.0, "regularization": 0.0, "iterations": 1,
              "random_state": seed}
    if device == "gpu":
        import implicit.gpu
        from implicit.gpu.bpr import BayesianPersonalizedRanking

        return (BayesianPersonalizedRanking(**params), implicit.gpu.Matrix,
                lambda m: m.to_numpy())
    from implicit.cpu.bpr import BayesianPersonalizedRanking

    return BayesianPersonalizedRanking(num_threads=1, **params), np.array, np.asarray


def _recorder(skipped: list[int]) -> Any:
    """implicit's per-epoch callback, keeping the number of skipped draws."""
    return lambda _epoch, _seconds, _correct, n_skipped: skipped.append(n_skipped)


def bpr_step_errors(device: str, factors: int, trials: int = 240) -> np.ndarray:
    """|kernel score − exact score| of every one-step fit among ``trials``."""
    matrix = sp.csr_matrix(np.array([[1, 0], [1, 1]], dtype=np.float32))
    rng = np.random.default_rng(factors)
    errors = []
    for trial in range(trials):
        x0 = rng.normal(0, 0.1, (2, factors + 1)).astype(np.float32)
        x0[:, factors] = 1  # the users' constant bias component
        y0 = rng.normal(0, 0.1, (2, factors + 1)).astype(np.float32)
        model, put, read = _bpr_model(device, factors, trial)
        model.user_factors, model.item_factors = put(x0.copy()), put(y0.copy())
        skipped: list[int] = []
        model.fit(matrix, show_progress=False, callback=_recorder(skipped))
        if skipped != [2]:
            continue
        moved = read(model.user_factors)[0, :factors].astype(np.float64) - x0[0, :factors]
        z = float(np.median(moved / (y0[0, :factors].astype(np.float64) - y0[1, :factors])))
        exact = float(x0[0].astype(np.float64) @ (y0[0].astype(np.float64) - y0[1]))
        errors.append(abs(np.log(1 / z - 1) - exact))
    return np.array(errors)


def als_iteration_difference(factors: int, seed: int = 0) -> float:
    """max |item factors GPU − CPU| / max |CPU item factors| after one iteration."""
    import implicit.gpu
    from implicit.cpu.als import AlternatingLeastSquares as CpuALS
    from implicit.gpu.als import AlternatingLeastSquares as GpuALS

    rng = np.random.default_rng(seed)
    matrix = sp.random(300, 200, density=0.05, format="csr", random_state=seed, dtype=np.float32)
    matrix.data[:] = 1
    x0 = rng.random((300, factors), dtype=np.float32) * 0.01
    y0 = rng.random((200, factors), dtype=np.float32) * 0.01
    cpu = CpuALS(factors=factors, iterations=1, num_threads=1, random_state=seed)
    cpu.user_factors, cpu.item_factors = x0.copy(), y0.copy()
    cpu.fit(matrix, show_progress=False)
    gpu = GpuALS(factors=factors, iterations=1, random_state=seed)
    gpu.user_factors, gpu.item_factors = implicit.gpu.Matrix(x0.copy()), implicit.gpu.Matrix(y0.copy())
    gpu.fit(matrix, show_progress=False)
    cpu_items = np.asarray(cpu.item_factors)
    return float(np.abs(gpu.item_factors.to_numpy() - cpu_items).max() / np.abs(cpu_items).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", default="gpu,cpu", help="comma-separated: gpu, cpu")
    devices = parser.parse_args().devices.split(",")
    print("model  device  factors  threads/block  whole warps  one-step fits  "
          "|score error| median      max")
    for device in devices:
        for factors in FACTORS:
            errors = bpr_step_errors(device, factors)
            print(f"bpr    {device:6s}  {factors:7d}  {factors + 1:13d}  "
                  f"{'yes' if (factors + 1) % 32 == 0 else 'no':>11s}  {len(errors):13d}  "
                  f"{np.median(errors):20.2e}  {errors.max():8.2e}", flush=True)
    if "gpu" in devices:
        print("\nmodel  factors  threads/block  whole warps  max |GPU − CPU| / max |CPU| "
              "(item factors, 1 iteration)")
        for factors in FACTORS:
            print(f"als    {factors:7d}  {factors:13d}  "
                  f"{'yes' if factors % 32 == 0 else 'no':>11s}  "
                  f"{als_iteration_difference(factors):.2e}", flush=True)


if __name__ == "__main__":
    main()
