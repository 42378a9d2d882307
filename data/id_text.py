"""Id cells as text: what is padding around an id, and the ids that look like missing values.

Every reader (CSV/TSV, JSON Lines, Parquet) passes its id columns (user, item, policy, basket)
through :func:`with_stripped_ids`, so an id reads the same whatever the format: ``" 19 "`` is the
id ``19`` and ``""`` names no one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES  # the text pandas reads as missing

from sweval.data.errors import first_rows

_log = logging.getLogger(__name__)


def with_stripped_ids(frame: pd.DataFrame, text_columns: Sequence[str]) -> pd.DataFrame:
    """The frame with its text ids stripped and blank ones missing (:func:`stripped_ids`), as CSV
    cells are read: ``" 19 "`` is the id ``19``, ``""`` names no user."""
    for column in text_columns:
        if column in frame.columns:
            frame[column] = stripped_ids(frame[column])
    return frame


def stripped_ids(values: pd.Series) -> pd.Series:
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
            path, column, ", ".join(map(repr, spelled[:5])), len(rows), first_rows(rows),
        )
