"""A unit's files: its lists as raw ids in Parquet, and writes that are whole or absent."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.units.engine import UnitLists


class DamagedUnit(SwevalError):
    """A stored unit whose files cannot be read, or whose lists are not the bytes its record
    was written with (changed in place since: a disk error, a file copied over it).

    Attributes:
        what: the unit's directory and what is wrong, without advice.
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}; delete that directory to recompute it.")
        self.what = what


@dataclass(frozen=True)
class UnitFiles:
    """A finished unit in raw ids, ready to be written to any store (what a fold task on
    another machine sends back: its log's codes may differ from the flow's)."""

    table: pa.Table
    depth: int
    device: str
    timings: dict[str, float]
    warm_state: dict[str, np.ndarray] | None = None

    @classmethod
    def of(cls, lists: UnitLists, log: InteractionLog) -> UnitFiles:
        return cls(
            table=lists_table(lists, log), depth=lists.depth, device=lists.device,
            timings=dict(lists.timings), warm_state=lists.warm_state,
        )


# ------------------------------------------------------------------------------ lists as ids
def id_array(ids: Any) -> pa.Array:
    """Raw ids as an Arrow array (text when their types are mixed)."""
    try:
        return pa.array(ids)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: compare as text
        return pa.array(np.asarray(ids).astype(str))


def lists_table(lists: UnitLists, log: InteractionLog) -> pa.Table:
    """The lists as a table: ``user`` (raw id) and ``items`` (raw ids, best first)."""
    valid = lists.items >= 0
    offsets = np.concatenate([[0], np.cumsum(valid.sum(axis=1))]).astype(np.int32)
    flat = lists.items[valid]
    items = pa.ListArray.from_arrays(
        pa.array(offsets), id_array(np.asarray(log.item_ids)[flat])
    )
    return pa.table({"user": id_array(np.asarray(log.user_ids)[lists.users]), "items": items})


def codes(ids: pa.Array, vocabulary: Any) -> np.ndarray:
    known = pd.Index(np.asarray(vocabulary))
    values = ids.to_numpy(zero_copy_only=False)
    if pa.types.is_string(ids.type) or pa.types.is_large_string(ids.type):
        if known.dtype != object:
            known = pd.Index(known.astype(str))
    return known.get_indexer(values)


def lists_from_table(
    table: pa.Table, log: InteractionLog, *, depth: int, where: Path
) -> tuple[np.ndarray, np.ndarray]:
    """(user codes, (n, depth) item codes padded with −1) of a stored lists table."""
    users = codes(table.column("user").combine_chunks(), log.user_ids)
    column = table.column("items").combine_chunks()
    offsets = column.offsets.to_numpy()
    flat = codes(column.values, log.item_ids)
    if (users < 0).any() or (flat < 0).any():
        raise DamagedUnit(f"{where}: the unit ranks ids this log does not have (its lists are "
                          "another unit's)")
    lengths = np.diff(offsets)
    items = np.full((len(users), depth), -1, dtype=np.int64)
    rows = np.repeat(np.arange(len(users)), lengths)
    columns = np.arange(len(flat)) - np.repeat(offsets[:-1], lengths)
    items[rows, columns] = flat
    return users.astype(np.int64), items


def whole_parquet(path: Path) -> bool:
    """A Parquet file that ends as one does (its footer's ``PAR1``): not missing, emptied or
    cut short. Units are written whole (:func:`atomic_write`); this catches later damage."""
    try:
        with open(path, "rb") as handle:
            handle.seek(-4, os.SEEK_END)
            return handle.read(4) == b"PAR1"
    except OSError:  # missing, or shorter than 4 bytes
        return False


# ------------------------------------------------------------------------------ atomic files
def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(stream)`` on a temporary file beside ``path``, then rename it into place.

    A crash or a full disk leaves either the old file, or the new one whole, never a truncated
    one; the temporary file is removed when the write fails.
    """
    handle_fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temporary = Path(name)  # unique per writer: threads of one process may save concurrently
    try:
        os.fchmod(handle_fd, 0o644)  # mkstemp's 0600 would make results unreadable to others
        with os.fdopen(handle_fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write` of ``text`` in UTF-8."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))
