"""CSV files as people have them: other separators, and headers that name a column twice."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log
from sweval.data.text_files import header_separator, parse_separator


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


@pytest.mark.parametrize("text, sep", [
    (",", ","), ("comma", ","), ("\t", "\t"), ("tab", "\t"), ("\\t", "\t"), ("TAB", "\t"),
    (";", ";"), ("semicolon", ";"), ("|", "|"), ("pipe", "|"),
])
def test_sep_accepts_each_separator_by_character_or_name(text: str, sep: str) -> None:
    assert parse_separator(text) == sep


def test_a_forced_separator_wins_over_the_header_count(tmp_path: Path) -> None:
    """Four commas inside a column name outvote three semicolons; --sep ';' reads it right."""
    path = tmp_path / "log.csv"
    path.write_text("user;item;timestamp;note (a,b,c,d)\nu1;i1;1700000000;x\nu2;i2;1700000001;y\n")
    assert header_separator(path.read_text().splitlines()[0]) == ","
    log = load_log(str(path), sep=";")
    assert sorted(log.user_ids) == ["u1", "u2"] and log.timestamp.tolist() == [1700000000, 1700000001]


def test_a_tsv_file_is_tab_separated_whatever_its_header_counts(tmp_path: Path) -> None:
    path = tmp_path / "log.tsv.gz"
    path.write_bytes(gzip.compress(b"user\titem\ttimestamp\tnote (a,b,c,d)\nu1\ti1\t1700000000\tx\n"))
    assert load_log(str(path)).item_ids.tolist() == ["i1"]


def test_a_file_whose_bytes_are_another_format_than_its_name_says(tmp_path: Path) -> None:
    """Parquet named .csv and gzip named .parquet: the error says what the file is (its magic
    bytes), not "the header names a column twice" or "magic bytes not found"."""
    import pandas as pd

    frame = pd.DataFrame({"user": [1, 2], "item": [3, 4], "timestamp": [5, 6]})
    parquet = tmp_path / "log.csv"
    frame.to_parquet(parquet)
    with pytest.raises(SwevalError, match=r"log\.csv: cannot read as csv: it is a Parquet file "
                                          r"\(its first bytes are PAR1\): use --format parquet"):
        load_log(parquet)
    assert len(load_log(parquet, fmt="parquet").user) == 2
    zipped = tmp_path / "log.parquet"
    zipped.write_bytes(gzip.compress(b"user,item,timestamp\n1,2,3\n"))
    with pytest.raises(SwevalError, match=r"log\.parquet: cannot read as parquet: it is "
                                          r"gzip-compressed"):
        load_log(zipped)
    text = tmp_path / "par1.csv"  # a CSV whose first column happens to be called PAR1
    text.write_text("PAR1,user,item,timestamp\nx,1,2,3\n")
    assert len(load_log(text).user) == 1


def test_a_quoted_line_break_is_part_of_the_id_in_a_windows_file(tmp_path: Path) -> None:
    """RFC 4180 with CRLF line ends: the quoted field keeps its line break; the rows stay rows."""
    path = tmp_path / "log.csv"
    path.write_bytes(b'user,item,timestamp\r\n"ab\r\ncd",i1,1700000000\r\n'
                     b'u2,"say ""hi""",1700000001\r\n')
    log = load_log(str(path))
    assert log.user_ids.tolist() == ["ab\r\ncd", "u2"]
    assert log.item_ids.tolist() == ["i1", 'say "hi"']


def test_a_quoted_line_break_is_read_in_a_bz2_file_too(tmp_path: Path) -> None:
    """The RFC 4180 check reads what pandas reads, decompressed."""
    import bz2

    path = tmp_path / "log.csv.bz2"
    path.write_bytes(bz2.compress(b'user,item,timestamp\n"ab\ncd",i1,1700000000\n'))
    assert load_log(str(path)).user_ids.tolist() == ["ab\ncd"]
