"""Refactors change no number: the result tables of three fixed workloads, hashed.

The hashes were taken from the code before the one-engine change (commit 45ce6c3). Each table is
hashed without its ``config_hash`` column: that column names the unit key, which includes the
version of the code on purpose, so it changes with every edit while the numbers must not.

Workloads (in-process, no Prefect, no MLflow):
- the README's main job: the generated log at its default scale, 30 daily folds, six algorithms;
- MovieLens latest-small (bundled), 10 weekly folds, u_min 3;
- ``sweval compare`` on the same, SW-EVAL against leave-last-one-out and LOOCV.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ML_ARGS = ["--data", "movielens-latest-small", "--window", "7D", "--folds", "10", "--u-min", "3"]
QUIET = ["--no-tracking", "--no-progress"]

EXPECTED_RUN = {
    "default": "0e0c70270182e18926b71f2735e22b8e3293bbb7a08861de3a94851698c8cee7",
    "movielens-weekly": "e5d349ca4bf7131921d37df6c4d13e3862076de3b07f8a9d4e73c5f3d4e7a714",
}
EXPECTED_COMPARE = {
    "compare.csv": "a8948d29360e8d0fb721e37c56d244f268369bc0912eb717c2934546c7a2ed92",
    "compare_summary.csv": "e3b073aa7ca1c4833f25b108ed05a0feff228c18b5a8d96f73c97419a84982be",
    "kendall.csv": "fe75068cde8709831a9c452416c0fc07cade5455a1994289ab02b8f07eb6014a",
    "leakage.csv": "1b3e2c6c0dc20369ce8ae651d99e739f4d31e9b0725b5f21675cf7c988dde43a",
    "leakage_per_split.csv": "eab000c22b745864336c2d0681c59876e3e0e51546eb05667e8a1e64e31adcdd",
    "table2.csv": "666b0234a1daea252b92ac4fe87074ccc86712565b443475ad5ee7d2f516c603",
    "sw-eval/results.csv": "e5d349ca4bf7131921d37df6c4d13e3862076de3b07f8a9d4e73c5f3d4e7a714",
    "leave-last-one-out/results.csv":
        "6a59c218f60b329ccb268e2ed5c2e2d6911e2666425f94e7dcdccd8bd432a6fe",
    "loocv/results.csv": "8871e8f92cee3659d499c189fb8919f41d401c43b38839a121158732f4454d0c",
}


def table_hash(path: Path) -> str:
    """sha256 of a CSV's bytes with a trailing ``config_hash`` column cut off every line."""
    lines = path.read_bytes().split(b"\n")
    if lines[0].endswith(b",config_hash"):
        lines = [line.rsplit(b",", 1)[0] if line else line for line in lines]
    return hashlib.sha256(b"\n".join(lines)).hexdigest()


def _sweval(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    from sweval.flows.cli import main

    monkeypatch.setattr(sys, "argv", ["sweval", *args])
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, f"sweval {' '.join(args)} exited with {exc.code}"


@pytest.mark.parametrize("name", sorted(EXPECTED_RUN))
def test_run_results_are_unchanged(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = [] if name == "default" else ML_ARGS
    _sweval(monkeypatch, "run", "--no-prefect", *QUIET, *args, "--output", str(tmp_path))
    assert table_hash(tmp_path / "results.csv") == EXPECTED_RUN[name]


def test_compare_tables_are_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _sweval(monkeypatch, "compare", *QUIET, *ML_ARGS, "--output", str(tmp_path))
    found = {name: table_hash(tmp_path / name) for name in EXPECTED_COMPARE}
    assert found == EXPECTED_COMPARE
