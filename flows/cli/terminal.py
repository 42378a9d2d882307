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

In a narrow console the labels give way, never the numbers: a column of labels folds
(``overflow="fold"``), a column of numbers is ``no_wrap``; a label heading numbers is a
:func:`folding_header`, and a note among numbers a :func:`note_cell` in a column no wider than
its numbers (:func:`widest_line`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

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


def folding_header(label: str) -> Text:
    """``label`` (plain text, not markup) as a column header that folds onto more lines when its
    column is narrower: the cells below keep the column's overflow, so numbers never fold."""
    return Text(label, overflow="fold")


def note_cell(markup: str) -> Text:
    """Rich ``markup`` as a cell that wraps, folding a word wider than its column, also in a
    ``no_wrap`` column of numbers: with the column's ``max_width`` at :func:`widest_line` of the
    numbers, a long note there takes their width instead of widening the column."""
    text = Text.from_markup(markup, emoji=False, overflow="fold")
    text.no_wrap = False
    return text


def widest_line(markups: Iterable[str]) -> int:
    """The width, in terminal cells, of the widest line of the rich ``markups``."""
    return max((cell_len(line) for markup in markups
                for line in Text.from_markup(markup, emoji=False).plain.split("\n")), default=0)
