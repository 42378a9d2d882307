"""Which files a unit store owns: the names it creates, and the tests that keep every deleting
command to them (never a symbolic link, nor what one points to).

::

    <2 hex>/                    a shard (:data:`SHARD`)
    <2 hex>/<key>/              a unit folder (:data:`KEY`); its modification time is its last use
    <2 hex>/<key>/unit.json     and lists.parquet, warm.npz (:data:`UNIT_FILES`), each possibly
                                beside its temporary ``.<name>.<random>.tmp`` (:data:`TEMPORARY`)
    <2 hex>/.<key>.lock         the unit's lock (:mod:`evaluators.units.locks`)
    .runs/                      the store's live runs (:data:`RUNS_FOLDER`)
    memo/<2 hex>/<key>.parquet  a table already computed (:mod:`evaluators.units.memo`;
                                :data:`MEMO_FOLDER`, :data:`MEMO_NAME`), possibly beside its
                                temporary file
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

UNIT_FILE = "unit.json"
LISTS_FILE = "lists.parquet"
WARM_FILE = "warm.npz"
#: The folder of the store's live runs (:func:`evaluators.units.locks.registered`).
RUNS_FOLDER = ".runs"
#: The file that makes a directory a unit store (https://bford.info/cachedir/).
STORE_TAG = "CACHEDIR.TAG"
#: The names the store creates: shard folders, unit folders (keys), a unit's files and lock.
SHARD = re.compile(r"[0-9a-f]{2}")
KEY = re.compile(r"[0-9a-f]{16,64}")
UNIT_FILES = frozenset({UNIT_FILE, LISTS_FILE, WARM_FILE})
#: The folder of the tables already computed, and their names in its shard folders.
MEMO_FOLDER = "memo"
MEMO_NAME = re.compile(r"[0-9a-f]{64}\.parquet")


def is_temporary(path: Path) -> bool:
    """A temporary file of :func:`atomic_write` of a unit's file (``.<name>.<random>.tmp``)."""
    found = TEMPORARY.fullmatch(path.name)
    return found is not None and found.group(1) in UNIT_FILES


#: :func:`atomic_write`'s temporary names (``tempfile``'s random part: letters, digits, _).
TEMPORARY = re.compile(r"\.(.+)\.[a-z0-9_]+\.tmp")


def is_tag_temporary(path: Path) -> bool:
    """A temporary file of the store's tag being written (``.CACHEDIR.TAG.<random>.tmp``)."""
    found = TEMPORARY.fullmatch(path.name)
    return found is not None and found.group(1) == STORE_TAG


def is_own_file(path: Path) -> bool:
    """A file of a unit folder that the store itself writes, not a symbolic link."""
    return (path.name in UNIT_FILES or is_temporary(path)) and not path.is_symlink() \
        and path.is_file()


def is_memo_file(path: Path) -> bool:
    """A memo entry or its temporary file (in a shard folder of ``memo/``), not a link."""
    temporary = TEMPORARY.fullmatch(path.name)
    named = MEMO_NAME.fullmatch(path.name) or (
        temporary is not None and MEMO_NAME.fullmatch(temporary.group(1)))
    return bool(named) and not path.is_symlink() and path.is_file()


def memo_files(store: Path) -> list[Path]:
    """Every memo entry and temporary file of the store (:func:`is_memo_file`), sorted."""
    memo = store / MEMO_FOLDER
    if memo.is_symlink():
        return []
    return sorted(path for shard in own_dirs(memo, SHARD) for path in shard.iterdir()
                  if is_memo_file(path))


def own_files(directory: Path) -> list[Path]:
    """The store's own files in a unit folder (:func:`is_own_file`)."""
    try:
        return [path for path in directory.iterdir() if is_own_file(path)]
    except OSError:
        return []


def own_dirs(directory: Path, pattern: re.Pattern[str]) -> list[Path]:
    """The sub-folders of ``directory`` named by ``pattern``, sorted, symbolic links left out."""
    try:
        return sorted(path for path in directory.iterdir() if pattern.fullmatch(path.name)
                      and not path.is_symlink() and path.is_dir())
    except OSError:
        return []


def unlink_own(path: Path) -> None:
    """Delete ``path`` if it is a regular file (never a link, nor what one points to)."""
    with contextlib.suppress(OSError):
        if not path.is_symlink() and path.is_file():
            path.unlink()


def foreign_names(directory: Path) -> list[str]:
    """What in ``directory`` a unit store never holds (paths relative to it, sorted): anything
    at the top but shard folders and ``.runs``; in a shard, anything but unit folders of its
    keys and their lock files; in a unit folder, anything but the unit's files. Symbolic links
    are foreign wherever they are."""
    foreign = []
    for top in sorted(directory.iterdir()):
        if top.is_symlink() or (top.name == RUNS_FOLDER and not top.is_dir()):
            foreign.append(top.name)
        elif top.name == RUNS_FOLDER or (is_tag_temporary(top) and top.is_file()):
            continue  # (the tag's temporary file: another process is creating the store)
        elif top.name == MEMO_FOLDER and top.is_dir():
            foreign += [f"{top.name}/{path.relative_to(top)}" for path in sorted(top.rglob("*"))
                        if not (is_memo_file(path) or (path.parent == top and path.is_dir()
                                                       and SHARD.fullmatch(path.name)))]
        elif not (SHARD.fullmatch(top.name) and top.is_dir()):
            foreign.append(top.name)
        else:
            for entry in sorted(top.iterdir()):
                lock = entry.name.startswith(".") and entry.name.endswith(".lock") \
                    and KEY.fullmatch(entry.name[1:-5])
                unit = KEY.fullmatch(entry.name) and entry.name.startswith(top.name)
                if entry.is_symlink() or not ((lock and entry.is_file())
                                              or (unit and entry.is_dir())):
                    foreign.append(f"{top.name}/{entry.name}")
                elif unit:
                    foreign += [f"{top.name}/{entry.name}/{path.name}"
                                for path in sorted(entry.iterdir()) if not is_own_file(path)]
    return foreign


def last_use(directory: Path) -> float:
    """A unit directory's last use (its modification time); 0 for one that is gone."""
    try:
        return directory.stat().st_mtime
    except OSError:
        return 0.0


def mark_used(directory: Path) -> None:
    """Set a unit directory's modification time to now: the unit's last use, which ``sweval
    cache prune --older-than`` goes by (its files keep their write times). One ``utime`` call
    (0.5–1.2 µs measured, against about 1.4 ms to load the unit); a store this process may
    not write (read-only, another user's) keeps its times, as does a unit deleted since it was
    read."""
    with contextlib.suppress(OSError, NotImplementedError):
        os.utime(directory, follow_symlinks=False)
