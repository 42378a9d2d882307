"""Tables already computed from the same inputs by the same code, kept in the unit store.

A run whose units are all stored computes the same statistics again from the same results:
the paired tests and their bootstrap intervals take seconds, the units' lookup milliseconds.
So the statistics tables are kept beside the units, under a key of everything they are
computed from::

    key   = SHA-256(what, each input, the code)   an input: a table's columns, dtypes and
                                                  row hashes (pandas' hash_pandas_object), or
                                                  the repr of settings; the code: every module
                                                  of the installed sweval (any edit: new keys)
    <store>/memo/<key[:2]>/<key>.parquet          the table; its modification time is its last
                                                  use (``sweval cache prune --older-than``)

A table is kept only when Parquet gives it back exactly (its values, dtypes, columns and
index compared after writing); one that does not is computed every time. An entry that
cannot be read is computed again and written over; a store this process may not write
computes every time. Entries are written whole or not at all (:func:`atomic_write`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.evaluators.units.files import atomic_write
from sweval.evaluators.units.ownership import MEMO_FOLDER, MEMO_NAME, SHARD, memo_files

_log = logging.getLogger(__name__)


@functools.cache
def code_digest() -> str:
    """A hash of every module of the installed ``sweval`` (its path in the package, and its
    bytes)."""
    import sweval

    package = Path(sweval.__file__).parent
    modules = []
    for folder, dirs, files in os.walk(package, followlinks=True):  # the packages are links
        dirs[:] = sorted(name for name in dirs if name != "__pycache__")  # in a checkout
        modules += [Path(folder, name) for name in files if name.endswith(".py")]
    digest = hashlib.sha256()
    for path in sorted(modules):
        digest.update(f"{path.relative_to(package)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def memo_key(what: str, *inputs: Any) -> str:
    """The key of ``what`` computed from ``inputs`` by this code (module docstring)."""
    digest = hashlib.sha256(f"{code_digest()}\0{what}\0".encode())
    for value in inputs:
        if isinstance(value, pd.DataFrame):
            digest.update(repr([(str(name), str(dtype)) for name, dtype in
                                value.dtypes.items()]).encode())
            digest.update(repr(value.index).encode() if not isinstance(
                value.index, pd.RangeIndex) else f"range:{len(value.index)}".encode())
            digest.update(pd.util.hash_pandas_object(value, index=True).to_numpy().tobytes())
        else:
            digest.update(repr(value).encode())
        digest.update(b"\0")
    return digest.hexdigest()


class Memo:
    """The tables kept in one unit store's ``memo`` folder (module docstring)."""

    def __init__(self, store: str | Path) -> None:
        self.directory = Path(store) / MEMO_FOLDER

    def unused_since(self, before: float) -> list[Path]:
        """The entries last used before ``before`` (epoch seconds), for ``cache prune``."""
        found = []
        for path in memo_files(self.directory.parent):
            with contextlib.suppress(OSError):
                if not path.name.endswith(".tmp") and path.lstat().st_mtime < before:
                    found.append(path)
        return found

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.parquet"

    def table(self, what: str, inputs: tuple[Any, ...],
              compute: Callable[[], pd.DataFrame | None]) -> pd.DataFrame | None:
        """``compute()``'s table, read from the store when the same ``inputs`` made it before
        (None is computed every time: nothing to keep)."""
        path = self.path(memo_key(what, *inputs))
        found = self._read(path)
        if found is not None:
            return found
        frame = compute()
        if frame is not None:
            self._keep(path, frame)
        return frame

    def _read(self, path: Path) -> pd.DataFrame | None:
        if path.is_symlink() or not path.is_file():
            return None
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:  # damaged: computed again and written over
            _log.debug("memo %s unreadable (%s): computing it again", path, exc)
            return None
        with contextlib.suppress(OSError, NotImplementedError):
            os.utime(path, follow_symlinks=False)
        return frame

    def _keep(self, path: Path, frame: pd.DataFrame) -> None:
        buffer = io.BytesIO()
        try:
            frame.to_parquet(buffer)
            back = pd.read_parquet(io.BytesIO(buffer.getvalue()))
        except Exception as exc:  # a column Parquet cannot hold
            _log.debug("memo %s not kept: %s", path.name, exc)
            return
        if not same_table(frame, back):
            _log.debug("memo %s not kept: Parquet does not give it back exactly", path.name)
            return
        if not SHARD.fullmatch(path.parent.name) or not MEMO_NAME.fullmatch(path.name):
            raise ValueError(f"not a memo entry's name: {path}")
        with contextlib.suppress(OSError):
            for folder in (self.directory, path.parent):  # never a link, nor what one points to
                if folder.is_symlink():
                    return
                folder.mkdir(exist_ok=True)
            if not path.is_symlink():
                atomic_write(path, lambda handle: handle.write(buffer.getvalue()))


def same_table(left: pd.DataFrame, right: pd.DataFrame) -> bool:
    """Whether two tables are the same: columns, index, dtypes and values (NaN in the same
    places; in an object column, each value of the same type: None is not NaN)."""
    if not (list(left.columns) == list(right.columns) and left.index.equals(right.index)
            and list(left.dtypes) == list(right.dtypes) and left.equals(right)):
        return False
    return all(left.iloc[:, i].map(type).equals(right.iloc[:, i].map(type))
               for i, dtype in enumerate(left.dtypes) if dtype == object)
