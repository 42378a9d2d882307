"""Text log files as people have them: gzip or not, a UTF-8 byte-order mark or not, and the
field separator of CSV/TSV files.

Gzip is recognised by the ``.gz`` suffix or by the file's first two bytes (``1f 8b``), whatever
the file is called. A UTF-8 byte-order mark (what Excel writes before "CSV UTF-8") is read as
``utf-8-sig``: it is never part of the first column's name.

The separator of a CSV/TSV file is, unless forced with ``--sep``:

- a tab for ``.tsv`` and ``.tab`` files;
- otherwise the one of comma, tab, semicolon and pipe that the header line uses most (a comma
  on equal counts and in a one-column header).
"""

from __future__ import annotations

import csv
import gzip
import os
import stat
import zlib
from pathlib import Path

from sweval.data.errors import SwevalError
from sweval.data.streams import shown

#: Field separators a CSV header is checked for, the first of equal counts winning; the names
#: ``--sep`` accepts for each.
SEPARATORS: dict[str, tuple[str, ...]] = {
    ",": ("comma",),
    "\t": ("tab", "\\t"),
    ";": ("semicolon",),
    "|": ("pipe",),
}
#: Files whose separator is a tab by name (after any ``.gz``).
TAB_SUFFIXES = (".tsv", ".tab")
_GZIP_MAGIC = b"\x1f\x8b"
#: What a blank text file may hold: whitespace and the bytes of a UTF-8 byte-order mark.
_BLANK_BYTES = b" \t\r\n" + "\ufeff".encode()


def parse_separator(text: str) -> str:
    """The separator ``--sep`` names: the character itself or its name (``tab``, ``\\t``, ...).

    Raises:
        SwevalError: any other value, listing the accepted ones.
    """
    for sep, names in SEPARATORS.items():
        if text == sep or text.lower() in names:
            return sep
    accepted = ", ".join(f"{sep!r} ({names[0]})" for sep, names in SEPARATORS.items())
    raise SwevalError(f"--sep {text!r}: not a separator; use one of {accepted}.")


def check_file(path: Path) -> None:
    """That ``path`` is a readable file.

    Raises:
        SwevalError: missing, a directory, or unreadable.
    """
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise SwevalError(f"{shown(path)}: no such file.") from None
    except OSError as exc:  # e.g. a parent directory that may not be entered
        raise SwevalError(f"{shown(path)}: cannot access the file ({exc}).") from exc
    if stat.S_ISDIR(info.st_mode):
        raise SwevalError(f"{shown(path)}: is a directory; pass the log file itself.")
    if not os.access(path, os.R_OK):
        raise SwevalError(f"{shown(path)}: the file is not readable (permission denied).")


def is_gzip(path: Path) -> bool:
    """Gzip-compressed, by name or by content (the magic bytes), whatever the file is called."""
    if path.suffix == ".gz":
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == _GZIP_MAGIC
    except OSError:
        return False


def compression(path: Path) -> str | None:
    """pandas' ``compression`` for ``path``: gzip by content too, else inferred from the name."""
    return "gzip" if is_gzip(path) else "infer"


def first_line(path: Path) -> str:
    """The file's first line, decompressed, without a UTF-8 byte-order mark.

    Raises:
        SwevalError: unreadable file or corrupt gzip.
    """
    check_file(path)
    opener = gzip.open if is_gzip(path) else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", errors="replace") as handle:
            return handle.readline()
    except PermissionError as exc:
        raise SwevalError(f"{shown(path)}: the file is not readable ({exc}).") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise SwevalError(
            f"{shown(path)}: cannot read the file ({exc}); is it a corrupt gzip?") from exc


def is_blank(path: Path, chunk: int = 1 << 16) -> bool:
    """The file holds nothing but whitespace once decompressed (a 0-byte file, an empty gzip).
    Reads only until the first other character.

    Raises:
        SwevalError: unreadable file or corrupt gzip.
    """
    check_file(path)
    opener = gzip.open if is_gzip(path) else open
    try:
        with opener(path, "rb") as handle:
            while block := handle.read(chunk):
                if block.strip(_BLANK_BYTES):
                    return False
    except PermissionError as exc:
        raise SwevalError(f"{shown(path)}: the file is not readable ({exc}).") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise SwevalError(
            f"{shown(path)}: cannot read the file ({exc}); is it a corrupt gzip?") from exc
    return True


def header_separator(header: str) -> str:
    """The separator of a CSV/TSV header line: the one of :data:`SEPARATORS` it uses most (a
    comma when it has none: a one-column file)."""
    return max(SEPARATORS, key=header.count)


def file_separator(path: Path, header: str, forced: str | None) -> str:
    """The separator of the CSV/TSV file ``path`` whose first line is ``header`` (module
    docstring); ``forced`` (``--sep``) wins.

    Raises:
        SwevalError: ``forced`` does not occur in a header that another separator splits into
            several columns (the file would be read as one column).
    """
    if forced is None:
        if path.name.lower().removesuffix(".gz").endswith(TAB_SUFFIXES):
            return "\t"
        return header_separator(header)
    found = header_separator(header)
    if forced not in header and found in header:
        raise SwevalError(
            f"{shown(path)}: --sep {forced!r} does not occur in the header, which is separated by "
            f"{found!r} ({header.strip()!r}); drop --sep or pass --sep {found!r}."
        )
    return forced


def check_header(path: Path, header: str, sep: str) -> None:
    """Refuse a header that names a column twice: pandas would read the second as ``name.1``
    and the run would silently use the first.

    Raises:
        SwevalError: naming the file, the column and its positions (1-based).
    """
    names = [name.strip() for name in next(csv.reader([header.rstrip("\r\n")], delimiter=sep))]
    listed = repeated_names(names)
    if listed:
        raise SwevalError(f"{shown(path)}: the header names a column twice: {listed}. Rename one.")


def repeated_names(names: list[str]) -> str | None:
    """The column names given more than once, with their positions (1-based), for messages:
    ``'user' at columns 1, 4``; None when every name is given once."""
    repeated = {name: [i + 1 for i, other in enumerate(names) if other == name]
                for name in names if names.count(name) > 1}
    return "; ".join(f"{name!r} at columns {', '.join(map(str, where))}"
                     for name, where in repeated.items()) or None
