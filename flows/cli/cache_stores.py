"""Which unit store a ``sweval cache`` command acts on, as ``sweval run`` chose it.

``--cache DIR``, else the store the run in ``--output RUN`` used (its record's ``unit_store``;
for a record from before that, the run's recorded ``--cache``, else ``$SWEVAL_CACHE``, else
``RUN/units``), else ``$SWEVAL_CACHE``, else the user's store
(:func:`evaluators.run.sources.user_store`). A store that does not exist is an error, not an empty
store: a mistyped path must not look like a clean one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError

#: How to name a store, for the error about a missing one.
NAME_A_STORE = "name one with --cache DIR or --output RUN_DIR, or set $SWEVAL_CACHE"


def _run_rule(
    cache: str | None, cache_origin: str, fallback: Path, fallback_origin: str
) -> tuple[Path, str]:
    """``sweval run``'s choice of store (:func:`evaluators.run.sources.unit_store`): ``cache``, else
    ``$SWEVAL_CACHE``, else ``fallback``; with which of them it is, in words (for messages)."""
    from sweval.evaluators.run.sources import CACHE_ENV

    if cache:
        return Path(cache).expanduser(), cache_origin
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser(), f"named by ${CACHE_ENV}"
    return fallback, fallback_origin


def store_directory(cache: str | None, output: str | None) -> tuple[Path, str]:
    """The store the cache commands act on, and which rule named it (for messages):
    ``--cache``, else the store the run in ``--output`` used (:func:`run_store_directory`),
    else ``sweval run``'s own choice: ``$SWEVAL_CACHE``, else the user's store."""
    from sweval.evaluators.run.sources import user_store

    if output and not cache:
        return run_store_directory(Path(output).expanduser())
    return _run_rule(cache, "named by --cache", user_store(), "the user's unit store")


def run_home(run: Path) -> Path:
    """The directory whose record and store a run directory shares: ``run`` itself, or, for a
    comparison's protocol sub-directory (``sw-eval/``, ``loocv/``, ... without a ``units/`` of
    its own), the comparison's directory."""
    if not (run / "units").is_dir() and (run.parent / "compare.json").is_file():
        return run.parent
    return run


def run_record(home: Path) -> tuple[dict[str, Any], Path] | None:
    """The record of the run in ``home``, ``config.json`` (a comparison's: ``compare.json``),
    and its path; None without one.

    Raises:
        SwevalError: the record exists but cannot be read.
    """
    for name in ("config.json", "compare.json"):
        path = home / name
        if not path.is_file():
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SwevalError(f"{path}: unreadable run record ({exc}).") from exc
        return (record if isinstance(record, dict) else {}), path
    return None


def run_store_directory(run: Path) -> tuple[Path, str]:
    """The store the run in ``run`` used, and where that came from (for messages).

    Its record's ``unit_store``: the absolute directory of the store the run used, whatever
    named it. A record from before ``unit_store``: ``sweval run``'s rule applied to the run's
    recorded options, its ``--cache`` (:func:`recorded_cache`), else ``$SWEVAL_CACHE`` (which
    such a record does not hold), else the run's own ``units/`` (a comparison's, for one of its
    protocol sub-directories).
    """
    home = run_home(run)
    found = run_record(home)
    if found is None:
        return _run_rule(None, "", home / "units", f"the units/ of the run {home}")
    record, path = found
    if record.get("unit_store"):
        return Path(record["unit_store"]), f"the unit store that {path} records"
    return _run_rule(recorded_cache(record, path), f"the --cache that {path} records",
                     home / "units", f"the units/ of the run {home}")


def recorded_cache(record: dict[str, Any], path: Path) -> str | None:
    """The ``--cache`` that an older run record (``path``) names, a relative one made absolute
    against the directory the run was started in: that is what the run resolved it against,
    whatever the current directory is now. None when the run was given no ``--cache``.

    Raises:
        SwevalError: a relative ``--cache`` with an ``--output`` that does not tell that
            directory (an absolute one, or one that is not the tail of the record's directory).
    """
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    cache = config.get("cache")
    if not cache:
        return None
    if Path(cache).expanduser().is_absolute():
        return str(Path(cache).expanduser())
    started_in = _started_in(path, str(config.get("output") or ""))
    if started_in is None:
        raise SwevalError(
            f"{path} records the relative --cache {cache!r} but not the directory the run was "
            f"started in (its --output is {config.get('output')!r}): name the store with "
            "--cache DIR.")
    return str(started_in / cache)


def _started_in(path: Path, output: str) -> Path | None:
    """The directory a run was started in, from its record ``path`` and the ``--output`` the
    record holds (relative to that directory): the record's directory less the output's parts.
    A comparison records its ``sw-eval`` sub-directory as output, its record lies one up. None
    when the output is absolute or does not end the record's directory."""
    recorded = Path(output)
    if path.name == "compare.json":
        recorded = recorded.parent
    if not output or recorded.is_absolute() or ".." in recorded.parts:
        return None
    here = path.parent.resolve()
    parts = recorded.parts  # "." has none: the run's directory itself
    if parts and here.parts[-len(parts):] != parts:
        return None
    return Path(*here.parts[:len(here.parts) - len(parts)])


def existing_store(directory: Path, origin: str):  # noqa: ANN201 (lazy import of the store)
    """The store at ``directory``, which must exist and be a unit store (``origin``: how it was
    chosen, in words).

    Raises:
        SwevalError: no directory there, naming it and how to name another store, or a
            directory that is not a unit store (:meth:`UnitStore.check`).
    """
    from sweval.evaluators.units.store import UnitStore

    if not directory.is_dir():
        raise SwevalError(f"no unit store at {directory} ({origin}; {NAME_A_STORE}).")
    return UnitStore(directory).check()


def chosen_store(cache: str | None, output: str | None):  # noqa: ANN201 (lazy import)
    """The store that ``--cache`` / ``$SWEVAL_CACHE`` / ``--output`` name, which must exist."""
    return existing_store(*store_directory(cache, output))
