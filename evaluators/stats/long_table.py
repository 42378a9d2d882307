"""The long table (``results.csv``, ``compare.csv``) as the statistics read it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd


def used_values(results: pd.DataFrame) -> pd.DataFrame:
    """The non-skipped values, as ``results.csv`` writes them (10 significant digits): the
    intervals and tests are then exactly reproducible from the file."""
    used = results[~results["skipped"] & results["value"].notna()]
    written = [float(f"{value:.10g}") for value in used["value"]]
    return used.assign(k=used["k"].astype("Int64"), value=written)


def groups(frame: pd.DataFrame, keys: list[str]) -> Any:
    return frame.groupby(keys, dropna=False, sort=False)


def ordered(names: Sequence[str], order: Sequence[str] | None) -> list[str]:
    rank = {name: i for i, name in enumerate(order or [])}
    return sorted(names, key=lambda name: (rank.get(name, len(rank)), list(names).index(name)))


def blocks(used: pd.DataFrame, keys: list[str], columns: list[str]
            ) -> list[tuple[tuple[Any, ...], pd.DataFrame]]:
    """``used`` in one wide table (rows: fold, columns: ``columns``' values) per value of
    ``keys``, in order of appearance (one reshape for all, not one pivot per key)."""
    if used.empty:
        return []
    wide = used.set_index([*keys, "fold", *columns])["value"].unstack(columns)
    found = dict(iter(wide.groupby(level=list(range(len(keys))), sort=False, dropna=False)))
    order = used[keys].drop_duplicates().itertuples(index=False, name=None)
    return [(key, found[key].droplevel(list(range(len(keys))))) for key in map(tuple, order)
            if key in found]


def rows_of(frame: pd.DataFrame, keys: list[str], key: tuple[Any, ...]) -> Any:
    """The rows of ``frame`` whose ``keys`` are ``key`` (NaN matching NaN)."""
    mask = np.ones(len(frame), dtype=bool)
    for column, value in zip(keys, key, strict=True):
        mask &= (frame[column].isna() if pd.isna(value) else frame[column] == value).to_numpy(
            dtype=bool, na_value=False)
    return mask
