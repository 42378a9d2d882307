"""Raw ids to integer codes in the SPEC §3 tie-break order.

:func:`encode_ids` turns a column of raw user, item or policy ids into codes whose order is the
tie-break order of the ids (numeric order when every id spells an integer, string order
otherwise), so that "ties by item id ascending" is "ties by code ascending" downstream.

The code order decides ties in every ranking, and the data fingerprints hash raw ids, not
codes: this module is part of every unit's key (``evaluators/units/unit.py`` ``CORE_MODULES``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.errors import SwevalError, file_rows, first_rows

#: Floats hold every integer up to 2**53 exactly; beyond it distinct ids can merge.
_MAX_EXACT_FLOAT = 2**53


def encode_ids(
    values: pd.Series, *, source: str = "<frame>", column: str = "id"
) -> tuple[NDArray[np.int64], NDArray[np.generic]]:
    """Encode raw ids as codes ordered by the SPEC §3 tie-break order.

    Integer ids (including floats that are whole numbers, as pandas reads an int column with
    gaps, and strings spelling integers without padding, or whole floats such as ``"7.0"``,
    which are the integer) sort numerically; anything else sorts
    as strings. Hash-based (``pd.factorize``), then only the distinct ids are sorted. Integers
    beyond int64 (huge ids) are kept as exact Python integers, still in numeric order.

    Returns:
        (codes per row, raw id per code).

    Raises:
        SwevalError: float ids beyond 2**53, which floating point cannot hold
            exactly (distinct ids may already have merged when the file was parsed).
    """
    text = isinstance(values.dtype, pd.StringDtype)  # pyarrow-backed: factorized as it is,
    array = values if text else values.to_numpy()  # without a Python str per row
    if pd.api.types.is_bool_dtype(values.dtype):
        array = array.astype(np.int64)
    elif pd.api.types.is_float_dtype(values.dtype):
        inexact = np.flatnonzero(np.abs(array) >= _MAX_EXACT_FLOAT)
        if len(inexact):
            raise SwevalError(
                f"{source}: column {column!r} holds ids read as floating-point numbers "
                f"beyond 2**53 (data rows {first_rows(file_rows(values, inexact))}, e.g. "
                f"{array[inexact[0]]:.0f}), which cannot be told apart exactly: distinct ids "
                "may have merged. Store the ids as integers or as text (a floating-point "
                "column of ids usually comes from a missing or decimal value in it)."
            )
        whole = np.isfinite(array) & (array == np.round(array))
        if whole.all():
            array = array.astype(np.int64)
        else:
            array = values.astype(str).to_numpy()
    elif pd.api.types.is_integer_dtype(values.dtype):
        if pd.api.types.is_unsigned_integer_dtype(values.dtype) and len(array) and (
            array.max() > np.iinfo(np.int64).max
        ):
            array = np.array([int(v) for v in array], dtype=object)  # beyond int64: exact ints
        else:
            array = array.astype(np.int64)
    elif not text:
        array = values.astype(str).to_numpy(dtype=object)
    codes, uniques = pd.factorize(array, sort=False)
    uniques = np.asarray(uniques)
    if uniques.dtype == object:
        codes, uniques = _as_integers(codes, uniques)
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], uniques[order]


def _as_integers(
    codes: NDArray[np.int64], uniques: NDArray[np.object_]
) -> tuple[NDArray[np.int64], NDArray[np.generic]]:
    """The ids as integers when every one is an int or spells one: ``"7"`` (not ``"07"`` or
    ``"-0"``, which would merge with ``"7"`` and ``"0"`` as numbers) or a whole float ``"7.0"``
    (how pandas writes a float column of ids; ``"7"`` and ``"7.0"`` are then one id, as
    Parquet and JSON numbers read). Else unchanged.

    Returns:
        (codes per row, ids per code): int64 ids, or exact Python ints beyond int64.
    """
    as_str = pd.Series(uniques).astype(str)
    spelled = as_str.str.fullmatch(r"0|-?[1-9][0-9]*").to_numpy()
    if not spelled.all():
        floats = as_str.str.fullmatch(r"0\.0+|-?[1-9][0-9]*\.0+").to_numpy()
        if not (spelled | floats).all():
            return codes, uniques
        whole = np.array([int(text.partition(".")[0]) for text in as_str], dtype=object)
        merged, distinct = pd.factorize(whole, sort=False)
        codes, uniques = merged[codes], np.asarray(distinct, dtype=object)
    try:
        return codes, uniques.astype(np.int64)
    except OverflowError:  # ids beyond int64: exact Python ints sort numerically too
        return codes, np.array([int(v) for v in uniques], dtype=object)
