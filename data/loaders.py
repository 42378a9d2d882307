"""Reading interaction logs from files: CSV/TSV, Parquet and the MovieLens formats.

``load_log(path_or_name, ...)`` is the one entry point. ``path_or_name`` is a file path (gzip
accepted) or the name of a bundled dataset (``movielens-latest-small``). The MovieLens layouts
are recognised by file name with ``--format auto`` or forced with ``--format movielens``:

==================  ===========================================  ==========
file                layout                                       header
==================  ===========================================  ==========
``u.data``          ``user item rating timestamp``, tab          no
``ratings.dat``     ``user::item::rating::timestamp``            no
``ratings.csv``     ``userId,movieId,rating,timestamp``          yes
==================  ===========================================  ==========
"""

from __future__ import annotations

import csv
import gzip
import logging
import os
import stat
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import Dedup, InteractionLog, OnInvalid

_log = logging.getLogger(__name__)

Format = Literal["auto", "csv", "parquet", "movielens"]

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
#: Bundled datasets: name -> (file relative to BUNDLED_DIR, format).
BUNDLED: dict[str, tuple[str, Format]] = {
    "movielens-latest-small": ("movielens-latest-small/ratings.csv.gz", "movielens"),
}

_MOVIELENS_COLUMNS = ["user", "item", "rating", "timestamp"]
_GZIP_MAGIC = b"\x1f\x8b"


def resolve_source(path_or_name: str) -> tuple[Path, Format]:
    """Turn a bundled dataset name or a path into (path, suggested format)."""
    if path_or_name in BUNDLED:
        relative, fmt = BUNDLED[path_or_name]
        return BUNDLED_DIR / relative, fmt
    return Path(path_or_name), "auto"


def load_log(
    path_or_name: str | os.PathLike[str],
    *,
    fmt: Format = "auto",
    user_col: str | None = None,
    item_col: str | None = None,
    time_col: str | None = None,
    policy_col: str | None = None,
    time_unit: Literal["s", "ms"] = "s",
    dedup: Dedup = "first",
    on_invalid: OnInvalid = "error",
) -> InteractionLog:
    """Read a log file (or a bundled dataset) and build the :class:`InteractionLog`.

    Column options default to ``user``/``item``/``timestamp`` for CSV and Parquet and to the
    MovieLens layout for MovieLens files.

    Raises:
        SwevalError: the file is missing, unreadable, corrupt, empty or lacks columns.
    """
    path, suggested = resolve_source(str(path_or_name))
    if fmt == "auto":
        fmt = suggested if suggested != "auto" else detect_format(path)
    user_col, item_col, time_col = user_col or "user", item_col or "item", time_col or "timestamp"
    id_cols = [user_col, item_col] + ([policy_col] if policy_col else [])
    frame = read_frame(path, fmt, text_columns=id_cols)
    return InteractionLog.from_frame(
        frame,
        user_col=user_col,
        item_col=item_col,
        time_col=time_col,
        policy_col=policy_col,
        time_unit=time_unit,
        dedup=dedup,
        on_invalid=on_invalid,
        source=str(path_or_name),
    )


def detect_format(path: Path) -> Format:
    """Guess the format from the file name: MovieLens names, ``.parquet``, else CSV."""
    name = path.name.lower().removesuffix(".gz")
    if name in ("u.data", "ratings.dat") or (name == "ratings.csv" and _looks_like_movielens(path)):
        return "movielens"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    return "csv"


def _looks_like_movielens(path: Path) -> bool:
    try:
        header = _first_line(path)
    except SwevalError:
        return False
    return header.strip().lower().startswith("userid,movieid")


def check_file(path: Path) -> None:
    """That ``path`` is a readable file.

    Raises:
        SwevalError: missing (naming the bundled datasets), a directory, or unreadable.
    """
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise SwevalError(
            f"{path}: no such file or bundled dataset (bundled: {', '.join(BUNDLED)})."
        ) from None
    except OSError as exc:  # e.g. a parent directory that may not be entered
        raise SwevalError(f"{path}: cannot access the file ({exc}).") from exc
    if stat.S_ISDIR(info.st_mode):
        raise SwevalError(f"{path}: is a directory; pass the log file itself.")
    if not os.access(path, os.R_OK):
        raise SwevalError(f"{path}: the file is not readable (permission denied).")


def _is_gzip(path: Path) -> bool:
    """Gzip-compressed, by name or by content (the magic bytes), whatever the file is called."""
    if path.suffix == ".gz":
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(2) == _GZIP_MAGIC
    except OSError:
        return False


def _first_line(path: Path) -> str:
    check_file(path)
    opener = gzip.open if _is_gzip(path) else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
            return handle.readline()
    except PermissionError as exc:
        raise SwevalError(f"{path}: the file is not readable ({exc}).") from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise SwevalError(f"{path}: cannot read the file ({exc}); is it a corrupt gzip?") from exc


#: Field separators a CSV header is checked for, the first of equal counts winning.
SEPARATORS = (",", "\t", ";", "|")


def header_separator(header: str) -> str:
    """The separator of a CSV/TSV file: the one of :data:`SEPARATORS` its header line uses most
    (a comma when it has none: a one-column file)."""
    return max(SEPARATORS, key=header.count)


def check_header(path: Path, header: str, sep: str) -> None:
    """Refuse a header that names a column twice: pandas would read the second as ``name.1``
    and the run would silently use the first.

    Raises:
        SwevalError: naming the file, the column and its positions (1-based).
    """
    names = [name.strip() for name in next(csv.reader([header.rstrip("\r\n")], delimiter=sep))]
    repeated = {name: [i + 1 for i, other in enumerate(names) if other == name]
                for name in names if names.count(name) > 1}
    if repeated:
        listed = "; ".join(f"{name!r} at columns {', '.join(map(str, where))}"
                           for name, where in repeated.items())
        raise SwevalError(f"{path}: the header names a column twice: {listed}. Rename one.")


def read_frame(path: Path, fmt: Format, *, text_columns: Sequence[str] = ()) -> pd.DataFrame:
    """Read the raw frame of a log file in the given format (no validation beyond parsing).

    In CSV/TSV files the ``text_columns`` (the id columns) are read as the text written in the
    file, stripped of surrounding spaces: parsed as numbers, ``01`` and ``1`` would become the
    same id. :func:`data.ids.encode_ids` still orders a column numerically when every id spells
    an integer without padding.
    """
    check_file(path)
    try:
        if fmt == "parquet":
            return pd.read_parquet(path)
        if fmt == "movielens":
            return _read_movielens(path)
        if fmt == "csv":
            first = _first_line(path)
            if not first.strip():
                raise SwevalError(f"{path}: the file is empty.")
            sep = header_separator(first)
            check_header(path, first, sep)
            frame = pd.read_csv(
                path, sep=sep, compression=_compression(path),
                dtype=dict.fromkeys(text_columns, str),
            )  # fmt: skip
            for column in text_columns:
                if column in frame.columns:
                    frame[column] = _stripped(frame[column])
            return frame
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
    except (OSError, pd.errors.ParserError) as exc:
        raise SwevalError(
            f"{path}: cannot parse as {fmt} ({type(exc).__name__}: {str(exc).strip()})."
        ) from exc
    except Exception as exc:  # pyarrow raises its own types for corrupt parquet
        raise SwevalError(f"{path}: cannot read as {fmt} ({type(exc).__name__}: {exc}).") from exc
    raise SwevalError(f"unknown format {fmt!r}: use auto, csv, parquet or movielens.")


def _stripped(values: pd.Series) -> pd.Series:
    """Cells without their surrounding spaces; a cell of spaces only is missing, like an empty one."""
    stripped = values.str.strip()
    return stripped.mask(stripped == "")


def _compression(path: Path) -> str | None:
    """pandas' ``compression`` for ``path``: gzip by content too, else inferred from the name."""
    return "gzip" if _is_gzip(path) else "infer"


def _read_movielens(path: Path) -> pd.DataFrame:
    name = path.name.lower().removesuffix(".gz")
    first = _first_line(path)
    if not first.strip():
        raise SwevalError(f"{path}: the file is empty.")
    if "::" in first or name == "ratings.dat":
        # ratings.dat: '::' separated; read as a one-character separator on a cleaned stream.
        frame = pd.read_csv(
            path, sep=":", header=None, engine="c", usecols=[0, 2, 4, 6],
            compression=_compression(path),
        )
        frame.columns = _MOVIELENS_COLUMNS
        return frame
    if first.lower().startswith("userid"):
        frame = pd.read_csv(path, compression=_compression(path))
        return frame.rename(
            columns={"userId": "user", "movieId": "item", "timestamp": "timestamp"}
        )
    sep = "\t" if "\t" in first else ","
    return pd.read_csv(
        path, sep=sep, header=None, names=_MOVIELENS_COLUMNS, compression=_compression(path)
    )
