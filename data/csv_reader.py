"""Reading a CSV/TSV log file with a header line into a raw frame (see :mod:`data.readers`).

Id columns keep the text written in their cells, stripped of the padding around it
(:mod:`data.id_text`). Quoting follows RFC 4180: a quoted field may hold separators, doubled
quotes and line breaks. Refused: a row with more fields than the header and an id spanning lines
where the quoting breaks RFC 4180 (a stray quote); a row with fewer fields is warned about.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import logging
import lzma
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES  # the text pandas reads as missing

from sweval.data.epoch_precision import TimeUnit, check_scientific_epochs
from sweval.data.errors import SwevalError, first_rows
from sweval.data.id_text import stripped_ids, warn_missing_markers
from sweval.data.streams import shown
from sweval.data.text_files import check_header, compression, file_separator, first_line, is_gzip

_log = logging.getLogger(__name__)


def read_csv_file(
    path: Path,
    *,
    sep: str | None,
    text_columns: Sequence[str],
    time_column: str | None = None,
    time_unit: TimeUnit = "s",
) -> pd.DataFrame:
    """A CSV/TSV file with a header line. Id columns keep the text of their cells: only an empty
    (or blank) cell is missing there, as in JSON Lines and Parquet; ``NA`` or ``None`` is an id,
    with a warning (:func:`data.id_text.warn_missing_markers`). Other columns read pandas'
    missing markers as missing. Refused: a row with more fields than the header (the values
    would shift between columns) and an id spanning lines in a file whose quoting breaks RFC 4180
    (a stray quote swallowing the rows after it: :func:`_check_quoted_lines`); a row with fewer
    fields is warned about (:func:`_warn_short_rows`). A time column that pandas reads as floats
    is read again as written (:func:`_epochs_as_written`)."""
    header = first_line(path)
    if not header.strip():
        raise SwevalError(f"{shown(path)}: the file is empty.")
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
        raise ragged_row(path, 2, n_header + frame.index.nlevels, n_header)
    if set(text_columns) <= set(frame.columns):  # else the missing-columns error says more
        _warn_short_rows(path, sep, header, frame)
    for column in text_columns:
        if column in frame.columns:
            frame[column] = stripped_ids(frame[column])
            _check_quoted_lines(path, sep, frame[column], column)
            warn_missing_markers(path, frame[column], column)
    if time_column in frame.columns and pd.api.types.is_float_dtype(frame[time_column].dtype):
        frame[time_column] = _epochs_as_written(path, options, frame[time_column], time_unit)
    return frame


def _epochs_as_written(
    path: Path, options: dict, values: pd.Series, time_unit: TimeUnit
) -> pd.Series:
    """A time column that pandas read as floats, from the text in the file: pandas reads numbers
    in scientific notation and a column of whole numbers with a missing cell as floats, which
    hides the digits a spreadsheet cut (``1.69E+09``) and rounds epoch nanoseconds to 256 ns.

    The text is checked (:func:`data.epoch_precision.check_scientific_epochs`); when every value
    spells a whole number, the column becomes those integers, exactly (pandas' nullable
    ``Int64``); otherwise (decimal fractions) it stays as pandas read it. The file is read again
    only when the floats may hide something: a missing (or infinite) value, or a multiple of ten
    (cut digits leave zeros).

    Raises:
        SwevalError: scientific notation whose digits stop short of the time unit.
    """
    numbers = values.to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isfinite(numbers).all() and not (np.fmod(numbers, 10) == 0).any():
        return values
    column = str(values.name)
    text = pd.read_csv(path, **options, usecols=[column], dtype=str, keep_default_na=False,
                       na_values=sorted(STR_NA_VALUES))[column].str.strip()
    check_scientific_epochs(text, time_unit=time_unit, source=shown(path), column=column)
    if not (text.isna() | text.str.fullmatch(r"[+-]?\d+").fillna(False)).all():
        return values  # fractions: the floats are what the text says
    exact = pd.to_numeric(text, errors="coerce", dtype_backend="numpy_nullable")
    if pd.api.types.is_integer_dtype(exact.dtype) and (exact.isna() == values.isna()).all():
        return exact
    return values


def ragged_row(path: Path, line: int, saw: int, expected: int) -> SwevalError:
    """The error for a CSV line with more fields than the header. Pandas raises for such a line
    after the first data line; on the first one it takes the surplus fields, silently, for the
    row index (and every column shifts): both say the same here."""
    return SwevalError(
        f"{shown(path)}: line {line} (data row {line - 1}) has {saw} fields where the header has "
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
    if _compression_of(path) == "none":
        ended = _lines_ending_in(path, sep.encode())
        if ended - int(header.rstrip("\r\n").endswith(sep)) == missing_last:
            return  # every missing last cell is an empty last field
    short: list[tuple[int, int, int]] = []
    n_short = 0
    with _csv_rows(path, sep) as reader:
        if reader is None:
            return  # zip, zstd, ...: pandas reads them, this check does not
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
    if n_short:
        where = "; ".join(f"line {line} (data row {row}): {saw} of {expected}"
                          for line, row, saw in short)
        _log.warning(
            "%s: %d row(s) have fewer fields than the header (%s%s): pandas fills the missing "
            "fields from the right, so if a value in the middle was left out, the values after "
            "it moved to other columns. Check those rows.",
            shown(path), n_short, where, "; ..." if n_short > len(short) else "",
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


def _check_quoted_lines(path: Path, sep: str, values: pd.Series, column: str) -> None:
    """Ids that span lines: read as written when the file's quoting follows RFC 4180 (a quoted
    field may hold line breaks; a warning names the rows, as such ids are rare), refused when
    it does not: a quote opened and never closed on its line swallowed every row up to the next
    quote into one value, and that quote is then followed by more text than a separator.

    Raises:
        SwevalError: naming the column, the rows, the value's start and where the quoting
            breaks RFC 4180.
    """
    spans = values.str.contains("\n", regex=False, na=False).to_numpy()
    if not spans.any():
        return
    rows = np.flatnonzero(spans)
    text = str(values.iloc[int(rows[0])])
    problem = _quoting_problem(path, sep)
    if problem is None:
        _log.warning(
            "%s: column %r holds %d id(s) spanning lines (data rows %s, starting %r): read as "
            "written, quoted fields may hold line breaks (RFC 4180). If a quote was left open by "
            "mistake, fix the file.", shown(path), column, len(rows), first_rows(rows), text[:30],
        )
        return
    raise SwevalError(
        f"{shown(path)}: column {column!r} holds a value spanning {text.count(chr(10)) + 1} lines "
        f"(data rows {first_rows(rows)}, starting {text[:30]!r}): a quote opened in that row "
        f"and closed only lines later read the rows in between into it ({problem}). Remove the "
        "stray quote, or close it."
    )


def _quoting_problem(path: Path, sep: str) -> str | None:
    """Where the file's quoting breaks RFC 4180 (Python's csv module, strict: a closing quote
    followed by more than a separator or a line end, a quote left open at the end), or None
    when it does not. A compression this module cannot open counts as broken."""
    with _csv_rows(path, sep, strict=True) as reader:
        if reader is None:
            return "a compressed file whose quoting is not checked"
        try:
            for _ in reader:
                pass
        except csv.Error as exc:
            return f"line {reader.line_num}: {exc}"
    return None


@contextmanager
def _csv_rows(path: Path, sep: str, *, strict: bool = False) -> Iterator[Any]:
    """A :func:`csv.reader` over the decompressed file, with pandas' quoting and no limit on a
    field's length, or None for a compression it cannot open (zip, zstd, ...)."""
    opener = _TEXT_OPENERS.get(_compression_of(path))
    if opener is None:
        yield None
        return
    limit = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)  # as pandas: no limit on a field's length
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as handle:
            yield csv.reader(handle, delimiter=sep, strict=strict)
    finally:
        csv.field_size_limit(limit)
