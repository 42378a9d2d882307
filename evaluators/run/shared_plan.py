"""The flow's plan, shipped once to the fold tasks of other processes next to the shared log.

A Dask worker used to plan the run again before its first fold task (cut the folds, build every
split's relevant sets and data fingerprints, key the units): about 3 s at scale 10, on every
worker, while the flow had made the same plan already. Instead the flow pickles its plan once
into the shared log's folder (:mod:`data.shared`)::

    <output>/shared-log/<fingerprint>/plan-<config hash>.pkl

with the log left out (a reference to it, pickle's persistent ids), and a worker loads it onto
the log it maps: the same folds, splits and units, without the work. A plan that cannot be
pickled (``--tune-sampler tpe``'s draws hold a closure) is not written; its workers plan
themselves, as does a worker whose folder has no plan for its configuration.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import pickle
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweval.data.log import InteractionLog

if TYPE_CHECKING:
    from sweval.evaluators.run.plan import Plan

_log = logging.getLogger(__name__)

_LOG_ID = "log"


def plan_path(folder: str | Path, cache_key: str) -> Path:
    """Where the plan of ``cache_key`` (a run recipe's: configuration and data) lies in
    ``folder``."""
    digest = hashlib.sha256(cache_key.encode()).hexdigest()[:16]
    return Path(folder) / f"plan-{digest}.pkl"


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, log: InteractionLog) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.log = log

    def persistent_id(self, obj: Any) -> str | None:
        return _LOG_ID if obj is self.log else None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BufferedReader, log: InteractionLog) -> None:
        super().__init__(file)
        self.log = log

    def persistent_load(self, pid: Any) -> InteractionLog:
        if pid != _LOG_ID:
            raise pickle.UnpicklingError(f"unknown reference {pid!r}")
        return self.log


def write_plan(plan: Plan, path: Path) -> bool:
    """Pickle ``plan`` without its log to ``path`` (atomically); False when it cannot be
    pickled (nothing written)."""
    buffer = io.BytesIO()
    try:
        # a fresh Plan: its cached unit index is keyed by object ids, which do not survive
        _Pickler(buffer, plan.log).dump(replace(plan))
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        _log.debug("the plan is not shared with the workers: %s", exc)
        return False
    scratch = path.with_name(f".{path.name}-{uuid.uuid4().hex}")
    scratch.write_bytes(buffer.getvalue())
    os.replace(scratch, path)
    return True


def read_plan(path: Path, log: InteractionLog) -> Plan | None:
    """The plan at ``path`` on ``log`` (the log it was made on, mapped), or None without one."""
    try:
        with open(path, "rb") as source:
            return _Unpickler(source, log).load()  # type: ignore[no-any-return]
    except FileNotFoundError:
        return None
