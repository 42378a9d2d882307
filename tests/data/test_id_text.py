"""Ids as text: Unicode white space and invisible characters around an id are padding, in every
reader (the catalogue's ``ids-unicode-padding-*`` cases read whole files)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from sweval.data.id_text import PADDING, stripped_ids
from sweval.data.loaders import load_log


def test_padding_holds_every_character_python_counts_as_white_space() -> None:
    every = {chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()}
    assert every <= set(PADDING)
    assert {"\u00a0", "\u2007", "\u202f", "\u3000", "\u200b", "\ufeff"} <= set(PADDING)


@pytest.mark.parametrize("dtype", ["str", object, "category"])
def test_padding_goes_and_what_lies_inside_an_id_stays(dtype: object) -> None:
    values = pd.Series(["\u200bu1\u00a0", "u\u00a01", "\ufeff\u3000u1", "\u200b", "x\u200dy"],
                       dtype=dtype)
    assert stripped_ids(values).tolist()[:3] == ["u1", "u\u00a01", "u1"]
    assert pd.isna(stripped_ids(values).iloc[3])  # padding only: missing, like an empty cell
    assert stripped_ids(values).iloc[4] == "x\u200dy"


def test_emoji_sequences_keep_their_last_characters() -> None:
    """A variation selector (❤️) or the tag characters of a flag end an emoji: not padding."""
    heart = "\u2764\ufe0f"
    flag = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    assert stripped_ids(pd.Series([heart, flag, "\u2764"])).tolist() == [heart, flag, "\u2764"]


def test_movielens_ids_lose_their_padding_too(tmp_path: Path) -> None:
    path = tmp_path / "ratings.csv"
    path.write_text("userId,movieId,rating,timestamp\n1,10,4.0,1704067200\n"
                    "1\u00a0,\u200b20,3.0,1704067201\n", encoding="utf-8")
    log = load_log(path)
    assert log.user_ids.tolist() == [1] and log.item_ids.tolist() == [10, 20]


def test_an_ordinary_text_column_comes_back_as_it_is() -> None:
    """No cell changes: the column itself is returned (no copy for the usual log)."""
    values = pd.Series([f"u{n}" for n in range(1000)], dtype="str")
    assert stripped_ids(values) is values
