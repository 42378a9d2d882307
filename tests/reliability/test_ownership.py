"""SW-EVAL deletes and replaces only what it wrote: the unit store, output directories, and a
run's tables published as one set.

Each test hashes every byte a user owns before and after a command (files by content, links by
target) and asserts that nothing of theirs changed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sweval_testing import sweval_cli

from sweval.data.errors import SwevalError
from sweval.evaluators.run import output_dir
from sweval.evaluators.units.files import UnitFiles
from sweval.evaluators.units.ownership import STORE_TAG
from sweval.evaluators.units.store import UnitStore

HOURS_AGO = time.time() - 7200


def snapshot(*roots: Path) -> dict[str, str]:
    """Every file and link under ``roots`` (links not followed): path → content hash or
    link target."""
    found: dict[str, str] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root, followlinks=False):
            for name in dirs + files:
                path = Path(folder) / name
                if path.is_symlink():
                    found[str(path)] = "-> " + os.readlink(path)
                elif path.is_file():
                    found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def fake_unit(store: UnitStore, key: str) -> list[Path]:
    """Write a small finished unit under ``key``; its files."""
    table = pa.table({"user": [1, 2], "items": [[3, 4], [4, 3]]})
    store.write(key, UnitFiles(table=table, depth=2, device="cpu", timings={}),
                {"algorithm": "pop", "params": {}, "split": {"kind": "window"}})
    directory = store.directory / key[:2] / key
    return sorted(directory.iterdir())


# ---------------------------------------------------------------------- random trees
hex2 = st.text("0123456789abcdef", min_size=2, max_size=2)
key24 = st.text("0123456789abcdef", min_size=24, max_size=24)
names = st.one_of(
    hex2, key24, st.sampled_from(["unit.json", "lists.parquet", "warm.npz", ".runs",
                                  "js", "db", "migrations", "config.json", "tuning.csv",
                                  "results.csv", ".lists.parquet.abc_12.tmp", "app.js",
                                  "memo", "t.parquet"]),
)
paths = st.lists(names, min_size=1, max_size=4).map(lambda parts: "/".join(parts))


@st.composite
def user_trees(draw: st.DrawFn) -> dict[str, object]:
    """A user's tree: files at random paths (named like a store's where chance has it), and
    links to files and folders inside and outside it."""
    files = draw(st.lists(paths, min_size=1, max_size=12, unique=True))
    links = draw(st.lists(st.tuples(paths, st.sampled_from(["in", "out", "outdir"])),
                          max_size=4, unique_by=lambda pair: pair[0]))
    return {"files": files, "links": links}


def build(tree: dict[str, object], root: Path, outside: Path) -> None:
    """Make ``tree`` under ``root`` (every file two hours old), with ``outside`` the folder
    its outward links point to."""
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "secret.txt").write_text("not SW-EVAL's")
    first = None
    for relative in tree["files"]:  # type: ignore[attr-defined]
        path = root / relative
        if placeable(root, path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"user data {relative}")
            os.utime(path, (HOURS_AGO, HOURS_AGO))
            first = first or path
    for relative, target in tree["links"]:  # type: ignore[attr-defined]
        path = root / relative
        pointee = {"in": first, "out": outside / "secret.txt", "outdir": outside}[target]
        if pointee is not None and placeable(root, path):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(pointee)


def placeable(root: Path, path: Path) -> bool:
    """Whether ``path`` is free and every folder above it (up to ``root``) is a folder or
    can be made one."""
    if path.exists() or path.is_symlink():
        return False
    return not any(parent.is_symlink() or (parent.exists() and not parent.is_dir())
                   for parent in path.parents if parent != root and root in parent.parents)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=user_trees())
@pytest.mark.slow
def test_cache_prune_never_changes_a_byte_it_did_not_write(
    tree: dict[str, object], tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA: `cache prune --cache DIR` on an ordinary directory deleted every file over an hour old
    under a two-character folder's subfolder (a project's js/lib/app.js, db/migrations/001.sql)
    and followed links out of a store. Pointed at a user's tree, prune now refuses it; pointed
    at a real store that the same tree was planted in, it deletes units' own files only."""
    base = tmp_path_factory.mktemp("prune")
    project, outside = base / "project", base / "outside"
    build(tree, project, outside)
    before = snapshot(project, outside)
    assert sweval_cli("cache", "prune", "--older-than", "1s", "--cache", project) in (0, 2)
    assert snapshot(project, outside) == before

    # the same tree planted inside a real store, among its units
    store = UnitStore(base / "store").prepare()
    own = [path for key in ("ab" + "0" * 22, "db" + "1" * 22) for path in fake_unit(store, key)]
    build(tree, store.directory, outside)
    for path in own:
        os.utime(path.parent, (HOURS_AGO, HOURS_AGO))
    theirs = {path: digest for path, digest in snapshot(store.directory, outside).items()
              if Path(path) not in own and Path(path).name != STORE_TAG
              and not path.endswith(".lock")}
    assert sweval_cli("cache", "prune", "--older-than", "1s", "--cache",
                  store.directory) in (0, 2)
    after = snapshot(store.directory, outside)
    assert {path: after.get(path) for path in theirs} == theirs


def test_cache_prune_deletes_the_units_of_a_store_and_lists_them_on_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a store, prune deletes each unit's files and lock, --dry-run lists every path it
    would delete; a link planted as a unit folder or a unit's file is left, with its target."""
    store = UnitStore(tmp_path / "store").prepare()
    own = fake_unit(store, "ab" + "0" * 22)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "unit.json").write_text("{}")
    (store.directory / "cd").mkdir()
    (store.directory / "cd" / ("cd" + "2" * 22)).symlink_to(tmp_path / "elsewhere")
    os.utime(own[0].parent, (HOURS_AGO, HOURS_AGO))
    assert sweval_cli("cache", "prune", "--older-than", "1s", "--cache",
                  store.directory, "--dry-run") == 0
    printed = capsys.readouterr().out
    assert "would delete 1 units" in printed
    for path in own:
        assert str(path) in printed
    assert "elsewhere" not in printed
    assert sweval_cli("cache", "prune", "--older-than", "1s", "--cache",
                  store.directory) == 0
    assert not own[0].parent.exists()
    assert (tmp_path / "elsewhere" / "unit.json").read_text() == "{}"


def test_a_directory_that_is_not_a_store_is_refused_by_every_store_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No lock folders, tags or deletions in a directory that is not a store: cache list,
    size and prune, and a run given it as --cache, stop with one error naming it."""
    project = tmp_path / "project"
    (project / "db" / "migrations").mkdir(parents=True)
    (project / "db" / "migrations" / "001.sql").write_text("create table t ();")
    before = snapshot(project)
    for command in (["list"], ["size"], ["prune", "--older-than", "1s"]):
        assert sweval_cli("cache", *command, "--cache", project) == 2
        assert "not an SW-EVAL unit store" in capsys.readouterr().err
    assert sweval_cli("run", "--no-prefect", "--no-tracking", "--scale", "0.01",
                  "--folds", "2", "--algorithms", "pop", "--cache", project,
                  "--output", tmp_path / "out") == 2
    assert "not an SW-EVAL unit store" in capsys.readouterr().err
    assert snapshot(project) == before


def test_a_store_made_before_the_tag_is_still_a_store(tmp_path: Path) -> None:
    """A store written by an SW-EVAL without the tag (shards of units and .runs only) is
    recognised and tagged when a run uses it; a newer format is refused."""
    store = UnitStore(tmp_path / "old")
    fake_unit(store, "ab" + "0" * 22)
    (store.directory / ".runs").mkdir()
    assert not (store.directory / STORE_TAG).exists()
    store.check()
    store.prepare()
    assert "format 1" in (store.directory / STORE_TAG).read_text()
    (store.directory / STORE_TAG).write_text(
        "Signature: 8a477f597d28d172789f06886806bc55\n# SW-EVAL unit store (format 9)\n")
    with pytest.raises(SwevalError, match="newer"):
        store.check()


def test_a_store_another_process_is_creating_is_a_store(tmp_path: Path) -> None:
    """Two runs creating one store at once: the second finds the first's directory with only the
    tag's temporary file in it (written, not yet renamed) and takes it as a store, not as a
    foreign directory; anything else beside it is still refused."""
    directory = tmp_path / "shared"
    directory.mkdir()
    (directory / f".{STORE_TAG}.k3x_9a.tmp").write_text("being written")
    UnitStore(directory).prepare()
    assert "format 1" in (directory / STORE_TAG).read_text()
    other = tmp_path / "other"
    other.mkdir()
    (other / f".{STORE_TAG}.k3x_9a.tmp").write_text("being written")
    (other / "notes.txt").write_text("a user's")
    with pytest.raises(SwevalError, match="notes.txt"):
        UnitStore(other).prepare()


# ---------------------------------------------------------------------- output directories
TINY_RUN = ("run", "--no-prefect", "--no-tracking", "--no-progress", "--scale", "0.01",
            "--folds", "2", "--u-min", "1", "--algorithms", "pop")


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=user_trees())
@pytest.mark.slow
def test_run_output_never_changes_a_byte_of_a_users_directory(
    tree: dict[str, object], tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QA: `--output .` in a project replaced its config.json and deleted a tuning.csv it did not
    write. A non-empty directory SW-EVAL did not write is refused; a new one inside the project
    is written and nothing else of the project changes."""
    base = tmp_path_factory.mktemp("output")
    project, outside = base / "project", base / "outside"
    build(tree, project, outside)
    monkeypatch.chdir(base)
    before = snapshot(project, outside)
    assert sweval_cli(*TINY_RUN, "--output", project) == 2
    assert snapshot(project, outside) == before
    target = project / "sweval-run-new"
    if not target.exists() and not target.is_symlink():
        assert sweval_cli(*TINY_RUN, "--output", target) == 0
        after = snapshot(project, outside)
        assert {path: after.get(path) for path in before} == before


def test_a_refused_output_names_what_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert sweval_cli(*TINY_RUN, "--output", tmp_path) == 2
    error = capsys.readouterr().err
    assert "not an SW-EVAL output directory" in error and "config.json" in error


def test_an_output_another_run_is_claiming_is_sweval_s(tmp_path: Path) -> None:
    """Two runs given one new --output at once: the second found the first's directory with only
    its manifest's temporary file in it and refused it as a user's ("not an SW-EVAL output
    directory") instead of saying that another run is writing there. It is SW-EVAL's; anything
    else beside it is still refused."""
    from sweval.evaluators.run.output_dir import MANIFEST, claim, written_by_sweval

    directory = tmp_path / "out"
    directory.mkdir()
    (directory / f".{MANIFEST}.k2gw7tn2.tmp").write_text("being written")
    assert claim(directory) == directory and written_by_sweval(directory)
    other = tmp_path / "other"
    other.mkdir()
    (other / f".{MANIFEST}.k2gw7tn2.tmp").write_text("being written")
    (other / "notes.txt").write_text("a user's")
    with pytest.raises(SwevalError, match="notes.txt"):
        claim(other)


# ---------------------------------------------------------------------- one set
class Killed(BaseException):
    """What a kill does to a publication: it stops where it is."""


def run_into(directory: Path, algorithms: str) -> int:
    args = list(TINY_RUN)
    args[args.index("pop")] = algorithms
    return sweval_cli(*args, "--output", directory, "--cache", directory.parent / "u")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output of one uninterrupted run of pop,pop-n (only read by the tests)."""
    directory = tmp_path_factory.mktemp("ownership") / "reference"
    assert run_into(directory, "pop,pop-n") == 0
    return directory


@pytest.mark.parametrize("step", range(14))
@pytest.mark.slow
def test_a_kill_while_tables_are_published_never_leaves_a_mixed_set(
    step: int, reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA: a kill between the tables' renames left one run's results.csv beside another run's
    summary, folds and config, and `sweval report` rendered the mix. A run of pop,pop-n into
    the output of a run of pop is killed at the ``step``-th deletion or rename of its
    publication: whatever it left, a reader either sees exactly one run's set (pop's, or
    pop,pop-n's as in ``reference``), or refuses the directory. Both runs reuse the units of
    ``reference`` (a copy of its store): the renames counted are the publication's alone."""
    shutil.copytree(reference.parent / "u", tmp_path / "u")
    out = tmp_path / "out"
    assert run_into(out, "pop") == 0
    first = {name: (out / name).read_bytes() for name in output_dir.manifest(out)["files"]}
    calls = []
    real_replace, real_unlink = os.replace, output_dir._unlink_file

    def counted(real):
        def call(*args, **kwargs):
            calls.append(args)
            if len(calls) == step + 1:
                raise Killed
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(output_dir.os, "replace", counted(real_replace))
    monkeypatch.setattr(output_dir, "_unlink_file", counted(real_unlink))
    try:
        run_into(out, "pop,pop-n")
    except Killed:
        pass
    monkeypatch.setattr(output_dir.os, "replace", real_replace)
    monkeypatch.setattr(output_dir, "_unlink_file", real_unlink)
    try:
        output_dir.verify(out)
    except SwevalError as exc:
        assert "not one run's set" in str(exc)
        assert sweval_cli("report", out) == 2
        assert run_into(out, "pop,pop-n") == 0  # a rerun publishes a whole set
        output_dir.verify(out)
        return
    tables = [name for name in output_dir.manifest(out)["files"] if name.endswith(".csv")
              and name != "units.csv"]  # units.csv: whether each unit was reused
    found = {name: (out / name).read_bytes() for name in tables}
    assert found in ({name: first.get(name) for name in tables},
                     {name: (reference / name).read_bytes() for name in tables})
