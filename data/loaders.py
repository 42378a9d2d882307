"""Reading interaction logs: one file, a directory or glob of part files, or a bundled dataset.

``load_log(path_or_name, ...)`` is the one entry point. ``path_or_name`` is

- the name of a bundled dataset (``movielens-latest-small``) or of a fetched one
  (``movielens-100k``, after ``sweval datasets fetch movielens-100k``: :mod:`data.datasets`);
- a file: CSV/TSV, JSON Lines, Parquet or a MovieLens layout (:mod:`data.readers`), gzip
  accepted;
- a directory, or a glob such as ``exports/part-*.parquet``, whose part files are read as one
  log (:mod:`data.parts`);
- ``-`` for standard input, or a pipe (``/dev/stdin``, ``<(zcat log.csv.gz)``): read once into
  a temporary copy (:mod:`data.streams`), its format from ``--format``, its name or its content.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from sweval.data.errors import SwevalError
from sweval.data.log import Dedup, InteractionLog, OnInvalid
from sweval.data.parts import is_glob, part_files, parts_format, read_parts
from sweval.data.readers import Format, detect_content_format, detect_format, read_file
from sweval.data.streams import is_stream, spooled, stream_name
from sweval.data.text_files import check_file

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
#: Bundled datasets: name -> (file relative to BUNDLED_DIR, format).
BUNDLED: dict[str, tuple[str, Format]] = {
    "movielens-latest-small": ("movielens-latest-small/ratings.csv.gz", "movielens"),
}


def resolve_source(path_or_name: str) -> tuple[Path, Format]:
    """Turn a bundled or fetched dataset's name or a path into (path, suggested format).

    Raises:
        SwevalError: the name of a dataset that is not fetched yet, saying how to fetch it.
    """
    from sweval.data.datasets import DATASETS, fetched_log

    if path_or_name in BUNDLED:
        relative, fmt = BUNDLED[path_or_name]
        return BUNDLED_DIR / relative, fmt
    if path_or_name in DATASETS:
        return fetched_log(path_or_name), DATASETS[path_or_name].log[1]
    return Path(path_or_name), "auto"


def source_files(path_or_name: str) -> list[Path]:
    """The file(s) ``path_or_name`` names: the bundled file, the file itself, the part files of
    a directory or glob, or the copy of a stream (standard input, a pipe: read here, on the
    first call in the process). A path that exists is never read as a glob.

    Raises:
        SwevalError: nothing there (naming the bundled datasets), no part file, an unreadable
            file, or standard input that is a terminal.
    """
    if is_stream(path_or_name):
        return [spooled(path_or_name)]
    path, _ = resolve_source(path_or_name)
    if is_glob(path_or_name) and not path.exists():
        return part_files(path, pattern=path_or_name)
    try:
        is_directory = stat.S_ISDIR(path.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        from sweval.data.datasets import DATASETS

        raise SwevalError(
            f"{path}: no such file or dataset (bundled: {', '.join(BUNDLED)}; fetched with "
            f"`sweval datasets fetch NAME`: {', '.join(DATASETS)})."
        ) from None
    except OSError:
        is_directory = False  # check_file names the problem
    if is_directory:
        return part_files(path)
    check_file(path)
    return [path]


def load_log(
    path_or_name: str | os.PathLike[str],
    *,
    fmt: Format = "auto",
    sep: str | None = None,
    user_col: str | None = None,
    item_col: str | None = None,
    time_col: str | None = None,
    policy_col: str | None = None,
    time_unit: Literal["s", "ms", "us", "ns"] = "s",
    dedup: Dedup = "first",
    on_invalid: OnInvalid = "error",
    basket_col: str | None = None,
) -> InteractionLog:
    """Read a log (file, part files, bundled dataset or standard input) and build the
    :class:`InteractionLog`.

    Column options default to ``user``/``item``/``timestamp`` for CSV, JSON Lines and Parquet
    and to the MovieLens layout for MovieLens files. ``sep`` forces the CSV/TSV separator. The
    log's ``source`` is ``path_or_name``, ``<stdin>`` for ``-``.

    Raises:
        SwevalError: the source is missing, unreadable, corrupt, empty or lacks columns; part
            files that differ in format or columns.
    """
    source = str(path_or_name)
    streamed = is_stream(source)
    files = source_files(source)
    path, suggested = resolve_source(source)
    detect = detect_format
    if streamed:  # files holds its copy, whose name may say nothing of its format
        path, source, detect = files[0], stream_name(source), detect_content_format
    fmt = suggested if fmt == "auto" and suggested != "auto" else fmt
    user_col, item_col, time_col = user_col or "user", item_col or "item", time_col or "timestamp"
    if files == [path] and (detect(path) if fmt == "auto" else fmt) == "movielens":
        # its reader names the columns user, item, rating, timestamp; ratings.csv's own header
        # says userId and movieId, which a user may well pass
        user_col = {"userId": "user"}.get(user_col, user_col)
        item_col = {"movieId": "item"}.get(item_col, item_col)
    id_cols = [user_col, item_col] + [col for col in (policy_col, basket_col) if col]
    reading = {"sep": sep, "text_columns": id_cols, "time_column": time_col, "time_unit": time_unit}
    options = {
        "user_col": user_col, "item_col": item_col, "time_col": time_col,
        "policy_col": policy_col, "time_unit": time_unit, "dedup": dedup,
        "on_invalid": on_invalid, "basket_col": basket_col,
    }
    if files == [path]:
        frame = read_file(path, detect(path) if fmt == "auto" else fmt, **reading)
        return InteractionLog.from_frame(frame, source=source, **options)
    fmt = parts_format(source, files, fmt)
    frame = read_parts(source, files, fmt, **reading)
    try:
        return InteractionLog.from_frame(frame, source=source, **options)
    except SwevalError:
        _blame_part(files, fmt, reading, options)
        raise


def _blame_part(files: Sequence[Path], fmt: Format, reading: dict, options: dict) -> None:
    """Raise the first part's own error, if a part alone fails: its message names that file and
    counts rows in it (the combined log's rows count across the parts, in path order).
    ``reading`` holds :func:`read_parts`' options, ``options`` those of the log."""
    for path in files:
        try:
            frame = read_parts(str(path), [path], fmt, **reading)
        except SwevalError:
            continue  # a part without data rows: nothing to blame
        InteractionLog.from_frame(frame, source=str(path), **options)
