"""``sweval cache``: look into the unit store and prune it, on request only.

The store (``--cache``, else ``$SWEVAL_CACHE``, else the user's cache directory:
:func:`evaluators.run.sources.user_store`) keeps every finished unit until the user says
otherwise::

    sweval cache list  [--cache DIR | --output RUN]       one line per unit
    sweval cache size  [--cache DIR | --output RUN]       units and bytes per algorithm
    sweval cache prune --older-than 30D [--dry-run]      units no run used for 30 days
    sweval cache prune --max-size 2G [--dry-run]         the least recently used, down to 2 GiB
    sweval cache prune --run runs/old [--dry-run]        the units a run's units.csv names

``--output RUN`` (and ``prune --run RUN`` without ``--cache`` or ``--output``) means the store
that run used, as its record says (see :func:`run_store_directory`). A store directory that does not exist is an error, not an empty
store: a mistyped path must not look like a clean one.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from sweval.data.errors import SwevalError
from sweval.evaluators.wording import byte_size as _size
from sweval.flows.cli.cache_stores import chosen_store, existing_store, run_store_directory
from sweval.flows.cli.terminal import table_console

app = typer.Typer(help="List, size and prune the unit store (finished units are never deleted "
                  "otherwise).", no_args_is_help=True)

CacheOption = Annotated[str | None, typer.Option(
    "--cache", help="The unit store. \\[default: $SWEVAL_CACHE, else the user's cache "
    "directory, as for sweval run]")]
OutputOption = Annotated[str | None, typer.Option(
    "--output", help="A run's output directory: the unit store that run used (its config.json "
    "or compare.json records it).", show_default=False)]

def _split_text(split: dict) -> str:
    kind = split.get("kind", "?")
    if kind == "window":
        start = dt.datetime.fromtimestamp(int(split["t_start"]), dt.UTC).strftime("%Y-%m-%d %H:%M")
        stratum = split.get("stratum", "all")
        return f"window {start}" + ("" if stratum == "all" else f" [{stratum}]")
    if "seed" in split:
        return f"{kind} seed {split['seed']}"
    return str(kind)


def _changed_params(algorithm: str, params: dict) -> str:
    """The parameters that differ from the algorithm's defaults, or ``defaults``."""
    from sweval.evaluators.units.algorithm_spec import canonical_params

    try:
        defaults = canonical_params(algorithm, {})
    except SwevalError:  # an algorithm this version does not know
        defaults = {}
    changed = {k: v for k, v in sorted(params.items()) if defaults.get(k) != v}
    return ", ".join(f"{k}={v}" for k, v in changed.items()) or "defaults"


@app.command("list")
def list_units(cache: CacheOption = None, output: OutputOption = None) -> None:
    """One line per finished unit: algorithm, split, parameters, depth, users, size, last use."""
    store = chosen_store(cache, output)
    table = Table(title=f"unit store {store.directory}")
    #: columns shown whole however narrow the terminal (a key is what `cache` commands take)
    whole = {"key": 10, "size": 9, "last used": 16}
    for column in ("key", "algorithm", "split", "params", "depth", "users", "size", "last used"):
        table.add_column(column, min_width=whole.get(column), no_wrap=column in whole,
                         justify="right" if column in ("depth", "users", "size") else "left")
    n = 0
    for entry in store.entries():
        record = entry.record
        params = _changed_params(record.get("algorithm", ""), record.get("params", {}))
        table.add_row(
            entry.key[:10], escape(str(record.get("algorithm", "?"))),
            escape(_split_text(record.get("split", {}))), escape(params),
            str(record.get("depth", "?")), str(record.get("n_users", "?")),
            _size(entry.size_bytes),
            dt.datetime.fromtimestamp(entry.last_used).strftime("%Y-%m-%d %H:%M"),
        )
        n += 1
    table_console().print(table if n else escape(f"unit store {store.directory}: empty"))


@app.command("size")
def size(cache: CacheOption = None, output: OutputOption = None) -> None:
    """How many units and bytes the store holds, per algorithm, and its tables kept for reruns."""
    from sweval.evaluators.units.ownership import MEMO_FOLDER, memo_files

    store = chosen_store(cache, output)
    rows = [(e.record.get("algorithm", "?"), e.size_bytes) for e in store.entries()]
    import pandas as pd

    frame = pd.DataFrame(rows, columns=["algorithm", "bytes"])
    table = Table(title=f"unit store {store.directory}")
    for column in ("algorithm", "units", "size"):
        table.add_column(column, justify="left" if column == "algorithm" else "right")
    for algorithm, group in frame.groupby("algorithm", sort=True):
        table.add_row(escape(str(algorithm)), str(len(group)), _size(group["bytes"].sum()))
    table.add_row("[bold]total[/bold]", str(len(frame)), _size(frame["bytes"].sum()))
    console = table_console()
    console.print(table)
    kept = [path for path in memo_files(store.directory) if not path.name.endswith(".tmp")]
    if kept:
        console.print(f"and {len(kept)} statistics table(s) kept for reruns "
                      f"({_size(sum(_file_size(path) for path in kept))}, in "
                      f"{store.directory / MEMO_FOLDER})", markup=False, highlight=False)


def run_unit_keys(run: Path) -> set[str]:
    """The unit keys a run directory's ``units.csv`` files name (a comparison has several).

    Raises:
        SwevalError: no units.csv with a ``unit_key`` column under ``run``.
    """
    keys: set[str] = set()
    found = False
    for path in [run / "units.csv", *sorted(run.glob("*/units.csv"))]:
        if not path.exists():
            continue
        import pandas as pd

        frame = pd.read_csv(path, dtype=str)
        if "unit_key" in frame:
            found = True
            keys |= set(frame["unit_key"].dropna())
    if not found:
        from sweval.evaluators.units.locks import output_holder

        holder = output_holder(run)
        if holder is not None:
            raise SwevalError(f"{run}: a sweval run is writing there ({holder}); its units.csv "
                              "is written when it ends: prune its units then.")
        raise SwevalError(f"{run}: no units.csv with a unit_key column (not a run directory?).")
    return keys


@app.command("prune")
def prune(
    older_than: Annotated[str | None, typer.Option(
        help="Delete units that no run used for longer than this duration (30D, 12h, ...): "
        "a unit is used when a run computes it or reuses it, so the units a rolling series "
        "reuses every day stay.")] = None,
    run: Annotated[Path | None, typer.Option(
        help="Delete the units this run directory used (its units.csv) from the store it used "
        "(the one its config.json records) unless --cache or --output names one.")] = None,
    max_size: Annotated[str | None, typer.Option(
        help="Then delete the least recently used units until the store holds at most this "
        "much (2G, 500M, 1.5GiB: powers of 1024).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Only say what would be deleted.")] = False,
    cache: CacheOption = None,
    output: OutputOption = None,
) -> None:
    """Delete units by last use, by run or down to a size. Nothing else ever deletes a finished
    unit."""
    from sweval.data.durations import parse_duration
    from sweval.evaluators.units.locks import describe_registrants
    from sweval.evaluators.units.memo import Memo
    from sweval.evaluators.units.ownership import unlink_own
    from sweval.evaluators.units.store import MTIME_SLACK_S

    if older_than is None and run is None and max_size is None:
        raise SwevalError("sweval cache prune: give --older-than DURATION, --run DIR and/or "
                          "--max-size SIZE.")
    max_bytes = parse_size(max_size, option="--max-size") if max_size is not None else None
    cutoff = time.time() - parse_duration(older_than, option="--older-than") \
        if older_than is not None else None
    keys = run_unit_keys(run) if run is not None else None
    if run is not None and cache is None and output is None:
        store = existing_store(*run_store_directory(run))
    else:
        store = chosen_store(cache, output)
    live = store.live_runs()
    # a run that has not planned yet (or a comparison, which finds units as it goes) may still
    # reach for any unit; one that has planned uses only what it used since it began
    in_use_since = None if not live else (
        live[0]["since"] - MTIME_SLACK_S if all(run.get("planned") for run in live) else -math.inf)
    entries = list(store.entries())

    def used_live(entry: Any) -> bool:
        return in_use_since is not None and entry.last_used >= in_use_since

    chosen, in_use = [], []
    if older_than is not None or run is not None:
        for entry in entries:
            if (cutoff is None or entry.last_used < cutoff) and (keys is None or entry.key in keys):
                (in_use if used_live(entry) else chosen).append(entry)
    if max_bytes is not None:
        more, kept_live = least_recently_used(entries, chosen, max_bytes, used_live)
        chosen, in_use = chosen + more, in_use + [e for e in kept_live if e not in in_use]
    kept = (f"; kept {len(in_use)} that running sweval commands use or may use "
            f"({describe_registrants(live)})" if in_use else "")
    leftovers_before = time.time() - LEFTOVER_AGE_S
    leftovers = store.leftovers(leftovers_before)
    # the tables kept for reruns go by last use too (a live run may be reading them)
    tables = Memo(store.directory).unused_since(
        min(cutoff, in_use_since if in_use_since is not None else cutoff)
    ) if cutoff is not None else []
    sizes = {path: _file_size(path) for path in [*leftovers, *tables]}
    if dry_run:
        console = table_console()
        console.print(
            f"would delete {len(chosen)} units ({_size(_bytes(chosen))}) from {store.directory}"
            + kept + _tables_text(tables, sizes, would=True)
            + _leftovers_text(leftovers, sizes, would=True), markup=False)
        for path in sorted({*(p for entry in chosen for p in store.unit_paths(entry.key)),
                            *tables, *leftovers}):
            console.print(str(path), markup=False, highlight=False, soft_wrap=True)
        return
    deleted = [entry for entry in chosen if store.remove(entry.key, last_used=entry.last_used)]
    busy = len(chosen) - len(deleted)
    for path in tables:
        unlink_own(path)
    removed = store.remove_leftovers(leftovers, leftovers_before)
    table_console().print(
        f"deleted {len(deleted)} units ({_size(_bytes(deleted))}) from {store.directory}"
        + (f"; left {busy} that a running sweval is computing or has just used" if busy else "")
        + kept + _tables_text(tables, sizes) + _leftovers_text(removed, sizes), markup=False
    )


prune.__doc__ = "\n\n".join([
    "Delete units by last use, by run or down to a size. Nothing else ever deletes a finished "
    "unit.",
    "--older-than and --run choose units (both: those they both name); --max-size then deletes "
    "the least recently used of the rest until the store holds at most that much.",
    "The units that running sweval commands have used since they began, or computed, stay.",
    "Every prune also deletes the files that killed writes left in the store (temporary files, "
    "units whose record was never written) once they are an hour old; --older-than also "
    "deletes the statistics tables kept for reruns that no run used for that long.",
])


def least_recently_used(entries: list, chosen: list, max_bytes: int,
                        live: Any) -> tuple[list, list]:
    """The units to delete, besides ``chosen``, for the store to hold at most ``max_bytes``:
    the least recently used first, skipping those a live run uses (``live(entry)``).

    Returns:
        (the units to delete, the live units that would otherwise have gone).
    """
    picked = {entry.key for entry in chosen}
    rest = sorted((e for e in entries if e.key not in picked), key=lambda e: e.last_used)
    total = _bytes(rest)
    more, kept = [], []
    for entry in rest:
        if total <= max_bytes:
            break
        if live(entry):
            kept.append(entry)
            continue
        more.append(entry)
        total -= entry.size_bytes
    return more, kept


_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


def parse_size(text: str, *, option: str) -> int:
    """Bytes from ``2G``, ``500M``, ``1.5GiB``, ``800k``, ``1024`` (K, M, G, T: powers of 1024,
    as ``sweval cache size`` prints them; ``B``, ``iB`` may follow).

    Raises:
        SwevalError: text that is not such a size, naming ``option``.
    """
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise SwevalError(f"{option} {text!r}: not a size (e.g. 2G, 500M, 1.5GiB; powers of "
                          "1024).")
    power = " kmgt".index(found.group(2).lower() or " ")
    return int(float(found.group(1)) * 1024 ** power)


#: Files of a killed write (:meth:`UnitStore.leftovers`) older than this are deleted by every
#: prune: a unit's files are written within seconds, and under its lock.
LEFTOVER_AGE_S = 3600.0


def _also_text(paths: list[Path], sizes: dict[Path, int], what: str, *,
               would: bool = False) -> str:
    """``; (would) also delete(d) N <what> (size)``, or nothing."""
    if not paths:
        return ""
    verb = "would also delete" if would else "also deleted"
    return f"; {verb} {len(paths)} {what} ({_size(sum(sizes.get(path, 0) for path in paths))})"


def _leftovers_text(paths: list[Path], sizes: dict[Path, int], *, would: bool = False) -> str:
    return _also_text(paths, sizes, "file(s) left by killed writes", would=would)


def _tables_text(paths: list[Path], sizes: dict[Path, int], *, would: bool = False) -> str:
    return _also_text(paths, sizes, "statistics table(s) kept for reruns", would=would)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _bytes(entries: list) -> int:
    """The size of ``entries`` (StoredUnit) together."""
    return sum(entry.size_bytes for entry in entries)
