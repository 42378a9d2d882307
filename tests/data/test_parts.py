"""Logs written as part files: which files of a directory are parts, and in which order."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log
from sweval.data.parts import part_files

T0 = 1_704_067_200


def _frame(users: list[str], start: int) -> pd.DataFrame:
    return pd.DataFrame({"user": users, "item": ["i1"] * len(users),
                         "timestamp": [start + i for i in range(len(users))]})


def test_sub_folders_are_read_and_hidden_names_skipped(tmp_path: Path) -> None:
    root = tmp_path / "events"
    (root / "date=2024-01-02").mkdir(parents=True)
    (root / "date=2024-01-01").mkdir()
    (root / "_temporary" / "0").mkdir(parents=True)
    _frame(["b"], T0 + 10).to_parquet(root / "date=2024-01-02" / "part-0.parquet")
    _frame(["a"], T0).to_parquet(root / "date=2024-01-01" / "part-0.parquet")
    (root / "_temporary" / "0" / "part-0.parquet").write_bytes(b"half-written")
    (root / "date=2024-01-01" / ".part-0.parquet.crc").write_bytes(b"crc")
    (root / "_SUCCESS").touch()
    assert [p.relative_to(root).as_posix() for p in part_files(root)] == [
        "date=2024-01-01/part-0.parquet", "date=2024-01-02/part-0.parquet",
    ]
    log = load_log(root)
    assert log.user_ids.tolist() == ["a", "b"] and log.timestamp.tolist() == [T0, T0 + 10]


def test_parts_are_concatenated_in_path_order(tmp_path: Path) -> None:
    """Two identical (user, item) events at one second: dedup keeps the first row read, which is
    the one of the part first in path order (its policy shows which)."""
    root = tmp_path / "events"
    root.mkdir()
    for name, policy in (("part-00010.csv", "late"), ("part-00002.csv", "early")):
        _frame(["a"], T0).assign(policy=policy).to_csv(root / name, index=False)
    log = load_log(root, policy_col="policy")
    assert len(log) == 1 and log.policy_ids[log.policy].tolist() == ["early"]


def test_a_glob_of_one_file_and_a_header_only_part(tmp_path: Path) -> None:
    (tmp_path / "part-0.csv").write_text("user,item,timestamp\n")
    _frame(["a", "b"], T0).to_csv(tmp_path / "part-1.csv", index=False)
    assert len(load_log(str(tmp_path / "part-*.csv"))) == 2
    assert len(load_log(str(tmp_path / "part-1*.csv"))) == 2
    with pytest.raises(SwevalError, match=r"part-0\*\.csv: the log is empty \(no data rows in any of 1 parts\)"):
        load_log(str(tmp_path / "part-0*.csv"))
