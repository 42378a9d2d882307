"""Labels in the terminal's tables: a long one (a variant with several parameters, a plugin's
import path) is shown by a short name and a letter, and a legend under the tables spells it out,
so that a dozen configurations fit 80 columns without labels folding mid-word::

    │ item-knn ·a │ 0.0423 -66% │ ...        ·a = item-knn(n_neighbors=200,weighting="cosine")
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: The label column's width where the console's is not known.
LABEL_WIDTH = 24


def label_room(console_width: int, n_number_columns: int) -> int:
    """The width left to the label column of a table with ``n_number_columns`` columns of
    numbers (``0.0423 -66%`` and their borders: 14 cells each) and the folds column (8)."""
    return max(8, console_width - 14 * n_number_columns - 8 - 4)


def short_labels(labels: list[str], width: int = LABEL_WIDTH) -> dict[str, str]:
    """What a table ``width`` cells wide for labels shows for each: the label itself when it
    fits; else broken before its parameters and after each comma (``svd`` / ``(factors=128)``)
    when every piece fits; else its algorithm's short name and a letter (``item-knn ·a``),
    which the legend (:func:`legend_lines`) spells out. The short name is the registry name,
    or the class name of an import path (``my_pkg.models:CoVisit`` → ``CoVisit``)."""
    shown, letters = {}, iter("abcdefghijklmnopqrstuvwxyz")
    for label in labels:
        if len(label) <= width:
            shown[label] = label
            continue
        lines = _broken(label, width)
        if lines is not None:
            shown[label] = "\n".join(lines)
            continue
        base = re.split(r"[(\[]", label, maxsplit=1)[0]
        base = re.split(r"[:.]", base)[-1] or base
        letter = next(letters, None)
        shown[label] = label if letter is None else f"{base[:max(1, width - 3)]} ·{letter}"
    return shown


def _broken(label: str, width: int) -> list[str] | None:
    """``label`` in lines of at most ``width``, broken before ``(`` or ``[`` and after the
    commas between parameters; None when a piece is wider."""
    pieces = re.findall(r"[^(\[,]+,?|[(\[][^,]*,?", label)
    if "".join(pieces) != label or any(len(piece) > width for piece in pieces):
        return None
    lines = [pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + len(piece) <= width and not piece.startswith(("(", "[")):
            lines[-1] += piece
        else:
            lines.append(piece)
    return lines


def legend_lines(shown: Mapping[str, str]) -> list[str]:
    """``·a = my_pkg.models:CoVisit(days=1)``: one line per label shown by a short name."""
    return [f"{short.rsplit(' ', 1)[1]} = {label}" for label, short in shown.items()
            if short != label and " ·" in short]
