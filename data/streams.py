"""Logs that can be read only once: standard input (``--data -``), a named pipe, ``/dev/stdin``
or a process substitution (``--data <(zcat log.csv.gz)``, which the shell passes as
``/dev/fd/63``).

A log file is opened several times while it is read (its first bytes and line, pandas, the checks
of :mod:`data.csv_reader`), but a pipe gives its bytes once and cannot seek. :func:`spooled`
therefore copies such a stream, once per process, into a temporary file deleted when the process
exits, and every read of that stream in the process (a second load of the same ``--data``
included) reads the copy. Its content decides as for a file: gzip is recognised by its first
bytes. Messages name the stream as it was given, ``<stdin>`` for ``-``, never the copy
(:func:`shown`).

Another process (a Dask worker that loads the data itself) cannot read the stream again: such a
run needs a file.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from sweval.data.errors import SwevalError

#: ``--data -``: standard input.
STDIN = "-"
#: How messages and the log's ``source`` name standard input.
STDIN_NAME = "<stdin>"
#: The copy of each stream read in this process, by the text that named the stream.
_COPIES: dict[str, Path] = {}
#: The name messages give each copy: the stream's.
_NAMES: dict[Path, str] = {}


def is_stream(path_or_name: str) -> bool:
    """``-``, or a path to a pipe, a character device or a socket: nothing to read twice."""
    if path_or_name == STDIN:
        return True
    try:
        mode = os.stat(path_or_name).st_mode
    except (OSError, ValueError):  # missing, or a name no file can have: not a stream
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def stream_name(path_or_name: str) -> str:
    """How messages name a stream: ``<stdin>`` for ``-``, else the path as given."""
    return STDIN_NAME if path_or_name == STDIN else path_or_name


def shown(path: Path) -> str:
    """How messages name ``path``: the stream it is the copy of, else the path itself."""
    return _NAMES.get(path, str(path))


def spooled(path_or_name: str) -> Path:
    """The copy of the stream ``path_or_name`` (see :func:`is_stream`), read to its end on the
    first call in this process and named after it (``stdin`` for ``-``), so that a name such as
    ``events.jsonl.gz`` still says the format.

    Raises:
        SwevalError: standard input is a terminal (nothing piped in) or closed; reading the
            stream or writing the copy fails.
    """
    if path_or_name in _COPIES:
        return _COPIES[path_or_name]
    name = stream_name(path_or_name)
    directory = Path(tempfile.mkdtemp(prefix="sweval-stream-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    copy = directory / ("stdin" if path_or_name == STDIN else Path(path_or_name).name)
    try:
        with _opened(path_or_name) as source, open(copy, "wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
    except OSError as exc:
        raise SwevalError(f"{name}: cannot read the stream ({exc}).") from exc
    _COPIES[path_or_name] = copy
    _NAMES[copy] = name
    return copy


@contextlib.contextmanager
def _opened(path_or_name: str) -> Iterator[BinaryIO]:
    """The stream's bytes: standard input's (left open), or the opened path's.

    Raises:
        SwevalError: standard input is closed, or a terminal: a person would have to type the
            log, and the command would seem to hang.
    """
    if path_or_name != STDIN:
        with open(path_or_name, "rb") as handle:
            yield handle
        return
    if sys.stdin is None or sys.stdin.closed:
        raise SwevalError(f"--data {STDIN}: standard input is closed; pipe the log in.")
    if sys.stdin.isatty():
        raise SwevalError(
            f"--data {STDIN} reads the log from standard input, which is a terminal here: pipe "
            "the log in (cat log.csv | sweval run --data - ...) or pass its path."
        )
    yield sys.stdin.buffer
