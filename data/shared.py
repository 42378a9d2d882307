"""The loaded log, shipped once to the fold tasks of other processes as memory-mapped arrays.

The flow loads, validates and de-duplicates the log once. With ``--task-runner dask`` the fold
tasks run in worker processes, which would otherwise read and de-duplicate the file again, each
of them. Instead the flow writes the log's arrays once::

    <output>/shared-log/<fingerprint>/user.npy, item.npy, timestamp.npy[, policy.npy]
                                      ids.pkl   (raw ids, source, load counters, fingerprint)
                                      plan-*.pkl (the run's plan: evaluators.run.shared_plan)

and every worker maps them read-only (``np.load(mmap_mode="r")``): the operating system keeps
one copy of the pages for all workers on a machine, and a worker reads only what it touches.
The mapped log carries the fingerprint the flow computed (the folder is written whole, under
that name), so a worker does not hash the log again to check it
(:func:`flows.pipeline.plan_for`). The folder is removed when the run's fold tasks are done.
"""

from __future__ import annotations

import os
import pickle
import shutil
import uuid
from pathlib import Path

import numpy as np

from sweval.data.log import InteractionLog

_ARRAYS = ("user", "item", "timestamp", "policy")


def shared_root(output: str | Path) -> Path:
    """The folder that holds the shared logs of a run's output directory."""
    return Path(output) / "shared-log"


def write_shared(log: InteractionLog, root: Path) -> Path:
    """Write ``log`` under ``root/<fingerprint>`` (once: an existing copy is reused); its path.

    Written into a temporary folder and renamed, so a reader never sees half a log.
    """
    target = root / log.fingerprint()
    if target.exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    scratch = root / f".{target.name}-{uuid.uuid4().hex}"
    scratch.mkdir()
    try:
        for name in _ARRAYS:
            array = getattr(log, name)
            if array is not None:
                np.save(scratch / f"{name}.npy", np.ascontiguousarray(array))
        meta = {
            "user_ids": log.user_ids,
            "item_ids": log.item_ids,
            "policy_ids": log.policy_ids,
            "source": log.source,
            "dedup": log.dedup,
            "n_dropped_invalid": log.n_dropped_invalid,
            "n_duplicates": log.n_duplicates,
            "fingerprint": log.fingerprint(),
        }
        with open(scratch / "ids.pkl", "wb") as out:
            pickle.dump(meta, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.rename(scratch, target)
    except FileExistsError:  # another writer finished first: same content
        shutil.rmtree(scratch, ignore_errors=True)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target


def read_shared(path: str | Path) -> InteractionLog:
    """The log written by :func:`write_shared`, its arrays memory-mapped read-only, with the
    flow's fingerprint."""
    path = Path(path)
    with open(path / "ids.pkl", "rb") as source:
        meta = pickle.load(source)
    arrays = {
        name: np.load(path / f"{name}.npy", mmap_mode="r") if (path / f"{name}.npy").exists()
        else None
        for name in _ARRAYS
    }  # fmt: skip
    fingerprint = meta.pop("fingerprint")
    log = InteractionLog(**arrays, **meta)
    log._fingerprint.append(fingerprint)
    return log


def remove_shared(root: Path) -> None:
    """Remove every shared log of a run (after its fold tasks)."""
    shutil.rmtree(root, ignore_errors=True)
