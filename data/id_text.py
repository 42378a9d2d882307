"""Id cells as text: what is padding around an id, and the ids that look like missing values.

Every reader (CSV/TSV, JSON Lines, Parquet, MovieLens) passes its id columns (user, item, policy,
basket) through :func:`with_stripped_ids`, so an id reads the same whatever the format:
``" 19 "`` is the id ``19`` and ``""`` names no one. Padding (:data:`PADDING`) is Unicode's white
space, not only ASCII spaces (a no-break space U+00A0 pasted from a web page, the ideographic
space U+3000), and the invisible characters that copying text leaves around it (a zero-width
space U+200B, a byte-order mark U+FEFF inside a file, direction marks): ``"u1\u00a0"``,
``"\u200bu1"`` and ``"u1"`` are one user, not three. Characters inside an id are kept.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES  # the text pandas reads as missing

from sweval.data.errors import first_rows
from sweval.data.streams import shown

_log = logging.getLogger(__name__)

#: Invisible format characters that are never a meaningful first or last character of an id.
#: Not here: variation selectors and tag characters, which end emoji sequences ("❤️", flags).
_INVISIBLE = (
    "\u00ad"  # soft hyphen
    "\u061c"  # Arabic letter mark
    "\u180e"  # Mongolian vowel separator (white space before Unicode 6.3)
    "\u200b\u200c\u200d"  # zero-width space, non-joiner and joiner
    "\u200e\u200f"  # left-to-right and right-to-left marks
    "\u202a\u202b\u202c\u202d\u202e"  # bidirectional embeddings and overrides
    "\u2060"  # word joiner
    "\u2066\u2067\u2068\u2069"  # bidirectional isolates
    "\ufeff"  # byte-order mark (zero-width no-break space)
)
#: The characters stripped around ids: every character Python counts as white space (what
#: ``str.strip()`` removes: ASCII spaces, tabs and line ends, U+00A0, U+2007, U+202F, U+3000, ...;
#: all of them lie below U+10000), and :data:`_INVISIBLE`.
PADDING = "".join(char for char in map(chr, range(0x10000)) if char.isspace()) + _INVISIBLE


def with_stripped_ids(frame: pd.DataFrame, text_columns: Sequence[str]) -> pd.DataFrame:
    """The frame with its text ids stripped and blank ones missing (:func:`stripped_ids`), as CSV
    cells are read: ``" 19 "`` is the id ``19``, ``""`` names no user."""
    for column in text_columns:
        if column in frame.columns:
            frame[column] = stripped_ids(frame[column])
    return frame


def stripped_ids(values: pd.Series) -> pd.Series:
    """Text cells without the padding around them (:data:`PADDING`); a cell of padding only is
    missing, like an empty one. Cells that are not text (numbers in JSON, missing values) are
    kept.

    A text column is returned as it is when no cell changes; an object column (text mixed with
    numbers, from JSON) is worked on its distinct values, which a column of ids repeats."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object)
    if isinstance(values.dtype, pd.StringDtype):  # vectorised (pyarrow's kernels)
        stripped = values.str.strip(PADDING)
        blank = (stripped == "").fillna(False).to_numpy(dtype=bool)
        return values if stripped.equals(values) and not blank.any() else stripped.mask(blank)
    if values.dtype != object:
        return values
    codes, distinct = pd.factorize(values, use_na_sentinel=True)
    distinct = pd.Series(distinct, dtype=object)
    stripped = distinct.str.strip(PADDING)  # missing for the values that are not text
    is_text = stripped.notna()
    new = distinct.where(~is_text, stripped).mask(is_text & (stripped == ""))
    changed = ~(new.isna() & distinct.isna()) & (new.isna() | (new != distinct))
    if not changed.any():
        return values
    taken = new.to_numpy(dtype=object)[codes]
    taken[codes < 0] = None
    return pd.Series(taken, index=values.index, name=values.name, dtype=object)


def warn_missing_markers(path: Path, values: pd.Series, column: str) -> None:
    """Warn when an id column holds text that pandas and R write for a missing value (``NA``,
    ``None``, ``null``, ...): it is read as the id it spells."""
    marked = values.isin(STR_NA_VALUES - {""}).to_numpy()
    if marked.any():
        rows = np.flatnonzero(marked)
        spelled = sorted(set(values.iloc[rows].astype(str)))
        _log.warning(
            "%s: column %r holds %s in %d row(s) (data rows %s): read as id(s), as written; if "
            "they mark missing values, remove those rows from the file.",
            shown(path), column, ", ".join(map(repr, spelled[:5])), len(rows), first_rows(rows),
        )
