"""Statistics tables kept for reruns (evaluators.units.memo): computed once per inputs and code,
read back exactly, never a user's file, and pruned by last use."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sweval_testing import sweval_cli

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.units.memo import Memo, memo_key, same_table
from sweval.evaluators.units.ownership import foreign_names, memo_files

DAYS_AGO = time.time() - 3 * 86400


def frame(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"algorithm": ["a", "b", None], "k": [5, 10, 20],
                         "value": [rng.random(), np.nan, 0.25], "significant": [True, False, True]})


class Counting:
    """``compute`` for :meth:`Memo.table` that counts its calls."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.table, self.calls = table, 0

    def __call__(self) -> pd.DataFrame:
        self.calls += 1
        return self.table.copy()


def test_a_table_is_computed_once_per_inputs_and_read_back_exactly(tmp_path: Path) -> None:
    memo, compute = Memo(tmp_path), Counting(frame())
    first = memo.table("t", (frame(), "settings"), compute)
    again = memo.table("t", (frame(), "settings"), compute)
    assert compute.calls == 1
    assert same_table(first, frame()) and same_table(again, frame())
    assert np.isnan(again["value"][1])
    memo.table("t", (frame(seed=1), "settings"), compute)  # another input value
    memo.table("t", (frame(), "other settings"), compute)
    memo.table("other", (frame(), "settings"), compute)
    assert compute.calls == 4
    assert len(memo_files(tmp_path)) == 4


def test_the_key_covers_values_dtypes_columns_and_index() -> None:
    base = memo_key("t", frame())
    assert memo_key("t", frame()) == base
    assert memo_key("t", frame().astype({"k": "float64"})) != base
    assert memo_key("t", frame().rename(columns={"k": "kk"})) != base
    assert memo_key("t", frame().set_axis([1, 2, 3])) != base
    assert memo_key("t", frame().iloc[::-1]) != base


@pytest.mark.parametrize("odd", [
    pd.DataFrame({"pair": [("a", "b"), ("b", "c")]}),  # tuples come back as arrays
    pd.DataFrame({"note": ["x", None, 1.5]}, dtype=object),  # None comes back as NaN
], ids=["tuples", "none-in-objects"])
def test_a_table_parquet_does_not_give_back_exactly_is_computed_every_time(
        tmp_path: Path, odd: pd.DataFrame) -> None:
    memo = Memo(tmp_path)
    compute = Counting(odd)
    for _ in range(2):
        assert same_table(memo.table("t", (odd.astype(str),), compute), odd)
    assert compute.calls == 2 and memo_files(tmp_path) == []


def test_a_damaged_entry_is_computed_again_and_written_over(tmp_path: Path) -> None:
    memo, compute = Memo(tmp_path), Counting(frame())
    memo.table("t", (frame(),), compute)
    (path,) = memo_files(tmp_path)
    path.write_bytes(b"PAR1 not a table")
    assert same_table(memo.table("t", (frame(),), compute), frame())
    assert compute.calls == 2
    assert same_table(pd.read_parquet(path), frame())


def test_a_link_in_the_memo_is_never_followed_nor_replaced(tmp_path: Path) -> None:
    users = tmp_path / "mine.parquet"
    frame(seed=5).to_parquet(users)
    before = users.read_bytes()
    memo, compute = Memo(tmp_path / "store"), Counting(frame())
    path = memo.path(memo_key("t", frame()))
    path.parent.mkdir(parents=True)
    path.symlink_to(users)
    assert same_table(memo.table("t", (frame(),), compute), frame())  # not the linked table
    assert path.is_symlink() and users.read_bytes() == before
    assert memo.table("t", (frame(),), compute) is not None and compute.calls == 2


def test_memo_names_are_the_stores_own_and_anything_else_there_is_foreign(
        tmp_path: Path) -> None:
    memo = Memo(tmp_path)
    memo.table("t", (frame(),), Counting(frame()))
    assert foreign_names(tmp_path) == []
    (tmp_path / "memo" / "notes.txt").write_text("mine")
    (tmp_path / "memo" / "ab").mkdir(exist_ok=True)
    (tmp_path / "memo" / "ab" / "table.parquet").write_text("mine")
    assert foreign_names(tmp_path) == ["memo/ab/table.parquet", "memo/notes.txt"]


def config(tmp_path: Path, **overrides: object) -> EvalConfig:
    values = dict(data="movielens-latest-small", window="7D", folds=4, u_min=3, k=[5, 10],
                  algorithms=["pop", "pop-n"], output=str(tmp_path / "out"), progress=False,
                  report=False, tracking=False)
    return EvalConfig.build(**(values | overrides))


def test_a_rerun_of_the_same_units_reads_its_tests_and_writes_the_same_bytes(
        tmp_path: Path, own_unit_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first run computes significance.csv (users and folds) and keeps it; a rerun into a
    new directory reads it (the tests are not run: they would raise) and writes the same
    bytes; another bootstrap seed computes it again."""
    import sweval.evaluators.run.outputs as outputs

    first = evaluate_config(config(tmp_path, output=str(tmp_path / "first")))
    assert first is not None and first.n_computed > 0
    assert len(memo_files(own_unit_store)) == 1

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the tests ran again")

    monkeypatch.setattr(outputs, "compare_algorithms", refuse)
    second = evaluate_config(config(tmp_path, output=str(tmp_path / "second")))
    assert second is not None and second.n_computed == 0
    for name in ("significance.csv", "summary.csv", "results.csv"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()
    with pytest.raises(AssertionError, match="the tests ran again"):
        evaluate_config(config(tmp_path, output=str(tmp_path / "third"), bootstrap_seed=1))


def test_cache_prune_older_than_deletes_tables_no_run_used_since(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    memo = Memo(tmp_path)
    memo.table("old", (frame(),), Counting(frame()))
    (old,) = memo_files(tmp_path)
    os.utime(old, (DAYS_AGO, DAYS_AGO))
    memo.table("new", (frame(),), Counting(frame()))
    temporary = old.parent / f".{old.name}.abc_12.tmp"
    temporary.write_bytes(b"killed write")
    os.utime(temporary, (DAYS_AGO, DAYS_AGO))
    assert sweval_cli("cache", "size", "--cache", tmp_path) == 0
    assert "and 2 statistics table(s) kept for reruns" in " ".join(capsys.readouterr().out.split())
    assert sweval_cli("cache", "prune", "--older-than", "1D", "--cache", tmp_path,
                      "--dry-run") == 0
    printed = capsys.readouterr().out
    assert "would also delete 1 statistics table(s) kept for reruns" in " ".join(printed.split())
    assert str(old) in printed and str(temporary) in printed
    assert len(memo_files(tmp_path)) == 3
    assert sweval_cli("cache", "prune", "--older-than", "1D", "--cache", tmp_path) == 0
    assert "also deleted 1 statistics table(s)" in " ".join(capsys.readouterr().out.split())
    (left,) = memo_files(tmp_path)
    assert left != old and not temporary.exists()


def test_a_report_of_the_same_tables_reads_its_figures(
        tmp_path: Path, own_unit_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures of a rerun's report (the same tables in another directory) are the first
    run's PNG bytes, read from the store: matplotlib does not draw them again."""
    import sweval.evaluators.report.figures as figures

    evaluate_config(config(tmp_path, output=str(tmp_path / "first"), report=True))
    first = {path.name: path.read_bytes() for path in (tmp_path / "first").glob("*.png")}
    assert len(first) == 3

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("drawn again")

    for name in ("figure_vs_k", "figure_over_time", "figure_overlap"):
        monkeypatch.setattr(figures, name, refuse)
    evaluate_config(config(tmp_path, output=str(tmp_path / "second"), report=True))
    second = {path.name: path.read_bytes() for path in (tmp_path / "second").glob("*.png")}
    assert second == first
    assert (tmp_path / "second" / "report.html").is_file()


def test_the_generated_log_is_kept_once_the_store_exists(
        tmp_path: Path, own_unit_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a store the generated log is generated (nothing is written); in a store it is
    generated once and read back equal, the same InteractionLog."""
    import sweval.data.synthetic as synthetic
    from sweval.evaluators.run.sources import generated, unit_store

    settings = EvalConfig.build(scale=0.01, seed=3, output=str(tmp_path / "out"))
    calls = []
    original = synthetic.generate_log
    monkeypatch.setattr(synthetic, "generate_log",
                        lambda **kw: calls.append(kw) or original(**kw))
    plain = generated(settings)
    assert len(calls) == 1 and not (own_unit_store / "memo").exists()
    unit_store(settings)
    assert same_table(generated(settings), plain) and len(calls) == 2
    assert same_table(generated(settings), plain) and len(calls) == 2  # read back
    assert len(calls) == 2 and len(memo_files(own_unit_store)) == 1
    generated(EvalConfig.build(scale=0.01, seed=4, output=str(tmp_path / "out")))
    assert len(calls) == 3


def test_a_memo_folder_that_is_a_link_is_never_written_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "users-folder"
    elsewhere.mkdir()
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "memo").symlink_to(elsewhere)
    compute = Counting(frame())
    for _ in range(2):
        assert same_table(Memo(tmp_path / "store").table("t", (frame(),), compute), frame())
    assert compute.calls == 2 and list(elsewhere.iterdir()) == []
