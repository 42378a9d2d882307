"""The public algorithm API of SW-EVAL (docs/plugins.md).

A model is a subclass of :class:`Algorithm` with a :class:`AlgorithmConfig` of its
hyper-parameters; for each fold it is fitted on a :class:`TrainData` (everything in it is
strictly before the fold's cut-off t_f) and returns scores; the engine ranks them (SPEC §3).
Register it with an entry point in the group ``sweval.algorithms`` or name it by its import
path (``--algorithms pop,my_pkg.models:MyModel``).
"""

from sweval.algorithms.base import Algorithm, AlgorithmConfig, WarmState
from sweval.algorithms.threads import unit_threads, usable_cpus
from sweval.algorithms.train_data import TrainData

#: The entry-point group plugins declare their algorithms in.
ENTRY_POINT_GROUP = "sweval.algorithms"

__all__ = [
    "ENTRY_POINT_GROUP", "Algorithm", "AlgorithmConfig", "TrainData", "WarmState",
    "unit_threads", "usable_cpus",
]
