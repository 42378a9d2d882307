"""Reading one log file into a raw frame: CSV/TSV, JSON Lines, Parquet and the MovieLens layouts.

:func:`read_file` is the one entry point; every parsing problem becomes a :class:`SwevalError`
naming the file. The format is guessed from the name (:func:`detect_format`) unless forced:

==================================  =============================================================
file                                read as
==================================  =============================================================
``*.parquet``, ``*.pq``             Parquet (datetime columns keep their time zone; naive ones are
                                    UTC)
``*.jsonl``, ``*.ndjson``,          JSON Lines: one object per line, its keys the columns (what
``*.json``                          Spark's ``write.json`` produces)
``u.data``                          MovieLens 100K: ``user item rating timestamp``, tab, no header
``ratings.dat``                     MovieLens 1M/10M: ``user::item::rating::timestamp``, no header
``ratings.csv`` (``userId,movieId``) MovieLens 20M/25M/latest: ``userId,movieId,rating,timestamp``
anything else                       CSV/TSV with a header line (:mod:`data.csv_reader`)
==================================  =============================================================

Text formats may be gzip-compressed (``.gz``, or gzip content under any name) and may start
with a UTF-8 byte-order mark.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from sweval.data.csv_reader import ragged_row, read_csv_file
from sweval.data.epoch_precision import TimeUnit
from sweval.data.errors import SwevalError, first_rows
from sweval.data.id_text import with_stripped_ids
from sweval.data.streams import shown
from sweval.data.text_files import check_file, compression, first_line, is_gzip, repeated_names

Format = Literal["auto", "csv", "parquet", "jsonl", "movielens"]

_MOVIELENS_COLUMNS = ["user", "item", "rating", "timestamp"]
_PARQUET_SUFFIXES = (".parquet", ".pq")
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
#: The integers a JSON number may hold in a column (pandas reads int64 and uint64).
_INT_RANGE = (-(2**63), 2**64 - 1)


def detect_format(path: Path) -> Format:
    """The format a file's name says (module docstring); CSV when it says nothing else."""
    name = path.name.lower().removesuffix(".gz")
    if name in ("u.data", "ratings.dat") or (name == "ratings.csv" and _looks_like_movielens(path)):
        return "movielens"
    if name.endswith(_PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(_JSONL_SUFFIXES):
        return "jsonl"
    return "csv"


def detect_content_format(path: Path) -> Format:
    """The format of a file whose name may say nothing (the copy of standard input or of a pipe,
    :mod:`data.streams`): what :func:`detect_format` says, else Parquet by the first bytes, JSON
    Lines when the first line opens an object, else CSV/TSV."""
    named = detect_format(path)
    if named != "csv":
        return named
    with open(path, "rb") as handle:
        if handle.read(4) == b"PAR1":
            return "parquet"
    return "jsonl" if first_line(path).lstrip().startswith("{") else "csv"


def _looks_like_movielens(path: Path) -> bool:
    try:
        header = first_line(path)
    except SwevalError:
        return False
    return header.strip().lower().startswith("userid,movieid")


def read_file(
    path: Path,
    fmt: Format,
    *,
    sep: str | None = None,
    text_columns: Sequence[str] = (),
    time_column: str | None = None,
    time_unit: TimeUnit = "s",
) -> pd.DataFrame:
    """Read the raw frame of one log file in the given format (no validation beyond parsing).

    Args:
        path: the file.
        fmt: its format (not ``auto``: see :func:`detect_format`).
        sep: the CSV/TSV separator (``--sep``); None sniffs it.
        text_columns: the id columns. In CSV/TSV files they are read as the text written in the
            file: parsed as numbers, ``01`` and ``1`` would become the same id.
            :func:`data.ids.encode_ids` still orders a column numerically when every id spells
            an integer without padding. In every format, text ids lose the white space and
            invisible characters around them (:func:`data.id_text.with_stripped_ids`).
        time_column: the timestamp column, and ``time_unit`` its unit: in CSV/TSV files, a
            time column that pandas reads as floats is read again as written
            (:func:`data.csv_reader.read_csv_file`), for the digits that floats hide.

    Raises:
        SwevalError: naming the file: unreadable, empty, corrupt, not UTF-8, unparsable, or
            another format than its name says (Parquet named .csv, gzip named .parquet).
    """
    check_file(path)
    hint = _content_hint(path, fmt)
    if hint:
        raise SwevalError(f"{shown(path)}: cannot read as {fmt}: {hint}")
    if sep is not None and fmt != "csv":
        raise SwevalError(
            f"{shown(path)}: --sep applies to CSV/TSV files; this file is read as {fmt}.")
    try:
        if fmt == "parquet":
            _check_parquet_columns(path)
            return with_stripped_ids(pd.read_parquet(path), text_columns)
        if fmt == "movielens":
            return with_stripped_ids(_read_movielens(path), text_columns)
        if fmt == "jsonl":
            return _read_jsonl(path, text_columns=text_columns)
        if fmt == "csv":
            return read_csv_file(path, sep=sep, text_columns=text_columns,
                                 time_column=time_column, time_unit=time_unit)
    except SwevalError:
        raise
    except pd.errors.EmptyDataError as exc:
        raise SwevalError(f"{shown(path)}: the file is empty.") from exc
    except PermissionError as exc:
        raise SwevalError(f"{shown(path)}: the file is not readable ({exc}).") from exc
    except UnicodeDecodeError as exc:
        raise SwevalError(
            f"{shown(path)}: cannot parse as {fmt}: not UTF-8 text ({exc}); convert the file to "
            "UTF-8."
        ) from exc
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise SwevalError(
            f"{shown(path)}: cannot parse as {fmt}: corrupt or truncated gzip "
            f"({type(exc).__name__}: {exc})."
        ) from exc
    except pd.errors.ParserError as exc:
        fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if fields is not None:
            expected, line, saw = map(int, fields.groups())
            raise ragged_row(path, line, saw, expected) from exc
        raise SwevalError(
            f"{shown(path)}: cannot parse as {fmt} ({type(exc).__name__}: {str(exc).strip()})."
        ) from exc
    except OSError as exc:
        raise SwevalError(
            f"{shown(path)}: cannot parse as {fmt} ({type(exc).__name__}: {str(exc).strip()})."
        ) from exc
    except ImportError as exc:  # pandas' optional decompressors (zstandard for .zst)
        raise SwevalError(
            f"{shown(path)}: cannot read as {fmt}: its compression needs a package that is not "
            f"installed ({str(exc).splitlines()[0]}); decompress the file first, or use gzip."
        ) from exc
    except Exception as exc:  # pyarrow raises its own types for corrupt parquet
        raise SwevalError(
            f"{shown(path)}: cannot read as {fmt} ({type(exc).__name__}: {exc}).") from exc
    raise SwevalError(f"unknown format {fmt!r}: use auto, csv, parquet, jsonl or movielens.")


#: The first bytes of formats a file may hold whatever its name says.
_MAGIC = {b"PAR1": "parquet", b"\x1f\x8b": "gzip", b"PK\x03\x04": "zip"}


def _check_parquet_columns(path: Path) -> None:
    """Refuse a Parquet schema that names a column twice (pyarrow's own error is several lines
    about field references), as a CSV header that does.

    Raises:
        SwevalError: naming the column and its positions (1-based).
    """
    import pyarrow.parquet as pq

    listed = repeated_names(pq.read_schema(path).names)
    if listed:
        raise SwevalError(
            f"{shown(path)}: the Parquet schema names a column twice: {listed}. Rename one.")


def _content_hint(path: Path, fmt: str) -> str:
    """What the file's first bytes say it is, when that is not ``fmt``: "it is a Parquet file
    (use --format parquet)"; empty when they say nothing or agree."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            handle.seek(max(path.stat().st_size - 4, 0))
            tail = handle.read(4)
    except OSError:
        return ""
    found = next((kind for magic, kind in _MAGIC.items() if head.startswith(magic)), None)
    if found == "parquet" and tail != b"PAR1":  # Parquet ends with it too; a CSV column "PAR1…"
        found = None
    if found is None or found == fmt or (found == "gzip" and fmt != "parquet"):
        return ""  # gzip is read as such for text formats; it is their compression
    if found == "parquet":
        return "it is a Parquet file (its first bytes are PAR1): use --format parquet."
    if found == "gzip":
        return "it is gzip-compressed: decompress it, or name it .csv.gz for a gzipped CSV."
    return "it is a zip archive: extract the log from it."


def _read_jsonl(path: Path, *, text_columns: Sequence[str]) -> pd.DataFrame:
    """JSON Lines: each non-blank line one object. Values keep their JSON types (ids written as
    strings stay text, ``"01"`` is not ``1``); nothing is converted to dates here. An id that
    is a JSON object or array is refused: it names no user, item or policy by itself."""
    first = first_line(path).strip()
    if not first:
        raise SwevalError(f"{shown(path)}: the file is empty.")
    if first.startswith("["):
        raise SwevalError(f"{shown(path)}: {_json_array_problem(path, first)}")
    try:
        frame = pd.read_json(
            path, lines=True, dtype=False, encoding="utf-8-sig", compression=compression(path)
        )
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError):
            raise
        raise SwevalError(
            f"{shown(path)}: cannot parse as jsonl: {_jsonl_problem(path, exc)}.") from exc
    for column in text_columns:
        if column in frame.columns:
            nested = frame[column].map(lambda value: isinstance(value, dict | list)).to_numpy()
            if nested.any():
                raise SwevalError(
                    f"{shown(path)}: column {column!r} holds JSON objects or arrays (data rows "
                    f"{first_rows(np.flatnonzero(nested))}); ids must be strings or numbers: "
                    "flatten the field first."
                )
    return with_stripped_ids(frame, text_columns)


def _json_array_problem(path: Path, first: str) -> str:
    """What a JSON file whose first line opens an array is: lines that are arrays of values
    (no field names), or one array of objects, with the command that makes JSON Lines of it."""
    try:
        line = json.loads(first)
    except ValueError:
        line = None
    if isinstance(line, list) and not any(isinstance(value, dict) for value in line):
        return ("line 1 is a JSON array of values, without field names; JSON Lines needs one "
                "object per line, such as {\"user\": 34, \"item\": 17, \"timestamp\": 1600000656}.")
    stem = path.name.split(".")[0] or "log"
    target = f"{stem}.jsonl" if f"{stem}.jsonl" != path.name else f"{stem}-lines.jsonl"
    source = f"gunzip -c {path.name} | jq -c '.[]'" if is_gzip(path) else f"jq -c '.[]' {path.name}"
    return ("holds a JSON array; SW-EVAL reads JSON Lines, one object per line (convert it "
            f"with: {source} > {target}).")


def _jsonl_problem(path: Path, exc: ValueError) -> str:
    """What is wrong where, for pandas' message that names no line: the first line that is not
    a JSON object, or that holds an integer beyond 64 bits."""
    opener = gzip.open if is_gzip(path) else open

    def checked_int(text: str) -> int:
        value = int(text)
        if not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise OverflowError(text)
        return value

    with opener(path, "rt", encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line, parse_int=checked_int)
            except OverflowError as big:
                return (f"line {number} holds the integer {big} beyond 64 bits; write such ids "
                        "as strings")
            except json.JSONDecodeError as bad:
                return f"line {number} is not JSON ({bad.msg} at column {bad.colno})"
            if not isinstance(value, dict):
                return f"line {number} is a JSON {type(value).__name__}, not an object"
    return str(exc)


def _read_movielens(path: Path) -> pd.DataFrame:
    name = path.name.lower().removesuffix(".gz")
    first = first_line(path)
    if not first.strip():
        raise SwevalError(f"{shown(path)}: the file is empty.")
    if "::" in first or name == "ratings.dat":
        # ratings.dat: '::' separated; read as a one-character separator on a cleaned stream.
        try:
            frame = pd.read_csv(
                path, sep=":", header=None, engine="c", usecols=[0, 2, 4, 6],
                compression=compression(path),
            )
        except ValueError as exc:  # fewer than four '::' fields: no column 6 to use
            if isinstance(exc, UnicodeDecodeError):
                raise
            raise SwevalError(
                f"{shown(path)}: not MovieLens' ratings.dat layout "
                f"(user::item::rating::timestamp on every line; pandas: "
                f"{str(exc).splitlines()[0]}); name the file otherwise to read it as CSV."
            ) from exc
        frame.columns = _MOVIELENS_COLUMNS
        return frame
    if first.lower().startswith("userid"):
        frame = pd.read_csv(path, compression=compression(path), encoding="utf-8-sig")
        return frame.rename(
            columns={"userId": "user", "movieId": "item", "timestamp": "timestamp"}
        )
    sep = "\t" if "\t" in first else ","
    return pd.read_csv(
        path, sep=sep, header=None, names=_MOVIELENS_COLUMNS, compression=compression(path)
    )
