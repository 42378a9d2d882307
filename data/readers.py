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
anything else                       CSV/TSV with a header line (:mod:`data.text_files`)
==================================  =============================================================

Text formats may be gzip-compressed (``.gz``, or gzip content under any name) and may start
with a UTF-8 byte-order mark.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import logging
import lzma
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES  # the text pandas reads as missing

from sweval.data.errors import SwevalError, first_rows
from sweval.data.text_files import (
    check_file,
    check_header,
    compression,
    file_separator,
    first_line,
    is_gzip,
    repeated_names,
)

_log = logging.getLogger(__name__)

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


def _looks_like_movielens(path: Path) -> bool:
    try:
        header = first_line(path)
    except SwevalError:
        return False
    return header.strip().lower().startswith("userid,movieid")


def read_file(
    path: Path, fmt: Format, *, sep: str | None = None, text_columns: Sequence[str] = ()
) -> pd.DataFrame:
    """Read the raw frame of one log file in the given format (no validation beyond parsing).

    Args:
        path: the file.
        fmt: its format (not ``auto``: see :func:`detect_format`).
        sep: the CSV/TSV separator (``--sep``); None sniffs it.
        text_columns: the id columns. In CSV/TSV files they are read as the text written in the
            file, stripped of surrounding spaces: parsed as numbers, ``01`` and ``1`` would
            become the same id. :func:`data.ids.encode_ids` still orders a column numerically
            when every id spells an integer without padding.

    Raises:
        SwevalError: naming the file: unreadable, empty, corrupt, not UTF-8, unparsable, or
            another format than its name says (Parquet named .csv, gzip named .parquet).
    """
    check_file(path)
    hint = _content_hint(path, fmt)
    if hint:
        raise SwevalError(f"{path}: cannot read as {fmt}: {hint}")
    if sep is not None and fmt != "csv":
        raise SwevalError(f"{path}: --sep applies to CSV/TSV files; this file is read as {fmt}.")
    try:
        if fmt == "parquet":
            _check_parquet_columns(path)
            return _with_stripped_ids(pd.read_parquet(path), text_columns)
        if fmt == "movielens":
            return _read_movielens(path)
        if fmt == "jsonl":
            return _read_jsonl(path, text_columns=text_columns)
        if fmt == "csv":
            return _read_csv(path, sep=sep, text_columns=text_columns)
    except SwevalError:
        raise
    except pd.errors.EmptyDataError as exc:
        raise SwevalError(f"{path}: the file is empty.") from exc
    except PermissionError as exc:
        raise SwevalError(f"{path}: the file is not readable ({exc}).") from exc
    except UnicodeDecodeError as exc:
        raise SwevalError(
            f"{path}: cannot parse as {fmt}: not UTF-8 text ({exc}); convert the file to UTF-8."
        ) from exc
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise SwevalError(
            f"{path}: cannot parse as {fmt}: corrupt or truncated gzip ({type(exc).__name__}: "
            f"{exc})."
        ) from exc
    except pd.errors.ParserError as exc:
        fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if fields is not None:
            expected, line, saw = map(int, fields.groups())
            raise _ragged_row(path, line, saw, expected) from exc
        raise SwevalError(
            f"{path}: cannot parse as {fmt} ({type(exc).__name__}: {str(exc).strip()})."
        ) from exc
    except OSError as exc:
        raise SwevalError(
            f"{path}: cannot parse as {fmt} ({type(exc).__name__}: {str(exc).strip()})."
        ) from exc
    except ImportError as exc:  # pandas' optional decompressors (zstandard for .zst)
        raise SwevalError(
            f"{path}: cannot read as {fmt}: its compression needs a package that is not "
            f"installed ({str(exc).splitlines()[0]}); decompress the file first, or use gzip."
        ) from exc
    except Exception as exc:  # pyarrow raises its own types for corrupt parquet
        raise SwevalError(f"{path}: cannot read as {fmt} ({type(exc).__name__}: {exc}).") from exc
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
        raise SwevalError(f"{path}: the Parquet schema names a column twice: {listed}. Rename one.")


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


def _read_csv(path: Path, *, sep: str | None, text_columns: Sequence[str]) -> pd.DataFrame:
    """A CSV/TSV file with a header line. Id columns keep the text of their cells: only an empty
    (or blank) cell is missing there, as in JSON Lines and Parquet; ``NA`` or ``None`` is an id,
    with a warning (:func:`_warn_missing_markers`). Other columns read pandas' missing markers
    as missing. Refused: a row with more fields than the header (the values would shift
    between columns) and an id spanning lines (a stray quote swallowing the rows after it); a
    row with fewer fields is warned about (:func:`_warn_short_rows`)."""
    header = first_line(path)
    if not header.strip():
        raise SwevalError(f"{path}: the file is empty.")
    sep = file_separator(path, header, sep)
    check_header(path, header, sep)
    options: dict = {"sep": sep, "compression": compression(path), "encoding": "utf-8-sig"}
    columns = pd.read_csv(path, nrows=0, **options).columns
    frame = pd.read_csv(
        path, **options, dtype=dict.fromkeys(text_columns, str), keep_default_na=False,
        na_values={column: [""] if column in text_columns else sorted(STR_NA_VALUES)
                   for column in columns},
    )  # fmt: skip
    if not isinstance(frame.index, pd.RangeIndex):  # pandas took the surplus for an index
        n_header = len(frame.columns)
        raise _ragged_row(path, 2, n_header + frame.index.nlevels, n_header)
    if set(text_columns) <= set(frame.columns):  # else the missing-columns error says more
        _warn_short_rows(path, sep, header, frame)
    for column in text_columns:
        if column in frame.columns:
            frame[column] = _stripped(frame[column])
            _check_single_line(path, frame[column], column)
            _warn_missing_markers(path, frame[column], column)
    return frame


def _ragged_row(path: Path, line: int, saw: int, expected: int) -> SwevalError:
    """The error for a CSV line with more fields than the header. Pandas raises for such a line
    after the first data line; on the first one it takes the surplus fields, silently, for the
    row index (and every column shifts): both say the same here."""
    return SwevalError(
        f"{path}: line {line} (data row {line - 1}) has {saw} fields where the header has "
        f"{expected}: a separator inside a value (quote it) or a stray column."
    )


#: Rows with fewer fields than the header named in :func:`_warn_short_rows`' warning.
SHOWN_SHORT_ROWS = 3


def _warn_short_rows(path: Path, sep: str, header: str, frame: pd.DataFrame) -> None:
    """Warn about rows with fewer fields than the header, naming the first ones. Pandas fills a
    short row's missing fields from the right: harmless when an optional last field was left
    out, but when a value in the middle was, the values after it moved to other columns (a
    timestamp read as an item). Which one it was cannot be told, so the rows are kept.

    A header ending in a separator (an unnamed last column) expects one field less. The exact
    count is a second pass over the file, with the same quoting rules as pandas, made only when
    the last column's missing cells are not all explained by lines ending in a separator (an
    empty last field): never for a file without missing last cells.
    """
    missing_last = int(frame[frame.columns[-1]].isna().sum())
    if missing_last == 0:
        return
    expected = len(frame.columns) - (1 if header.rstrip("\r\n").endswith(sep) else 0)
    opener = _TEXT_OPENERS.get(_compression_of(path))
    if opener is None:
        return  # zip, zstd, ...: pandas reads them, this check does not
    if opener is open:
        ended = _lines_ending_in(path, sep.encode())
        if ended - int(header.rstrip("\r\n").endswith(sep)) == missing_last:
            return  # every missing last cell is an empty last field
    short: list[tuple[int, int, int]] = []
    n_short = 0
    limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)  # as pandas: no limit on a field's length
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, delimiter=sep)
            next(reader, None)  # the header
            data_row = 0
            for fields in reader:
                if not fields or not "".join(fields).strip():  # blank: pandas skips it too
                    continue
                data_row += 1
                if len(fields) < expected:
                    n_short += 1
                    if len(short) < SHOWN_SHORT_ROWS:
                        short.append((reader.line_num, data_row, len(fields)))
    finally:
        csv.field_size_limit(limit)
    if n_short:
        where = "; ".join(f"line {line} (data row {row}): {saw} of {expected}"
                          for line, row, saw in short)
        _log.warning(
            "%s: %d row(s) have fewer fields than the header (%s%s): pandas fills the missing "
            "fields from the right, so if a value in the middle was left out, the values after "
            "it moved to other columns. Check those rows.",
            path, n_short, where, "; ..." if n_short > len(short) else "",
        )


def _lines_ending_in(path: Path, marker: bytes, chunk: int = 1 << 24) -> int:
    """How many lines of the file end in ``marker`` (before ``\\n``, ``\\r\\n`` or the file's
    end), read in chunks."""
    count, tail = 0, b""
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            data = tail + block
            count += data.count(marker + b"\n") + data.count(marker + b"\r\n")
            tail = data[-len(marker) - 1:]  # a marker and its line end may straddle two chunks
            count -= tail.count(marker + b"\n") + tail.count(marker + b"\r\n")
    return count + tail.count(marker + b"\n") + tail.count(marker + b"\r\n") + int(
        tail.endswith(marker))


def _compression_of(path: Path) -> str:
    """``gzip`` (by name or content), ``bz2``, ``xz``, another suffix pandas decompresses, or
    ``none``."""
    if is_gzip(path):
        return "gzip"
    return {".bz2": "bz2", ".xz": "xz", ".zip": "zip", ".zst": "zstd", ".tar": "tar"}.get(
        path.suffix.lower(), "none")


_TEXT_OPENERS = {"none": open, "gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}


def _check_single_line(path: Path, values: pd.Series, column: str) -> None:
    """Refuse ids that span lines: a quote opened and never closed on its line swallows every
    row up to the next quote into one value."""
    spans = values.str.contains("\n", regex=False, na=False).to_numpy()
    if spans.any():
        row = int(np.flatnonzero(spans)[0])
        text = str(values.iloc[row])
        raise SwevalError(
            f"{path}: column {column!r} holds a value spanning {text.count(chr(10)) + 1} lines "
            f"(data rows {first_rows(np.flatnonzero(spans))}, starting {text[:30]!r}): a quote "
            "opened in that row and closed only lines later read the rows in between into it. "
            "Remove the stray quote, or close it."
        )


def _warn_missing_markers(path: Path, values: pd.Series, column: str) -> None:
    """Warn when an id column holds text that pandas and R write for a missing value (``NA``,
    ``None``, ``null``, ...): it is read as the id it spells."""
    marked = values.isin(STR_NA_VALUES - {""}).to_numpy()
    if marked.any():
        rows = np.flatnonzero(marked)
        spelled = sorted(set(values.iloc[rows].astype(str)))
        _log.warning(
            "%s: column %r holds %s in %d row(s) (data rows %s): read as id(s), as written; if "
            "they mark missing values, remove those rows from the file.",
            path, column, ", ".join(map(repr, spelled[:5])), len(rows), first_rows(rows),
        )


def _stripped(values: pd.Series) -> pd.Series:
    """Text cells without their surrounding spaces; a cell of spaces only is missing, like an
    empty one. Cells that are not text (numbers in JSON, missing values) are kept.

    A text column is returned as it is when no cell changes; an object column (text mixed with
    numbers, from JSON) is worked on its distinct values, which a column of ids repeats."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object)
    if isinstance(values.dtype, pd.StringDtype):  # vectorised (pyarrow's kernels)
        stripped = values.str.strip()
        blank = (stripped == "").fillna(False).to_numpy(dtype=bool)
        return values if stripped.equals(values) and not blank.any() else stripped.mask(blank)
    if values.dtype != object:
        return values
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    distinct = pd.Series(distinct, dtype=object)
    stripped = distinct.str.strip()  # missing for the values that are not text
    is_text = stripped.notna()
    new = distinct.where(~is_text, stripped).mask(is_text & (stripped == ""))
    changed = ~(new.isna() & distinct.isna()) & (new.isna() | (new != distinct))
    if not changed.any():
        return values
    taken = new.to_numpy(dtype=object)[codes]
    taken[codes < 0] = None
    return pd.Series(taken, index=values.index, name=values.name, dtype=object)


def _read_jsonl(path: Path, *, text_columns: Sequence[str]) -> pd.DataFrame:
    """JSON Lines: each non-blank line one object. Values keep their JSON types (ids written as
    strings stay text, ``"01"`` is not ``1``); nothing is converted to dates here. An id that
    is a JSON object or array is refused: it names no user, item or policy by itself."""
    first = first_line(path).strip()
    if not first:
        raise SwevalError(f"{path}: the file is empty.")
    if first.startswith("["):
        raise SwevalError(f"{path}: {_json_array_problem(path, first)}")
    try:
        frame = pd.read_json(
            path, lines=True, dtype=False, encoding="utf-8-sig", compression=compression(path)
        )
    except ValueError as exc:
        if isinstance(exc, UnicodeDecodeError):
            raise
        raise SwevalError(f"{path}: cannot parse as jsonl: {_jsonl_problem(path, exc)}.") from exc
    for column in text_columns:
        if column in frame.columns:
            nested = frame[column].map(lambda value: isinstance(value, dict | list)).to_numpy()
            if nested.any():
                raise SwevalError(
                    f"{path}: column {column!r} holds JSON objects or arrays (data rows "
                    f"{first_rows(np.flatnonzero(nested))}); ids must be strings or numbers: "
                    "flatten the field first."
                )
    return _with_stripped_ids(frame, text_columns)


def _with_stripped_ids(frame: pd.DataFrame, text_columns: Sequence[str]) -> pd.DataFrame:
    """The frame with its text ids stripped and blank ones missing (:func:`_stripped`), as CSV
    cells are read: ``" 19 "`` is the id ``19``, ``""`` names no user."""
    for column in text_columns:
        if column in frame.columns:
            frame[column] = _stripped(frame[column])
    return frame


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
        raise SwevalError(f"{path}: the file is empty.")
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
                f"{path}: not MovieLens' ratings.dat layout (user::item::rating::timestamp on "
                f"every line; pandas: {str(exc).splitlines()[0]}); name the file otherwise to "
                "read it as CSV."
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
