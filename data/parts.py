"""A log written as part files: a directory or a glob of Parquet, CSV or JSON Lines parts read as
one log (what Spark, Hive and most pipelines write).

- A directory is read with every file below it, in path order, except those whose name or a
  folder on the way starts with ``_`` or ``.`` (Spark's ``_SUCCESS``, ``_committed_*``,
  ``_temporary/``, ``.part-0000.crc``), as ``pyarrow.dataset`` does.
- A glob (``exports/part-*.parquet``; ``**`` reaches into sub-folders) is read with the files it
  matches, in path order, less the same hidden names.
- Every part has one format (from its name, or ``--format``) and the same columns of the same
  kind (number, text, boolean, date-time); a column that is empty in a part fits any kind.
  Date-time columns are taken to UTC first (naive ones are UTC), so parts written in different
  time zones agree. Parts without any data row (a 0-byte file, a header alone) add nothing.
- Partition folders (``date=2024-01-01/``) are not read as columns: the parts must hold every
  column the run uses.
"""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sweval.data.epoch_precision import TimeUnit
from sweval.data.errors import SwevalError
from sweval.data.readers import Format, detect_format, read_file
from sweval.data.text_files import is_blank

_GLOB_CHARACTERS = frozenset("*?[")
_HIDDEN_PREFIXES = ("_", ".")


def is_glob(text: str) -> bool:
    """``text`` holds a glob pattern (``*``, ``?`` or ``[``)."""
    return bool(_GLOB_CHARACTERS & set(text))


def part_files(source: Path, pattern: str | None = None) -> list[Path]:
    """The part files of a directory ``source``, or of the glob ``pattern``, in path order.

    Raises:
        SwevalError: no part file at all.
    """
    if pattern is not None:
        found = [Path(name) for name in glob.glob(pattern, recursive=True)]
        files = sorted(p for p in found if p.is_file() and not _hidden(Path(p.name)))
        if not files:
            raise SwevalError(f"{pattern}: no file matches (names starting with _ or . are skipped).")
        return files
    files = sorted(
        p for p in source.rglob("*") if p.is_file() and not _hidden(p.relative_to(source))
    )
    if not files:
        raise SwevalError(
            f"{source}: the directory holds no part file (names starting with _ or . are skipped)."
        )
    return files


def _hidden(relative: Path) -> bool:
    return any(part.startswith(_HIDDEN_PREFIXES) for part in relative.parts)


def parts_format(source: str, files: Sequence[Path], fmt: Format) -> Format:
    """The one format of every part: ``fmt`` if given, else their names' (all alike).

    Raises:
        SwevalError: parts of different formats, naming one file of each, or MovieLens files.
    """
    if fmt != "auto":
        return fmt
    kinds: dict[Format, Path] = {}
    for path in files:
        kinds.setdefault(detect_format(path), path)
    if len(kinds) > 1:
        listed = ", ".join(f"{path} ({kind})" for kind, path in kinds.items())
        raise SwevalError(
            f"{source}: the parts are of different formats: {listed}; keep one format per "
            "directory, or pass a glob naming one (e.g. part-*.parquet)."
        )
    (found,) = kinds
    if found == "movielens":
        raise SwevalError(f"{source}: MovieLens files are read one at a time; pass the file.")
    return found


def read_parts(
    source: str,
    files: Sequence[Path],
    fmt: Format,
    *,
    sep: str | None = None,
    text_columns: Sequence[str] = (),
    time_column: str | None = None,
    time_unit: TimeUnit = "s",
) -> pd.DataFrame:
    """Read every part (module docstring) and concatenate them in path order. The options are
    :func:`data.readers.read_file`'s.

    Raises:
        SwevalError: a part that cannot be read (naming it), parts whose columns differ in
            name or kind (naming the column and a file of each), or no data row in any part.
    """
    frames: list[tuple[Path, pd.DataFrame]] = []
    for path in files:
        if fmt != "parquet" and is_blank(path):
            continue  # an empty part (Spark writes them for empty partitions)
        frame = _utc(read_file(path, fmt, sep=sep, text_columns=text_columns,
                               time_column=time_column, time_unit=time_unit))
        frames.append((path, frame))
    check_same_schema(source, frames)
    with_rows = [frame for _, frame in frames if len(frame)]
    if not with_rows:
        raise SwevalError(f"{source}: the log is empty (no data rows in any of {len(files)} parts).")
    return pd.concat(with_rows, ignore_index=True)


def _utc(frame: pd.DataFrame) -> pd.DataFrame:
    """Date-time columns in UTC (naive ones are UTC, SPEC §1)."""
    for column in frame.columns:
        values = frame[column]
        if isinstance(values.dtype, pd.DatetimeTZDtype):
            frame[column] = values.dt.tz_convert("UTC")
        elif pd.api.types.is_datetime64_dtype(values.dtype):
            frame[column] = values.dt.tz_localize("UTC")
    return frame


def column_kind(values: pd.Series) -> str | None:
    """What a column holds: number, text, boolean or date-time; None when every cell is empty."""
    if values.isna().all():
        return None
    dtype = values.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_numeric_dtype(dtype):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "date-time"
    return "text"


def check_same_schema(source: str, frames: Sequence[tuple[Path, pd.DataFrame]]) -> None:
    """Every part has the same column names, and each column the same kind where it has values.

    Raises:
        SwevalError: naming the column(s) and one file on each side.
    """
    if not frames:
        return
    first_path, first = frames[0]
    names = set(map(str, first.columns))
    kinds: dict[str, tuple[str, Path]] = {}
    for path, frame in frames:
        other = set(map(str, frame.columns))
        if other != names:
            only_first = ", ".join(map(repr, sorted(names - other))) or "none"
            only_other = ", ".join(map(repr, sorted(other - names))) or "none"
            raise SwevalError(
                f"{source}: the parts have different columns: {first_path} has {only_first} "
                f"that {path} lacks, {path} has {only_other} that {first_path} lacks; write "
                "every part with the same columns."
            )
        for column in frame.columns:
            kind = column_kind(frame[column])
            if kind is None:
                continue
            seen = kinds.setdefault(str(column), (kind, path))
            if seen[0] != kind:
                raise SwevalError(
                    f"{source}: column {str(column)!r} holds {seen[0]} values in {seen[1]} "
                    f"but {kind} values in {path}; write every part with the same column types."
                )
