"""An output directory: SW-EVAL writes only where it may, and publishes a run's files as one set.

Who owns a directory (:func:`claim`)::

    does not exist            created: SW-EVAL's (an empty manifest says so)
    empty                     SW-EVAL's from now on (an empty manifest says so)
    holds .sweval.lock,       SW-EVAL's (a directory an earlier command wrote; before the lock
    .sweval-manifest.json     and the manifest, the record a command writes tells)
    or a command's record
    anything else             refused: a user's directory (a project, a home), whose files
                              SW-EVAL must not replace or delete

A set of files (:func:`publish`; ``add`` appends to it, the report after the tables)::

    1. each new file written beside its place under a temporary name (.<name>.<random>.tmp)
    2. the previous set's files that the new one lacks deleted (only names the manifest lists)
    3. .sweval-manifest.json replaced: the run, and each file's name and SHA-256
    4. each temporary file renamed into place

A kill at any step leaves a directory whose files do not all match the manifest: a reader
(:func:`verify`; ``sweval report``, :func:`sweval.load`) refuses it instead of showing one
run's results beside another run's summary, and a rerun of the command publishes a whole set.
Only names the manifest lists, or this run writes, are ever replaced or deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError

#: The list of the published files, with their SHA-256 (step 3 above).
MANIFEST = ".sweval-manifest.json"
#: The lock file every command writing into an output directory holds (evaluators.units.locks).
_LOCK = ".sweval.lock"
_FORMAT = 1
#: The temporary files of step 1 (``tempfile``'s random part: letters, digits and ``_``).
_TEMPORARY = re.compile(r"\.(.+)\.[a-z0-9_]+\.tmp")


def claim(directory: str | Path, *, option: str = "--output") -> Path:
    """Make ``directory`` SW-EVAL's to write, as the table in the module docstring says.

    Raises:
        SwevalError: a file is in the way, the directory cannot be created, or it is not
            empty and not SW-EVAL's (naming a few of its entries).
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise SwevalError(f"{directory}: {option} names a file, not a directory.")
    if directory.is_dir():
        if written_by_sweval(directory):
            return directory
        try:
            entries = sorted(entry.name for entry in directory.iterdir()
                             if not _claim_in_progress(entry.name))
        except OSError as exc:
            raise SwevalError(f"{directory}: cannot read the output directory ({exc}).") from exc
        if entries:
            shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more"
                                               if len(entries) > 5 else "")
            raise SwevalError(
                f"{directory}: not an SW-EVAL output directory (it holds {shown}). SW-EVAL "
                f"writes only into a new or empty directory, or one it wrote before, so as "
                f"never to replace or delete your files: give {option} a new directory.")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        _write_manifest(directory, {}, run="", command="")  # SW-EVAL's from now on
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot prepare the output directory ({exc}).") from exc
    return directory


def _claim_in_progress(name: str) -> bool:
    """Whether ``name`` is the manifest another command is writing as it claims the same new
    directory (step 1's temporary name): the directory is SW-EVAL's, and the lock decides."""
    found = _TEMPORARY.fullmatch(name)
    return found is not None and found[1] == MANIFEST


#: The record each command writes into its output directory, and a key only SW-EVAL's has:
#: they tell an output written before the lock file and the manifest existed.
_RECORDS = {"config.json": "run_key", "compare.json": "protocols", "leakage.json": "design",
            "gap.json": "validations"}


def written_by_sweval(directory: Path) -> bool:
    """Whether SW-EVAL wrote ``directory``: it holds the lock file or the manifest, or (an
    output of an earlier version) a command's record with its SW-EVAL-only key."""
    if (directory / _LOCK).is_file() or (directory / MANIFEST).is_file():
        return True
    for name, key in _RECORDS.items():
        try:
            record = json.loads((directory / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and key in record:
            return True
    return False


def manifest(directory: str | Path) -> dict[str, Any] | None:
    """The directory's manifest (``run``, ``command``, ``published``, ``files``: name →
    SHA-256), or None when it has none (nothing published yet, or an SW-EVAL before it)."""
    try:
        record = json.loads((Path(directory) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("files"), dict):
        return None
    return record


def publish(
    directory: str | Path, files: Mapping[str, bytes], *, run: str, command: str,
    legacy: Iterable[str] = (),
) -> None:
    """Replace the directory's published set with ``files`` (name → bytes), as one set.

    Args:
        directory: a directory :func:`claim` has made SW-EVAL's.
        files: the new set.
        run: the run's identity (its key), recorded in the manifest.
        command: the ``sweval`` command that wrote the set.
        legacy: names an SW-EVAL without manifests wrote there that the new set replaces
            (deleted when the directory has no manifest yet and the new set lacks them).

    Raises:
        OSError: the disk refused a write (the directory is then refused by :func:`verify`
            until a publication completes).
    """
    directory = Path(directory)
    for temporary in leftover_temporaries(directory, [*files, MANIFEST]):  # of a killed one
        temporary.unlink(missing_ok=True)
    previous = manifest(directory)
    earlier = set(previous["files"]) if previous is not None else set(legacy)
    staged = _stage(directory, files)
    try:
        for name in sorted(earlier - set(files)):
            _unlink_file(directory / name)
        _write_manifest(directory, {name: _sha256(data) for name, data in files.items()},
                        run=run, command=command)
        for name, temporary in staged.items():
            os.replace(temporary, directory / name)
        _sync(directory)
    finally:
        for temporary in staged.values():
            temporary.unlink(missing_ok=True)


def add(directory: str | Path, files: Mapping[str, bytes], *, drop: Iterable[str] = ()) -> None:
    """Add ``files`` to the directory's published set (the report, once the tables are out),
    deleting the listed names in ``drop`` that ``files`` lacks (an earlier report's figures):
    the manifest first, then the files; without a manifest, the files alone.

    Raises:
        OSError: the disk refused a write.
    """
    directory = Path(directory)
    previous = manifest(directory)
    staged = _stage(directory, files)
    try:
        if previous is not None:
            gone = {name for name in drop if name in previous["files"]} - set(files)
            for name in sorted(gone):
                _unlink_file(directory / name)
            hashes = {name: digest for name, digest in previous["files"].items()
                      if name not in gone} | {name: _sha256(data) for name, data in files.items()}
            _write_manifest(directory, hashes, run=previous.get("run", ""),
                            command=previous.get("command", ""))
        for name, temporary in staged.items():
            os.replace(temporary, directory / name)
    finally:
        for temporary in staged.values():
            temporary.unlink(missing_ok=True)


def discard(directory: str | Path, names: Iterable[str]) -> None:
    """Take ``names`` out of the published set and delete them (a report that could not be
    written again); names the manifest does not list are left alone."""
    directory = Path(directory)
    previous = manifest(directory)
    if previous is None:
        return
    gone = [name for name in names if name in previous["files"]]
    if gone:
        kept = {name: digest for name, digest in previous["files"].items() if name not in gone}
        _write_manifest(directory, kept, run=previous.get("run", ""),
                        command=previous.get("command", ""))
        for name in gone:
            _unlink_file(directory / name)


def verify(directory: str | Path) -> None:
    """Make sure the directory's files are the set its manifest lists (a directory without a
    manifest passes: written before manifests, or by hand).

    Raises:
        SwevalError: a listed file is missing or differs, naming it and what to do.
    """
    directory = Path(directory)
    record = manifest(directory)
    if record is None:
        return
    for name, digest in sorted(record["files"].items()):
        path = directory / name
        try:
            found = _sha256(path.read_bytes())
        except OSError:
            found = None
        if found != digest:
            state = "is missing" if found is None else "differs from the one published"
            raise SwevalError(
                f"{directory}: {name} {state}: the directory's files are not one run's set "
                f"(a `sweval {record.get('command') or 'run'}` was stopped while it wrote them, "
                "or a file was changed since). Run that command again to publish a whole set "
                "(finished units are reused).")


def leftover_temporaries(directory: str | Path, names: Iterable[str]) -> list[Path]:
    """Temporary files that a killed :func:`publish` left for ``names``."""
    wanted = set(names)
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return []
    return sorted(path for path in entries if (found := _TEMPORARY.fullmatch(path.name))
                  and found.group(1) in wanted and path.is_file() and not path.is_symlink())


def _stage(directory: Path, files: Mapping[str, bytes]) -> dict[str, Path]:
    """Step 1: each file under a temporary name beside its place, flushed to disk."""
    staged: dict[str, Path] = {}
    try:
        for name, data in files.items():
            handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
            staged[name] = Path(temporary)
            os.fchmod(handle, 0o644)
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
    except BaseException:
        for temporary in staged.values():
            temporary.unlink(missing_ok=True)
        raise
    return staged


def _write_manifest(directory: Path, files: dict[str, str], *, run: str, command: str) -> None:
    record = {
        "format": _FORMAT, "run": run, "command": command,
        "published": datetime.now(UTC).isoformat(timespec="seconds"),
        "files": dict(sorted(files.items())),
    }
    staged = _stage(directory, {MANIFEST: json.dumps(record, indent=1).encode()})
    os.replace(staged[MANIFEST], directory / MANIFEST)


def _unlink_file(path: Path) -> None:
    """Delete ``path`` if it is a regular file or a link (the link, not what it points to)."""
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        if path.is_symlink() or path.is_file():
            path.unlink()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sync(directory: Path) -> None:
    """Flush the directory's entries (the renames) to disk, where the system allows it."""
    with contextlib.suppress(OSError):
        handle = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
