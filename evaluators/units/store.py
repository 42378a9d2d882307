"""The unit store: finished units under their content-addressed keys, never thrown away.

Layout under the store's directory (the user's cache directory by default, ``--cache`` or
``$SWEVAL_CACHE`` another: :func:`evaluators.run.sources.store_directory`)::

    CACHEDIR.TAG                says the directory is an SW-EVAL unit store, and its format
                                (written when the store is created; the Cache Directory Tagging
                                convention, so backup tools may skip it: evaluators.units.store_tag)
    3f/3f9c.../                 its modification time is the unit's last use: set when a file
                                of it is written, and again each time a run finds it
                                (:meth:`UnitStore.has`) or loads it (:meth:`UnitStore.load`);
                                its files keep their write times
    3f/3f9c.../unit.json        what the unit is (its key's inputs), device, timings, depth,
                                the SHA-256 of its lists.parquet, mean metrics of the run that
                                computed it; written last: a unit exists once this file does
    3f/3f9c.../lists.parquet    per evaluated user (raw id), the top-K items (raw ids), best first
    3f/3f9c.../warm.npz         the fitted model's state, for warm-starting algorithms only
    .runs/<pid>-<random>.lock   one per live run using the store (:meth:`UnitStore.in_use`)
    memo/<2 hex>/<key>.parquet  a statistics table kept for reruns of the same units
                                (:mod:`evaluators.units.memo`)

Lists hold raw ids, not codes: codes shift when a log grows, ids do not, so a window's unit
serves the same window of a longer log. Every file is written to a temporary name and renamed
into place, so a kill leaves each file whole or absent, and two processes writing the same unit
write the same bytes; a unit is computed under its lock (``<2 hex>/.<key>.lock``, see
:mod:`evaluators.units.locks`), so two runs sharing a store compute it once. Nothing is deleted
because a configuration changed; only :meth:`UnitStore.remove` (``sweval cache prune``)
deletes, on request; ``sweval cache prune --older-than`` goes by last use, so the units a live
series reuses every day stay however long ago they were computed. Prune keeps, besides, every
unit used since the earliest live run of the store began (:meth:`UnitStore.live_runs`): a run
finds the units it will reuse when it plans (marking them used) and writes the ones it
computes, so neither is deleted under it.

The store owns only the names it creates: ``sweval cache`` refuses a directory without the tag
that does not look like a store either, never follows a symbolic link, and deletes only the
file names above (a unit's three files, their temporary files, a unit's lock file, a kept
table and its temporary file).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.units.engine import UnitLists
from sweval.evaluators.units.files import (
    DamagedUnit,
    UnitFiles,
    atomic_write,
    atomic_write_text,
    lists_from_table,
    whole_parquet,
)
from sweval.evaluators.units.locks import (
    mark_planned,
    registered,
    registrants,
    unit_lock,
    unit_lock_if_free,
    unit_lock_path,
)
from sweval.evaluators.units.ownership import (
    KEY,
    LISTS_FILE,
    RUNS_FOLDER,
    SHARD,
    UNIT_FILE,
    WARM_FILE,
    is_memo_file,
    is_own_file,
    is_temporary,
    last_use,
    mark_used,
    memo_files,
    own_dirs,
    own_files,
    unlink_own,
)
from sweval.evaluators.units.store_tag import check_store, prepare_store

_log = logging.getLogger(__name__)

#: Seconds by which a file time may trail ``time.time()`` read before it was set (the kernel
#: stamps files from a clock that advances once per scheduler tick): comparisons of a unit's
#: last use with a moment are made that much earlier, so as to keep rather than delete.
MTIME_SLACK_S = 1.0


@dataclass(frozen=True)
class StoredUnit:
    """One entry of the store, as :meth:`UnitStore.entries` lists it."""

    key: str
    path: Path
    record: dict[str, Any]
    size_bytes: int
    last_used: float  # when the unit was last written or loaded (its directory's mtime)


class UnitStore:
    """Finished units, by key, in one directory (created on first write)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _unit_dir(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def prepare(self) -> UnitStore:
        """Create the store now (its directory and tag), so an unusable one fails before any
        work (:func:`~evaluators.units.store_tag.prepare_store`).

        Raises:
            SwevalError: the directory cannot be created, or it holds files that are not a
                store's.
        """
        prepare_store(self.directory)
        return self

    def check(self) -> UnitStore:
        """Make sure the directory is a unit store this code can read
        (:func:`~evaluators.units.store_tag.check_store`).

        Raises:
            SwevalError: no such directory, a directory that is not a store, or a store of a
                newer format.
        """
        check_store(self.directory)
        return self

    def lock(self, key: str) -> contextlib.AbstractContextManager[None]:
        """Hold unit ``key``'s lock (waiting while another process computes it)."""
        return unit_lock(self.directory, key)

    def in_use(self) -> contextlib.AbstractContextManager[None]:
        """Count this process as a live run of the store for the block (see :meth:`live_runs`)."""
        return registered(self.directory / RUNS_FOLDER)

    def planned(self) -> None:
        """Say that this process's run of the store has found every unit it will reuse (see
        :meth:`live_runs`)."""
        mark_planned(self.directory / RUNS_FOLDER)

    def live_runs(self) -> list[dict[str, Any]]:
        """The runs using the store now (:meth:`in_use`), earliest first: each record's
        ``since`` is when the run began to use it, ``planned`` whether it has found every unit
        it will reuse (:meth:`planned`; a comparison finds them as it goes, so never),
        ``pid``, ``command``, ``started`` who it is."""
        return registrants(self.directory / RUNS_FOLDER)

    def has(self, key: str, *, depth: int = 0) -> bool:
        """Whether the unit is finished, with lists of at least ``depth`` items; a unit found
        counts as used now (:func:`mark_used`): the run that asks will load it."""
        directory = self._unit_dir(key)
        try:
            record = json.loads((directory / UNIT_FILE).read_text())
        except (OSError, ValueError):
            return False
        if int(record.get("depth", 0)) < depth:
            return False
        if not whole_parquet(directory / LISTS_FILE):  # damaged since: computed again
            if directory not in _REPORTED_DAMAGE:  # a run asks several times
                _REPORTED_DAMAGE.add(directory)
                _log.warning("%s: the unit's %s is missing or cut short; computing it again",
                             directory, LISTS_FILE)
            return False
        mark_used(directory)
        return True

    def save(self, key: str, lists: UnitLists, log: InteractionLog, record: dict[str, Any]) -> None:
        """Persist one finished unit (lists in ``log``'s codes); see :meth:`write`."""
        self.write(key, UnitFiles.of(lists, log), record)

    def write(self, key: str, files: UnitFiles, record: dict[str, Any]) -> None:
        """Persist one finished unit: its lists, its warm state, then its record.

        Raises:
            SwevalError: the store cannot be written (finished units stay).
        """
        directory = self._unit_dir(key)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            parquet = pa.BufferOutputStream()
            pq.write_table(files.table, parquet)
            lists_bytes = parquet.getvalue()
            atomic_write(directory / LISTS_FILE, lambda stream: stream.write(lists_bytes))
            if files.warm_state is not None:
                state = files.warm_state
                atomic_write(directory / WARM_FILE, lambda stream: np.savez(stream, **state))
            full = record | {
                "key": key,
                "depth": files.depth,
                "n_users": files.table.num_rows,
                "device": files.device,
                "timings": files.timings,
                "lists_sha256": hashlib.sha256(lists_bytes).hexdigest(),
                "created": time.time(),
            }
            atomic_write_text(directory / UNIT_FILE, json.dumps(full, indent=1, default=str))
        except OSError as exc:
            raise SwevalError(
                f"{self.directory}: cannot write a finished unit ({exc}); finished units so far "
                "are kept, rerun the same command once the problem is fixed to resume."
            ) from exc

    def load(self, key: str, log: InteractionLog) -> UnitLists:
        """The unit's lists in ``log``'s codes, with its device, timings and warm state; the
        unit counts as used now (:func:`mark_used`).

        The lists' bytes are checked against the SHA-256 in the unit's record (units written
        before the record had one are read unchecked).

        Raises:
            DamagedUnit: a file of the unit cannot be read, or its lists are not the bytes
                written (:func:`evaluators.units.unit.read_or_recompute` computes such a unit
                again).
            DamagedUnit: also lists whose ids ``log`` does not have (another unit's lists, in
                a unit written before records held their SHA-256).
        """
        directory = self._unit_dir(key)
        try:
            record = json.loads((directory / UNIT_FILE).read_text())
            lists_bytes = (directory / LISTS_FILE).read_bytes()
            expected = record.get("lists_sha256")
            if expected is not None and hashlib.sha256(lists_bytes).hexdigest() != expected:
                raise DamagedUnit(
                    f"{directory}: the unit's {LISTS_FILE} is not the file it was written as "
                    "(its SHA-256 differs from the one in its unit.json)"
                )
            table = pq.read_table(pa.BufferReader(lists_bytes))
            warm = None
            if (directory / WARM_FILE).exists():
                with np.load(directory / WARM_FILE) as arrays:
                    warm = {name: arrays[name] for name in arrays.files}
        except DamagedUnit:
            raise
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise DamagedUnit(f"{directory}: unreadable unit ({exc})") from exc
        mark_used(directory)
        users, items = lists_from_table(table, log, depth=int(record["depth"]), where=directory)
        return UnitLists(
            users=users, items=items, device=record.get("device", "cpu"),
            timings={k: float(v) for k, v in record.get("timings", {}).items()},
            warm_state=warm,
        )

    def unit_directories(self) -> Iterator[Path]:
        """Every unit folder of the store, finished or not, in key order: folders named as a
        key, in the shard folder its first two characters name; never a symbolic link."""
        for shard in own_dirs(self.directory, SHARD):
            for directory in own_dirs(shard, KEY):
                if directory.name.startswith(shard.name):
                    yield directory

    def usage(self) -> tuple[int, int]:
        """(finished units, bytes of their files), from the file system alone: a unit is
        finished once its ``unit.json`` exists; no record is read."""
        n_units = n_bytes = 0
        for directory in self.unit_directories():
            try:
                files = own_files(directory)
                if not any(path.name == UNIT_FILE for path in files):
                    continue
                n_bytes += sum(path.lstat().st_size for path in files)
            except OSError:
                continue
            n_units += 1
        return n_units, n_bytes

    def records(self) -> Iterator[dict[str, Any]]:
        """The record (``unit.json``) of every finished unit in the store."""
        for entry in self.entries():
            yield entry.record

    def entries(self) -> Iterator[StoredUnit]:
        """Every finished unit in the store."""
        for directory in self.unit_directories():
            record_path = directory / UNIT_FILE
            try:
                if record_path.is_symlink():
                    continue
                record = json.loads(record_path.read_text())
                stat = directory.stat()
                size = sum(p.lstat().st_size for p in own_files(directory))
            except (OSError, ValueError):
                continue
            yield StoredUnit(
                key=directory.name, path=directory, record=record,
                size_bytes=size, last_used=stat.st_mtime,
            )

    def remove(self, key: str, *, last_used: float | None = None) -> bool:
        """Delete one unit and its lock file, holding its lock; False (nothing deleted) when
        another process holds the lock, i.e. is computing the unit right now, or when the
        unit's last use is no longer ``last_used`` (as :meth:`entries` listed it; checked under
        the lock: a run found it after the caller chose it).

        Under the lock, taken without waiting: the record first (so a half-deleted unit is
        never read), the unit's other files, then the lock file; the lock is released last.
        Only the names the store writes are deleted (never through a symbolic link); a unit
        folder holding anything else keeps it, and the folder stays.

        Unlinking a lock file others may wait on can leave two processes each holding "the"
        lock: one on the unlinked file, one on a new file at the same path. filelock (4.x)
        retries on an unlinked file; at worst both compute the unit, which is a duplicate
        computation and never a corrupt or lost unit: the key hashes everything that determines
        it and each file is renamed into place whole. No holder can write during the deletion:
        the old lock file is ours until it is over, and a new one only appears after it.
        """
        with unit_lock_if_free(self.directory, key) as held:
            directory = self._unit_dir(key)
            if not held or (last_used is not None and last_use(directory) != last_used) \
                    or directory.is_symlink() or directory.parent.is_symlink():
                return False
            unlink_own(directory / UNIT_FILE)
            for path in own_files(directory):
                unlink_own(path)
            with contextlib.suppress(OSError):
                directory.rmdir()
            unlink_own(unit_lock_path(self.directory, key))
        return True

    def unit_paths(self, key: str) -> list[Path]:
        """The paths :meth:`remove` deletes for unit ``key``: its files and its lock file."""
        directory = self._unit_dir(key)
        if directory.is_symlink() or directory.parent.is_symlink():
            return []
        lock = unit_lock_path(self.directory, key)
        return sorted(own_files(directory)) + (
            [lock] if lock.is_file() and not lock.is_symlink() else [])

    def leftovers(self, before: float) -> list[Path]:
        """Files of killed writes last modified before ``before`` (epoch seconds): temporary
        files (``.<name>.<random>.tmp``, see :func:`atomic_write`) in unit directories, and
        every file of a unit directory that has no ``unit.json`` (a process killed between
        writing a unit's lists and its record). No run reads them; a run that computes such a
        unit again writes its files whole over them."""
        found = []
        for directory in self.unit_directories():
            finished = (directory / UNIT_FILE).exists()
            for path in own_files(directory):
                with contextlib.suppress(OSError):
                    if (is_temporary(path) or not finished) \
                            and path.lstat().st_mtime < before:
                        found.append(path)
        for path in memo_files(self.directory):
            with contextlib.suppress(OSError):
                if path.name.endswith(".tmp") and path.lstat().st_mtime < before:
                    found.append(path)
        return sorted(found)

    def remove_leftovers(self, paths: list[Path], before: float) -> list[Path]:
        """Delete the :meth:`leftovers` ``paths`` still last modified before ``before``, each
        under its unit's lock taken without waiting (a unit being computed keeps its files); a
        unit directory without ``unit.json`` left empty goes too, with its lock file. Returns
        the paths deleted."""
        deleted = []
        by_unit: dict[Path, list[Path]] = {}
        for path in paths:
            if is_memo_file(path):  # a table's temporary file: no lock guards it
                with contextlib.suppress(OSError):
                    if path.lstat().st_mtime < before:
                        path.unlink()
                        deleted.append(path)
                continue
            by_unit.setdefault(path.parent, []).append(path)
        for directory, files in by_unit.items():
            with unit_lock_if_free(self.directory, directory.name) as held:
                if not held:
                    continue
                finished = (directory / UNIT_FILE).exists()  # written since they were listed?
                for path in files:
                    with contextlib.suppress(OSError):
                        if is_own_file(path) and (is_temporary(path) or not finished) \
                                and path.lstat().st_mtime < before:
                            path.unlink()
                            deleted.append(path)
                if not finished and not any(directory.iterdir()):
                    with contextlib.suppress(OSError):
                        directory.rmdir()
                        unlink_own(unit_lock_path(self.directory, directory.name))
        return deleted


#: The damaged units this process has warned about.
_REPORTED_DAMAGE: set[Path] = set()
