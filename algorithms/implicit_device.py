"""Where the ``implicit`` models (ALS, BPR) run: CUDA detection, ``device`` resolution, and
their factors brought back to numpy.

Not part of unit keys: the device that runs is, through each model's ``key_params``.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from sweval.data.errors import SwevalError

_log = logging.getLogger(__name__)

Device = Literal["auto", "cpu", "gpu"]

#: The algorithms whose CPU fallback under ``device=auto`` was announced: once per process and
#: algorithm, not once per fold.
_fallback_announced: set[str] = set()


def cuda_available() -> bool:
    """Whether implicit can train on a GPU (its CUDA extension and RMM import and see a GPU)."""
    with warnings.catch_warnings():
        # implicit.gpu warns when the extension exists but no GPU/driver does: we report that.
        warnings.simplefilter("ignore")
        import implicit.gpu

    return bool(implicit.gpu.HAS_CUDA)


def resolve_device(device: Device, algorithm: str) -> Literal["cpu", "gpu"]:
    """Turn ``auto | cpu | gpu`` into the device that will run ``algorithm``.

    Raises:
        SwevalError: ``gpu`` was asked for but implicit has no CUDA support here.
    """
    if device == "cpu":
        return "cpu"
    if cuda_available():
        return "gpu"
    if device == "gpu":
        raise SwevalError(
            f"--set {algorithm}.device=gpu needs CUDA and implicit[gpu] (pip install "
            "'sweval[gpu]'): implicit.gpu.HAS_CUDA is False here (no GPU, no CUDA 13 runtime, "
            f"or rmm missing). Use {algorithm}.device=auto or {algorithm}.device=cpu."
        )
    if algorithm not in _fallback_announced:
        _log.info("%s: device=auto found no CUDA support in implicit; training on the CPU",
                  algorithm)
        _fallback_announced.add(algorithm)
    return "cpu"


def to_numpy(factors: Any) -> NDArray[np.float32]:
    """Factors as a float32 numpy array (GPU models hold ``implicit.gpu.Matrix`` objects)."""
    if hasattr(factors, "to_numpy"):
        factors = factors.to_numpy()
    return np.ascontiguousarray(factors, dtype=np.float32)


class OnDevice:
    """Mixin, before :class:`~sweval.algorithms.base.Algorithm`, for a model whose config has a
    ``device``: resolved once at construction (:func:`resolve_device`), reported as
    :attr:`device` and put into the unit key resolved (CPU and GPU factors differ; ``auto`` is
    either)."""

    def __init__(self, config: Any = None, **params: Any) -> None:
        super().__init__(config, **params)  # type: ignore[call-arg]
        config, name = self.config, self.name  # type: ignore[attr-defined]
        self.resolved_device_ = resolve_device(config.device, name)

    @property
    def device(self) -> str:
        return self.resolved_device_

    def key_params(self) -> dict[str, Any]:
        """The config with ``device`` resolved."""
        return super().key_params() | {"device": self.resolved_device_}  # type: ignore[misc]
