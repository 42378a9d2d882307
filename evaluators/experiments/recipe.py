"""What leakage and gap share as recipes: an experiment's units made again from its options and
its data, here or on a Dask worker (:class:`~evaluators.run.work.Recipe`).

A subclass holds its own ``design`` and says which protocol plans the design needs on a log
(:meth:`DesignRecipe.plans_of`); the key, the store and the work are the same for both.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.protocol_runs import ProtocolPlan, protocol_work
from sweval.evaluators.run.sources import load_data, unit_store
from sweval.evaluators.run.work import Work
from sweval.evaluators.units.store import UnitStore


@dataclass(frozen=True)
class DesignRecipe:
    """An experiment's units, planned from ``config``, a design and the data.

    Attributes:
        config: the command's options.
        output: the output directory.
        fingerprint: the fingerprint of the log the command planned on; a worker whose log
            differs refuses to compute.
        log: the log itself when the caller gave one (a DataFrame of the Python API): a worker
            cannot load it from ``config``, so it travels with the recipe.
    """

    config: EvalConfig
    design: Any
    output: str
    fingerprint: str = ""
    log: InteractionLog | None = field(default=None, compare=False, repr=False)

    def plans_of(self, log: InteractionLog) -> Iterable[ProtocolPlan]:
        """The protocol plans of the design on ``log``."""
        raise NotImplementedError

    def cache_key(self) -> str:
        text = json.dumps([self.config.model_dump_json(), repr(self.design), self.fingerprint])
        return hashlib.sha256(text.encode()).hexdigest()

    def store(self) -> UnitStore:
        return unit_store(self.config)

    def work(self) -> Work:
        log = self.log if self.log is not None else load_data(self.config)
        if log.fingerprint() != self.fingerprint:
            raise SwevalError(f"{self.config.data}: the data changed while the experiment ran; "
                              "rerun to start over.")
        return protocol_work(list(self.plans_of(log)), list(self.config.k))
