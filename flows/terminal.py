"""The command line's rich consoles.

Rich markup is for SW-EVAL's own styling only: text that comes from the user, the data or a
library (paths, column names, algorithm labels, exception messages) is passed through
``rich.markup.escape`` where it is printed, and emoji codes are never replaced, so a plugin
``my_pkg:Boom:`` or a message ``needs [low > 0, ...]`` prints as written.

Two kinds of console:

- :func:`message_console`: lines of text (errors, notices); soft-wrapped, so their width never
  matters, and safe to make at import time (the warm process of ``sweval up`` imports the
  command modules once; each forked command then prints to its own client's streams).
- :func:`table_console`: tables and titles, made where they are printed. When none of the
  standard streams is a terminal (a CI log, a subprocess, ``> file 2>&1``) rich would lay them
  out in 80 columns and cut names and numbers; they get :data:`PRINT_WIDTH` columns instead.
  ``COLUMNS`` still wins, and on a terminal rich measures the terminal as usual.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console

#: Columns of a table printed off a terminal.
PRINT_WIDTH = 160


def message_console(*, stderr: bool = True, **options: Any) -> Console:
    """A console for lines of text: soft-wrapped, no emoji codes, no highlighting."""
    options = {"soft_wrap": True, "highlight": False, **options}
    return Console(stderr=stderr, emoji=False, **options)


def table_console(*, stderr: bool = False, **options: Any) -> Console:
    """A console for tables: no emoji codes; :data:`PRINT_WIDTH` columns off a terminal."""
    if "width" not in options and "COLUMNS" not in os.environ and not _any_terminal():
        options["width"] = PRINT_WIDTH
    return Console(stderr=stderr, emoji=False, **options)


def _any_terminal() -> bool:
    """Whether one of the standard streams is a terminal (the one rich would measure)."""
    for descriptor in (0, 1, 2):
        try:
            if os.isatty(descriptor):
                return True
        except OSError:
            continue
    return False
