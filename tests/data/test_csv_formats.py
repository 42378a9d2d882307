"""CSV files as people have them: other separators, and headers that name a column twice."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log
from sweval.data.text_files import header_separator


@pytest.mark.parametrize("sep", [",", "\t", ";", "|"])
def test_the_separator_is_read_from_the_header(tmp_path: Path, sep: str) -> None:
    path = tmp_path / "log.csv.gz"
    text = sep.join(["user", "item", "timestamp"]) + "\n" + "\n".join(
        sep.join([f"u{i % 3}", f"i{i}", str(1_700_000_000 + i)]) for i in range(6)
    ) + "\n"
    path.write_bytes(gzip.compress(text.encode()))
    log = load_log(str(path))
    assert len(log) == 6 and sorted(log.user_ids) == ["u0", "u1", "u2"]
    assert header_separator(text.splitlines()[0]) == sep


def test_a_one_column_header_defaults_to_commas() -> None:
    assert header_separator("user\n") == ","


def test_a_column_named_twice_is_an_error_naming_file_column_and_positions(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("user,timestamp,item,timestamp\nu1,100,a,5\nu2,200,b,6\n")
    with pytest.raises(SwevalError, match=r"dup\.csv: the header names a column twice: "
                                          r"'timestamp' at columns 2, 4"):
        load_log(str(path))
