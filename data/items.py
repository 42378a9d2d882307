"""Item features (``--items FILE``): each item's categories, for the item-side metrics.

The file holds one row per item: its id in the first column, then categorical columns, in any
format the log reader reads (:func:`data.readers.read_file`: CSV/TSV, Parquet, JSON Lines,
gzip). ``--item-columns`` picks the columns (default: every column after the id). A value
holding ``|`` is several categories (MovieLens' ``Adventure|Animation``). Each category is
``column=value``, so equal values of two columns stay apart. An item of the log that the file
does not list has no category; an item of the file that the log does not hold is ignored.

``--items movielens-latest-small`` names the genres that come with the bundled log
(``movies.csv.gz``: ``movieId,title,genres``; the column ``genres``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.data.readers import detect_content_format, read_file

#: Item files that come with a bundled log: name -> (file, its default feature columns).
BUNDLED_ITEMS: dict[str, tuple[str, list[str]]] = {
    "movielens-latest-small": ("movielens-latest-small/movies.csv.gz", ["genres"]),
}
#: What separates several categories in one value.
MULTI = "|"


@dataclass(frozen=True)
class ItemFeatures:
    """The categories of the items of an item file, keyed by the id as text.

    Attributes:
        source: the file, as the user named it.
        ids: each listed item's id as text.
        categories: every category name (``column=value``), in first-seen order.
        matrix: (len(ids), len(categories)) 0/1 matrix: which categories each item has.
    """

    source: str
    ids: NDArray[np.object_]
    categories: list[str]
    matrix: sparse.csr_matrix
    _by_log: dict[int, sparse.csr_matrix] = field(default_factory=dict, repr=False,
                                                  compare=False)

    def for_log(self, log: InteractionLog) -> sparse.csr_matrix:
        """(log.n_items, n_categories) 0/1 matrix in ``log``'s item codes (cached per log):
        the categories of each item code, none for items the file does not list."""
        key = id(log)
        if key not in self._by_log:
            position = pd.Index(self.ids).get_indexer(
                np.array([str(raw) for raw in log.item_ids], dtype=object))
            listed = position >= 0
            select = sparse.csr_matrix(
                (np.ones(int(listed.sum())), (np.flatnonzero(listed), position[listed])),
                shape=(log.n_items, len(self.ids)))
            self._by_log[key] = (select @ self.matrix).tocsr()
        return self._by_log[key]


def items_source(name: str) -> tuple[Path, list[str]]:
    """The file ``--items`` names and its default columns (the bundled genres, or none: every
    column after the id)."""
    if name in BUNDLED_ITEMS:
        from sweval.data.loaders import BUNDLED_DIR

        relative, columns = BUNDLED_ITEMS[name]
        return BUNDLED_DIR / relative, columns
    return Path(name), []


def load_items(name: str, columns: Sequence[str] = ()) -> ItemFeatures:
    """Read ``--items``: the id column (the first) and the categorical ``columns``.

    Raises:
        SwevalError: an unreadable file, a column it does not have, no feature column, or an
            id listed twice (naming the rows).
    """
    path, default = items_source(name)
    if not path.exists():
        raise SwevalError(f"--items {name}: no such file (bundled: {', '.join(BUNDLED_ITEMS)}).")
    frame = read_file(path, detect_content_format(path))
    if frame.shape[1] < 2:
        raise SwevalError(f"{name}: an item file needs an id column and at least one "
                          f"categorical column; it has {list(frame.columns)}.")
    id_col = frame.columns[0]
    chosen = list(columns or default or frame.columns[1:])
    missing = [column for column in chosen if column not in frame.columns or column == id_col]
    if missing:
        raise SwevalError(f"{name}: --item-columns {','.join(missing)}: not a feature column "
                          f"of the file (its columns: {', '.join(map(str, frame.columns))}; "
                          f"the first, {id_col}, is the item id).")
    ids = frame[id_col].astype(str).str.strip()
    repeated = ids.duplicated(keep=False)
    if repeated.any():
        rows = (np.flatnonzero(repeated.to_numpy())[:5] + 2).tolist()
        raise SwevalError(f"{name}: column {id_col}: item ids listed twice, at lines {rows} "
                          "(line 1 is the header): one row per item.")
    return _features(name, ids.to_numpy(dtype=object), frame, chosen)


def _features(name: str, ids: NDArray[np.object_], frame: pd.DataFrame,
              columns: list[str]) -> ItemFeatures:
    """The 0/1 item × category matrix of ``columns`` (missing values: no category)."""
    index: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for column in columns:
        for row, value in enumerate(frame[column].tolist()):
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue
            for part in str(value).split(MULTI):
                part = part.strip()
                if part:
                    rows.append(row)
                    cols.append(index.setdefault(f"{column}={part}", len(index)))
    matrix = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)),
                               shape=(len(ids), len(index)))
    matrix.data[:] = 1.0  # a category written twice in one value is still one
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return ItemFeatures(source=name, ids=ids, categories=list(index), matrix=matrix)
