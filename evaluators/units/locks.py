"""Locks that keep concurrent ``sweval`` processes apart: one run per output directory, one
computation per unit of a shared store.

Both are ``filelock.FileLock`` locks: an exclusive ``flock`` on a lock file, which the kernel
releases when the holding process ends, however it ends. A lock left by a killed process is
therefore never "stale": the next run takes it at once.

Output directory (``<output>/.sweval.lock``)::

    run A ── takes the lock, writes {pid, host, started, command} in the file ── ... ── releases
    run B ──── tries once, finds it held ── stops: SwevalError naming A's pid, host, start

A second run into a directory in use stops at once with that error rather than waiting: its
outputs would be the first run's anyway (the same units), and a process waiting silently for
hours helps nobody. Scheduled runs of one deployment never overlap (``concurrency_limit=1``).

Unit (``<store>/<2 hex>/.<key>.lock``): a process computes a unit only while holding its lock,
and checks again, once it holds it, whether another process finished the unit meanwhile, which
it then reuses. Two runs into one shared store (``--cache``) thus wait for each other's units
instead of computing them twice. A unit's lock file stays while the unit exists;
``sweval cache prune`` deletes it with the unit, holding it (:func:`unit_lock_if_free`).

Registration (``<folder>/<pid>-<random>.lock``): a live run locks a file of its own in a folder
that others read (a store's ``.runs``: ``sweval cache prune`` keeps what live runs may use;
``$SWEVAL_HOME/server-users``: ``sweval down`` does not stop servers that commands use)::

    run ── registered(): creates and locks its file, writes {pid, host, started, command, since,
       planned} ── mark_planned() ── ... ── removes the file, releases
    reader ── registrants(): a file it cannot lock is a live run's (its record is read); one it
              can lock is a dead run's (killed: the kernel released it), and is removed
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import secrets
import socket
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from sweval.data.errors import SwevalError
from sweval.evaluators.wording import shown_uri

_log = logging.getLogger(__name__)

#: The output directory's lock file (it holds the owner's description while locked).
OUTPUT_LOCK = ".sweval.lock"


def owner_record() -> dict[str, Any]:
    """Who holds a lock: this process's pid, host, start time (UTC) and command line (a
    deployment's flow run, whose command line is Prefect's engine: its flow run id), the
    password of a URI in it masked (other users may read the record, and commands print it)."""
    flow_run = os.environ.get("PREFECT__FLOW_RUN_ID")  # set by Prefect for a flow-run process
    if flow_run:
        command = f"Prefect flow run {flow_run}"
    else:
        command = shown_uri(" ".join([Path(sys.argv[0]).name, *sys.argv[1:]])) if sys.argv else ""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
    }


def describe_owner(path: Path, wait_s: float = 1.0) -> str:
    """The holder of the lock file ``path`` in words (as much as its record says). A holder
    writes its record just after taking the lock: one that has not yet is given ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            owner = json.loads(path.read_text(encoding="utf-8"))
            return (
                f"pid {owner['pid']} on host {owner['host']}, started {owner['started']} "
                f"({owner['command']})"
            )
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() >= deadline:
                return "a process that has not described itself yet"
            time.sleep(0.05)


@contextlib.contextmanager
def output_lock(directory: str | Path, command: str = "run") -> Iterator[dict[str, Any] | None]:
    """Hold ``directory``'s lock for the block: no other ``sweval`` run may write there meanwhile.

    Yields the record the previous holder left in the lock file (its :func:`owner_record`, and
    what it added with :func:`annotate_output_lock`), or None: the lock file keeps the last
    holder's record, however that holder ended. What holders added is carried over to this
    holder's record until one replaces it. The record names the ``sweval`` command whose
    output the directory holds (``output_of``): another command may not write there (its
    tables would replace some of the files and leave the others).

    Raises:
        SwevalError: the directory cannot be created, is not SW-EVAL's to write
            (:func:`evaluators.run.output_dir.claim`), another process holds its lock (the
            message names that process), or it holds another command's output.
    """
    from sweval.evaluators.run.output_dir import claim

    directory = claim(directory)
    path = directory / OUTPUT_LOCK
    lock = FileLock(path, thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise SwevalError(
            f"{directory}: another sweval run is writing to this output directory: "
            f"{describe_owner(path)}. Wait until it has finished (or stop it), or choose "
            "another --output."
        ) from None
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot lock the output directory ({exc}).") from exc
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        previous = None
    previous = previous if isinstance(previous, dict) else None
    written_by = output_of(directory, previous)
    if written_by not in (None, command):
        lock.release()
        raise SwevalError(
            f"{directory}: holds the output of `sweval {written_by}`; `sweval {command}` would "
            "replace some of its files and leave the others. Give another --output (or delete "
            "that directory first)."
        )
    record = owner_record() | {OUTPUT_OF: command}
    added = {key: value for key, value in (previous or {}).items() if key not in record}
    try:
        path.write_text(json.dumps(added | record), encoding="utf-8")  # we hold it: ours to write
        yield previous
    finally:
        lock.release()


#: The lock record's field naming the command whose output the directory holds.
OUTPUT_OF = "output_of"
#: The files that name the command of an output written before its lock record did, in the
#: order they are asked (compare writes a run's files too, for its sw-eval protocol).
_RECORD_FILES = {"compare.json": "compare", "leakage.json": "leakage", "gap.json": "gap",
                 "config.json": "run", "folds.csv": "run"}


def output_of(directory: Path, record: dict[str, Any] | None) -> str | None:
    """The ``sweval`` command whose output ``directory`` holds: as its lock ``record`` says,
    else as its files say (``compare.json``, ..., a run's ``config.json``), else None."""
    if record is not None and isinstance(record.get(OUTPUT_OF), str):
        return record[OUTPUT_OF]
    return next((command for name, command in _RECORD_FILES.items()
                 if (directory / name).is_file()), None)


def annotate_output_lock(directory: str | Path, **fields: Any) -> None:
    """Add ``fields`` to the record in ``directory``'s lock file, which this process holds
    (:func:`output_lock`): the next holder reads them."""
    path = Path(directory) / OUTPUT_LOCK
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = owner_record()
    with contextlib.suppress(OSError):
        path.write_text(json.dumps(record | fields), encoding="utf-8")


def output_holder(directory: Path) -> str | None:
    """The process writing to the output directory ``directory`` in words, or None when none
    is (or it is no output directory)."""
    path = Path(directory) / OUTPUT_LOCK
    if not path.is_file():
        return None
    lock = FileLock(path, thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return describe_owner(path)
    except OSError:
        return None
    lock.release()
    return None


def unit_lock_path(store_directory: Path, key: str) -> Path:
    """Unit ``key``'s lock file in the store at ``store_directory``: ``<2 hex>/.<key>.lock``."""
    return store_directory / key[:2] / f".{key}.lock"


@contextlib.contextmanager
def unit_lock(store_directory: Path, key: str) -> Iterator[None]:
    """Hold the lock of unit ``key`` in the store at ``store_directory``, waiting for it as long
    as another process (or thread) computes that unit."""
    path = unit_lock_path(store_directory, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path, thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        _log.info("unit %s is being computed by another process: waiting for it", key)
        clock = time.monotonic()
        lock.acquire()
        _log.info("unit %s: waited %.1f s for the other process", key, time.monotonic() - clock)
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def unit_lock_if_free(store_directory: Path, key: str) -> Iterator[bool]:
    """Hold unit ``key``'s lock for the block if no other process (or thread) holds it now.

    Yields True while holding it; False at once, without waiting, when it is held (a run is
    computing that unit). The lock file is created if missing; its directory must exist.
    """
    lock = FileLock(unit_lock_path(store_directory, key), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


@contextlib.contextmanager
def registered(folder: Path) -> Iterator[None]:
    """Count this process as a live run in ``folder`` for the block (see the module's
    docstring): its file holds :func:`owner_record`, ``since``, when the block began (epoch
    seconds), and ``planned``, false until :func:`mark_planned` (until then the run may still
    reach for anything). A folder that cannot be written registers nothing (its readers could
    not delete anything there either)."""
    path = folder / f"{os.getpid()}-{secrets.token_hex(4)}.lock"
    lock = FileLock(path, thread_local=False)
    since = time.time()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)  # a new file: nobody else holds it
    except (OSError, Timeout) as exc:
        _log.debug("%s: cannot register this run (%s)", folder, exc)
        yield
        return
    record = owner_record() | {"since": since, "planned": False}
    try:
        path.write_text(json.dumps(record), encoding="utf-8")
    except OSError:  # a full disk: readers count the run from its file's creation
        pass
    _OPEN.setdefault(folder, {})[path] = record
    try:
        yield
    finally:
        _OPEN[folder].pop(path, None)
        path.unlink(missing_ok=True)
        lock.release()


def mark_planned(folder: Path) -> None:
    """Say in this process's registrations in ``folder`` that their run has planned: from now
    on it uses only what it used since it began (found, loaded or written)."""
    for path, record in _OPEN.get(folder, {}).items():
        record["planned"] = True
        with contextlib.suppress(OSError):
            path.write_text(json.dumps(record), encoding="utf-8")


#: This process's open registrations, by folder: each file and its record.
_OPEN: dict[Path, dict[Path, dict[str, Any]]] = {}


def register_for_life(folder: Path) -> None:
    """Count this process as a live run in ``folder`` until it ends (:func:`registered`, closed
    at the interpreter's exit; after a kill, the kernel releases the lock and the next reader
    removes the file)."""
    stack = contextlib.ExitStack()
    stack.enter_context(registered(folder))
    atexit.register(stack.close)


def registrants(folder: Path) -> list[dict[str, Any]]:
    """The records of the live runs registered in ``folder``, earliest first; the files of runs
    that ended without removing theirs (killed) are removed. A record not written yet (the run
    registers as this reads) counts from its file's creation."""
    live: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.lock")) if folder.is_dir() else []:
        lock = FileLock(path, thread_local=False)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            live.append(_registration(path))
            continue
        except OSError:  # a folder this process may not write: nothing to clean up
            continue
        try:
            path.unlink(missing_ok=True)
        finally:
            lock.release()
    return sorted(live, key=lambda record: record["since"])


def _registration(path: Path) -> dict[str, Any]:
    """A live run's record (:func:`registered`), waiting briefly for one being written."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            float(record["since"])
            return record
        except (OSError, ValueError, KeyError, TypeError):
            if time.monotonic() >= deadline:
                since = path.stat().st_mtime if path.exists() else time.time()
                return {"pid": path.name.split("-")[0], "host": "?", "started": "?",
                        "command": "?", "since": since, "planned": False}
            time.sleep(0.05)


def describe_registrants(live: list[dict[str, Any]]) -> str:
    """Live runs in words: ``pid P (COMMAND, started S)``, comma-separated, each process once
    (a command and the flow it runs may both have registered)."""
    said = {(record["pid"], record.get("host")): record for record in reversed(live)}
    return ", ".join(
        f"pid {record['pid']} ({record['command']}, started {record['started']})"
        for record in reversed(said.values())
    )
