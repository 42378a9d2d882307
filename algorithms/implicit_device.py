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
    return cuda_unavailable_reason() is None


def cuda_unavailable_reason() -> str | None:
    """Why implicit cannot train on a GPU here, in words, or None when it can.

    implicit's ``gpu`` package turns CUDA off at import with a warning and keeps no reason; the
    reason is found again here: rmm missing, or the extension's own import error (a CUDA library
    the loader cannot find, an rmm release the extension was not built against), or the device
    count failing (no driver, no GPU).
    """
    with warnings.catch_warnings():
        # implicit.gpu warns when the extension exists but cannot run: the reason is ours to give.
        warnings.simplefilter("ignore")
        import implicit.gpu

    if implicit.gpu.HAS_CUDA:
        return None
    if not implicit.gpu.HAS_RMM:
        return "rmm is not installed (implicit needs rmm-cu13 for the GPU)"
    try:
        from implicit.gpu import _cuda  # type: ignore[attr-defined]

        _cuda.get_device_count()
    except (ImportError, RuntimeError) as exc:
        reason = f"implicit's CUDA extension does not load: {exc}"
        if "undefined symbol" in str(exc) and "rmm" in str(exc):
            reason += (" (an rmm-cu13 release implicit was not built against: 'sweval[gpu]' pins "
                       "the one it was)")
        elif "cannot open shared object" in str(exc):
            reason += (" (put the CUDA 13 runtime's lib directory, e.g. "
                       "/usr/local/cuda/lib64, on LD_LIBRARY_PATH)")
        return reason
    return "implicit.gpu.HAS_CUDA is False"


def resolve_device(device: Device, algorithm: str) -> Literal["cpu", "gpu"]:
    """Turn ``auto | cpu | gpu`` into the device that will run ``algorithm``.

    Raises:
        SwevalError: ``gpu`` was asked for but implicit has no CUDA support here.
    """
    if device == "cpu":
        return "cpu"
    reason = cuda_unavailable_reason()
    if reason is None:
        return "gpu"
    if device == "gpu":
        raise SwevalError(
            f"--set {algorithm}.device=gpu needs CUDA and implicit[gpu] (pip install "
            f"'sweval[gpu]'), and implicit cannot use a GPU here: {reason}. Use "
            f"{algorithm}.device=auto or {algorithm}.device=cpu."
        )
    if algorithm not in _fallback_announced:
        _log.info("%s: device=auto found no usable GPU (%s); training on the CPU", algorithm,
                  reason)
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
