"""The unit of work: what its key covers, what a store keeps, and what a run reuses."""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sweval_testing import sweval_cli, unwrapped

from sweval.data.loaders import load_log
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.run.plan import make_plan
from sweval.evaluators.run.sources import unit_store
from sweval.evaluators.units.algorithm_spec import AlgorithmSpec
from sweval.evaluators.units.engine import UnitLists
from sweval.evaluators.units.store import UnitStore
from sweval.evaluators.units.unit import source_version, unit_key

SPLIT = {"kind": "window", "t_start": 0, "t_end": 10, "data": "abc"}


def config(tmp_path: Path, **overrides) -> EvalConfig:
    values = dict(
        data="movielens-latest-small", window="7D", folds=4, u_min=3, k=[5, 10],
        algorithms=["pop", "pop-n"], output=str(tmp_path / "out"), progress=False, report=False,
        tracking=False,
    )
    return EvalConfig.build(**(values | overrides))


@pytest.fixture
def fits(count_units: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Every (fold, algorithm) unit computed in this process."""
    return count_units


# ------------------------------------------------------------------------------ the key
def test_parameters_given_as_default_as_float_or_not_at_all_are_one_key():
    keys = {
        unit_key(SPLIT, AlgorithmSpec.of("als", params))
        for params in ({}, {"factors": 64}, {"factors": 64.0}, {"factors": 64, "device": "auto"})
    }
    assert len(keys) == 1
    assert unit_key(SPLIT, AlgorithmSpec.of("als", {"factors": 32})) not in keys
    assert unit_key(SPLIT | {"t_end": 11}, AlgorithmSpec.of("als")) not in keys


def test_the_key_follows_the_code_but_not_its_comments_or_docstrings(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Doc."""\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n')
    before = source_version(module)
    module.write_text('"""Other doc."""\n\n\ndef f(x):\n    return x + 1  # two\n')
    assert source_version.__wrapped__(module) == before
    module.write_text('"""Doc."""\n\ndef f(x):\n    return x + 2\n')
    assert source_version.__wrapped__(module) != before


def test_a_warm_unit_names_its_predecessor_and_hold_out_splits_are_cold(tmp_path):
    from sweval.evaluators.protocols.holdout import LOOCV
    from sweval.evaluators.units.unit import plan_units

    warm = AlgorithmSpec.of("als", {"warm_start": True, "device": "cpu"})
    log = make_plan(config(tmp_path)).log
    (split,) = LOOCV(repeats=1).splits(log)
    (unit,) = plan_units([split], [warm], [10])
    assert unit.warm_from is None and unit.spec.canonical["warm_start"] is False
    assert unit.key == plan_units([split], [AlgorithmSpec.of("als", {"device": "cpu"})],
                                  [10])[0].key


def test_every_algorithms_module_is_in_some_key_or_declared_outside_them():
    from sweval.algorithms.registry import ALGORITHMS
    from sweval.evaluators.units.serving import SERVING_MODULES
    from sweval.evaluators.units.unit import CORE_MODULES

    root = Path(__file__).resolve().parents[2]
    own = {f"algorithms/{cls.__module__.rsplit('.', 1)[1]}.py" for cls in ALGORITHMS.values()}
    outside = {"algorithms/__init__.py", "algorithms/registry.py", "algorithms/threads.py",
               "algorithms/implicit_device.py"}
    for path in sorted((root / "algorithms").glob("*.py")):
        name = f"algorithms/{path.name}"
        assert name in set(CORE_MODULES) | own | outside | set(SERVING_MODULES), \
            f"{name}: part of unit keys or not?"
    assert all((root / name).exists() for name in (*CORE_MODULES, *SERVING_MODULES))


# ------------------------------------------------------------------------------ reuse by runs
def test_adding_an_algorithm_a_k_and_a_fold_computes_only_the_new_units(
    tmp_path, fits, monkeypatch, capsys
):
    from sweval.flows.cli.app import main

    base = ["sweval", "run", "--no-prefect", "--no-tracking", "--no-progress",
            "--data", "movielens-latest-small", "--window", "7D", "--u-min", "3",
            "--output", str(tmp_path / "x"), "--set", "als.factors=8",
            "--set", "als.iterations=3"]
    monkeypatch.setattr(sys, "argv", [*base, "--algorithms", "als", "--folds", "3"])
    main()
    assert sorted(fits) == [(0, "als"), (1, "als"), (2, "als")]
    assert "reused 0 units, computed 3" in capsys.readouterr().out
    fits.clear()
    monkeypatch.setattr(sys, "argv", [*base, "--algorithms", "als,pop", "--folds", "4",
                                      "--k", "5,10"])
    main()
    # four windows ending at the same time: the new one is the earliest (fold 0)
    assert sorted(name for _, name in fits) == ["als", "pop", "pop", "pop", "pop"]
    assert [fold for fold, name in fits if name == "als"] == [0]
    assert "reused 3 units, computed 5" in capsys.readouterr().out
    # units.csv says which units this run computed (QA: a rerun's could not be told apart)
    units = pd.read_csv(tmp_path / "x" / "units.csv")
    computed = units.loc[~units["reused"], ["fold", "algorithm"]]
    assert sorted(computed.itertuples(index=False, name=None)) == sorted(fits)
    assert units["reused"].sum() == 3


def test_parameter_spellings_share_units_and_a_changed_parameter_recomputes_only_its_own(
    tmp_path, fits
):
    algorithms = ["pop", "item-knn"]
    evaluate_config(config(tmp_path, algorithms=algorithms))
    n_folds = len(fits) // 2
    for params in ({"item-knn": {"n_neighbors": 100.0}}, {"item-knn": {"n_neighbors": 100}}):
        fits.clear()
        default = evaluate_config(config(tmp_path, algorithms=algorithms, params=params))
        assert fits == [] and default.n_computed == 0
    changed = evaluate_config(config(tmp_path, algorithms=algorithms,
                               params={"item-knn": {"n_neighbors": 7}}))
    assert sorted(set(name for _, name in fits)) == ["item-knn"]
    assert changed.n_computed == n_folds and changed.n_reused == n_folds


def test_a_larger_k_than_the_stored_lists_recomputes_only_the_units_it_outgrows(tmp_path, fits):
    first = evaluate_config(config(tmp_path, k=[5, 10]))
    fits.clear()
    again = evaluate_config(config(tmp_path, k=[5, 10, 500]))
    assert again.n_computed == len(fits) == first.n_computed  # 500 outgrows every list
    fresh = evaluate_config(config(tmp_path, k=[5, 10, 500], output=str(tmp_path / "fresh")))
    pd.testing.assert_frame_equal(again.results.drop(columns="config_hash"),
                                  fresh.results.drop(columns="config_hash"))
    fits.clear()
    smaller = evaluate_config(config(tmp_path, k=[3]))
    assert fits == [] and smaller.n_computed == 0


def test_the_same_windows_of_a_grown_log_reuse_their_units(tmp_path, fits):
    full = load_log("movielens-latest-small")
    frame = full.to_frame()
    cut = full.t_max - 6 * 7 * 86400
    shorter = InteractionLog.from_frame(frame[frame["timestamp"] < cut])
    start = str(cut - 4 * 7 * 86400)
    early = evaluate_config(config(tmp_path, start=start, folds=4), log=shorter)
    fits.clear()
    grown = evaluate_config(config(tmp_path, start=start, folds=10), log=full)
    assert grown.n_reused == early.n_computed > 0
    assert {fold for fold, _ in fits} <= set(range(4, 10))
    columns = ["fold", "algorithm", "metric", "k", "value", "n_eligible"]
    old = early.results[columns].dropna()
    new = grown.results[grown.results["fold"] < 4][columns].dropna()
    pd.testing.assert_frame_equal(old.reset_index(drop=True), new.reset_index(drop=True))


def test_a_shared_cache_serves_another_output_directory(tmp_path, fits):
    cache = str(tmp_path / "cache")
    evaluate_config(config(tmp_path, cache=cache))
    fits.clear()
    other = evaluate_config(config(tmp_path, cache=cache, output=str(tmp_path / "other")))
    assert fits == [] and other.n_computed == 0
    assert not (tmp_path / "other" / "units").exists()
    assert unit_store(config(tmp_path, cache=cache)).directory == Path(cache)


def test_a_second_run_into_a_new_output_reuses_every_unit_without_cache(
    tmp_path, fits, monkeypatch, capsys, user_cache
):
    """Issue 46: with no --cache and no $SWEVAL_CACHE, a second `sweval run` into a new output
    directory recomputed every unit the first had just computed (the store was <output>/units).
    Every command's default store is now the user's: the second run computes nothing, writes
    the same results, and its summary names the store with its size."""
    from sweval.flows.cli.app import main

    base = ["sweval", "run", "--no-prefect", "--no-tracking", "--no-progress",
            "--data", "movielens-latest-small", "--window", "7D", "--folds", "3", "--u-min", "3",
            "--algorithms", "pop,pop-n"]
    monkeypatch.setattr(sys, "argv", [*base, "--output", str(tmp_path / "first")])
    main()
    assert "units: reused 0 units, computed 6" in capsys.readouterr().out
    fits.clear()
    monkeypatch.setattr(sys, "argv", [*base, "--output", str(tmp_path / "second")])
    main()
    printed = capsys.readouterr().out
    assert fits == [] and "units: reused 6 units, computed 0" in printed
    n_bytes = sum(path.stat().st_size for path in user_cache.glob("[0-9a-f][0-9a-f]/*/*"))
    assert f"unit store {user_cache}: 6 units, {n_bytes / 1024:.1f} KiB" in " ".join(
        printed.split())
    assert not (tmp_path / "first" / "units").exists()
    assert (tmp_path / "first" / "results.csv").read_bytes() == \
        (tmp_path / "second" / "results.csv").read_bytes()
    assert json.loads((tmp_path / "second" / "config.json").read_text())["unit_store"] == \
        str(user_cache)


def test_cache_list_output_follows_the_store_the_run_recorded(tmp_path, monkeypatch, capsys):
    """`cache list --output RUN` looked in RUN/units whatever store the run used, while
    `cache prune --run RUN` followed the store its config.json records: both follow it now."""
    shared = tmp_path / "elsewhere"
    evaluate_config(config(tmp_path, cache=str(shared)))
    keys = sorted(path.parent.name[:10] for path in stored_units(shared))
    assert sweval_cli("cache", "list", "--output", tmp_path / "out") == 0
    printed = capsys.readouterr().out
    assert unwrapped(shared) in unwrapped(printed)
    assert sorted(re.findall(r"\b[0-9a-f]{10}\b", printed)) == keys, printed


def test_cache_prune_max_size_deletes_the_least_recently_used_first(
    tmp_path, monkeypatch, capsys, own_unit_store
):
    """--max-size SIZE deletes units, least recently used first, until the store holds at most
    SIZE; --dry-run only says so."""
    evaluate_config(config(tmp_path))
    entries = sorted(UnitStore(own_unit_store).entries(), key=lambda e: e.key)
    for age, entry in enumerate(entries):  # the first key is the oldest-used, and so on
        used = time.time() - (len(entries) - age) * 86400
        os.utime(entry.path, (used, used))
    sizes = [entry.size_bytes for entry in entries]
    limit = sum(sizes[2:])  # exactly what the newest all but two take
    assert sweval_cli("cache", "prune", "--max-size", str(limit), "--dry-run") == 0
    assert "would delete 2 units" in capsys.readouterr().out
    assert sweval_cli("cache", "prune", "--max-size", str(limit)) == 0
    assert "deleted 2 units" in capsys.readouterr().out
    assert [p.parent.name for p in stored_units(own_unit_store)] == [e.key for e in entries[2:]]
    assert sweval_cli("cache", "prune", "--max-size", "1G") == 0
    assert "deleted 0 units" in capsys.readouterr().out
    assert sweval_cli("cache", "prune", "--max-size", "2 parsecs") == 2
    assert "--max-size '2 parsecs': not a size" in capsys.readouterr().err


def test_sizes_read_in_powers_of_1024():
    from sweval.flows.cli.cache import parse_size

    assert [parse_size(text, option="--max-size") for text in
            ("2G", "500M", "1.5GiB", "800k", "1024", "3 MB", ".5K", "1t")] == [
        2 * 1024**3, 500 * 1024**2, 3 * 1024**3 // 2, 800 * 1024, 1024, 3 * 1024**2, 512,
        1024**4]


# ------------------------------------------------------------------------------ the store
@pytest.mark.parametrize("ids", ["text", "integers"])
def test_lists_round_trip_through_raw_ids(tmp_path, ids):
    users = ["u10", "u2", "u3"] if ids == "text" else [10, 2, 3]
    items = ["b", "a", "c", "d"] if ids == "text" else [40, 7, 8, 9]
    log = InteractionLog.from_frame(pd.DataFrame({
        "user": [users[i % 3] for i in range(8)], "item": [items[i % 4] for i in range(8)],
        "timestamp": np.arange(8),
    }))
    lists = UnitLists(users=np.array([0, 2]), items=np.array([[3, 1, -1], [0, -1, -1]]),
                      device="cpu", timings={"fit": 0.5})
    store = UnitStore(tmp_path)
    store.save("k" * 24, lists, log, {"algorithm": "pop"})
    loaded = store.load("k" * 24, log)
    np.testing.assert_array_equal(loaded.users, lists.users)
    np.testing.assert_array_equal(loaded.items, lists.items)
    assert loaded.timings == {"fit": 0.5}
    assert store.has("k" * 24, depth=3) and not store.has("k" * 24, depth=4)


def test_concurrent_writers_of_one_unit_leave_it_whole(tmp_path):
    log = InteractionLog.from_frame(pd.DataFrame({
        "user": np.arange(500) % 50, "item": np.arange(500) % 97, "timestamp": np.arange(500),
    }))
    lists = UnitLists(users=np.arange(50), items=np.tile(np.arange(30), (50, 1)))
    store = UnitStore(tmp_path)
    barrier = threading.Barrier(4)

    def write() -> None:
        barrier.wait()
        for _ in range(10):
            store.save("c" * 24, lists, log, {"algorithm": "pop"})

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_array_equal(store.load("c" * 24, log).items, lists.items)
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_cache_prune_deletes_only_on_request(tmp_path, monkeypatch, capsys, own_unit_store):
    """Two runs into two outputs share the one default store; prune deletes by last use or by
    run only when asked, and --output names the store that run recorded."""
    from sweval.flows.cli.app import main

    out = config(tmp_path).output
    evaluate_config(config(tmp_path))
    n = len(stored_units(own_unit_store))
    evaluate_config(config(tmp_path, algorithms=["pop"], output=str(tmp_path / "pop-only")))
    assert len(stored_units(own_unit_store)) == n
    for argv, remaining in (
        (["prune", "--output", out, "--older-than", "1D"], n),
        (["prune", "--run", str(tmp_path / "pop-only"), "--dry-run"], n),
        (["prune", "--output", out, "--run", str(tmp_path / "pop-only")], n // 2),
    ):
        monkeypatch.setattr(sys, "argv", ["sweval", "cache", *argv])
        main()
        assert len(stored_units(own_unit_store)) == remaining
    monkeypatch.setattr(sys, "argv", ["sweval", "cache", "size", "--output", out])
    main()
    assert "pop-n" in capsys.readouterr().out


def stored_units(store: Path) -> list[Path]:
    return sorted(store.glob("*/*/unit.json"))


def age_units(store: Path, days: float) -> None:
    """Make every unit of ``store`` last used ``days`` ago: its directory's modification time,
    which ``cache prune --older-than`` reads."""
    for record in stored_units(store):
        used = record.parent.stat().st_mtime - days * 86400
        os.utime(record.parent, (used, used))


@pytest.mark.slow
def test_cache_prune_run_prunes_the_store_that_run_used(tmp_path, monkeypatch, capsys,
                                                        user_cache):
    """--run DIR without --cache/--output: the store DIR's config.json records (the user's
    store for a run given none, the --cache it was given), and for a comparison (several
    units.csv) the store its compare.json records. Before, the store was runs/latest/units,
    which did not even exist: 'would delete 0 units'."""
    from sweval.data.synthetic import generate_log
    from sweval.flows.cli.compare import run_compare

    monkeypatch.chdir(tmp_path)  # no runs/latest here
    own, shared = tmp_path / "own", tmp_path / "shared"
    evaluate_config(config(tmp_path, output=str(own)))
    evaluate_config(config(tmp_path, algorithms=["pop"], output=str(tmp_path / "b"), cache=str(shared)))
    n_own, n_shared = len(stored_units(user_cache)), len(stored_units(shared))
    assert n_own > n_shared > 0

    assert sweval_cli("cache", "prune", "--run", own, "--dry-run") == 0
    assert f"would delete {n_own} units" in capsys.readouterr().out
    assert sweval_cli("cache", "prune", "--run", tmp_path / "b") == 0
    assert f"deleted {n_shared} units" in capsys.readouterr().out
    assert stored_units(shared) == [] and len(stored_units(user_cache)) == n_own

    log = InteractionLog.from_frame(generate_log(scale=0.02, seed=1, days=30), source="small")
    store = tmp_path / "cmp-units"
    small = EvalConfig.build(scale=0.02, seed=1, window="1D", folds=2, u_min=3, k=[5],
                             algorithms=["pop"], progress=False, tracking=False, cache=str(store))
    comparison = tmp_path / "cmp"
    run_compare(small, ["sw-eval", "loocv"], output=comparison, loocv_repeats=1, log=log)
    n_loocv = len(pd.read_csv(comparison / "loocv" / "units.csv"))
    n_compare = len(stored_units(store))
    assert n_compare > n_loocv > 0
    assert sweval_cli("cache", "prune", "--run", comparison, "--dry-run") == 0
    assert f"would delete {n_compare} units" in capsys.readouterr().out
    assert sweval_cli("cache", "prune", "--run", comparison / "loocv") == 0  # one protocol
    assert f"deleted {n_loocv} units" in capsys.readouterr().out
    assert len(stored_units(store)) == n_compare - n_loocv


def test_cache_prune_older_than_goes_by_last_use_not_by_write_time(tmp_path, monkeypatch, capsys,
                                                                   user_cache):
    """Units written two days ago that a run reused today (as a rolling series reuses its
    earlier windows every day) were pruned by --older-than 1D: it went by write time. A reused
    unit counts as used; the units no run reused since are still pruned."""
    import json

    out = Path(config(tmp_path).output)
    evaluate_config(config(tmp_path))
    n_units = len(stored_units(user_cache))
    age_units(user_cache, 2)  # every unit written two days ago
    written = {path: path.stat().st_mtime_ns for path in stored_units(user_cache)}
    reused = evaluate_config(config(tmp_path, algorithms=["pop"]))
    assert reused.n_reused == n_units // 2 and reused.n_computed == 0
    assert {path: path.stat().st_mtime_ns for path in written} == written  # files not rewritten
    assert sweval_cli("cache", "prune", "--older-than", "1D", "--output", out) == 0
    assert f"deleted {n_units - reused.n_reused} units" in capsys.readouterr().out
    left = [json.loads(path.read_text())["algorithm"] for path in stored_units(user_cache)]
    assert left == ["pop"] * reused.n_reused


def test_cache_prune_run_finds_a_relative_cache_from_any_current_directory(
    tmp_path, monkeypatch, capsys
):
    """A run started in proj/ with --output runs/a --cache shared: `prune --run` from elsewhere
    looked for ./shared ('no unit store at shared'). The run records its store's absolute
    directory (config.json, compare.json); an older record's relative --cache is taken from the
    directory the run was started in, which its relative --output tells."""
    import json

    from sweval.data.synthetic import generate_log
    from sweval.flows.cli.compare import run_compare

    monkeypatch.delenv("SWEVAL_CACHE", raising=False)
    project, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(project)
    evaluate_config(config(tmp_path, algorithms=["pop"], output="runs/a", cache="shared"))
    n_units = len(stored_units(project / "shared"))

    log = InteractionLog.from_frame(generate_log(scale=0.02, seed=1, days=30), source="small")
    small = EvalConfig.build(scale=0.02, seed=1, window="1D", folds=2, u_min=3, k=[5],
                             algorithms=["pop"], progress=False, tracking=False,
                             cache="shared-cmp")
    run_compare(small, ["sw-eval", "loocv"], output=Path("cmp"), loocv_repeats=1, log=log)
    n_loocv = len(pd.read_csv(project / "cmp/loocv/units.csv"))

    monkeypatch.chdir(elsewhere)
    assert sweval_cli("cache", "prune", "--run", project / "runs/a", "--dry-run") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"would delete {n_units} units" in out
    assert unwrapped(project / "shared") in unwrapped(out)
    record = json.loads((project / "runs/a/config.json").read_text())
    assert record["config"]["cache"] == "shared"
    assert record["unit_store"] == str(project / "shared")
    for name in ("runs/a/config.json", "cmp/compare.json"):  # as recorded before unit_store
        path = project / name
        path.write_text(json.dumps(json.loads(path.read_text()) | {"unit_store": None}))
    assert sweval_cli("cache", "prune", "--run", "../proj/runs/a", "--dry-run") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"would delete {n_units} units" in out
    assert unwrapped(project / "shared") in unwrapped(out)
    assert sweval_cli("cache", "prune", "--run", project / "cmp/loocv") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"deleted {n_loocv} units" in out
    assert unwrapped(project / "shared-cmp") in unwrapped(out)

    path = project / "runs/a/config.json"  # an absolute --output does not tell where it started
    record = json.loads(path.read_text())
    record["config"]["output"] = str(project / "runs/a")
    path.write_text(json.dumps(record))
    assert sweval_cli("cache", "prune", "--run", path.parent, "--dry-run") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{path} records the relative --cache 'shared'" in err and "--cache DIR" in err


@pytest.mark.parametrize("argv", [
    ["list", "--output", "runs/nothere"],
    ["size"],
    ["prune", "--older-than", "1D", "--cache", "nothere"],
    ["prune", "--run", "run-without-store"],
])
def test_cache_commands_refuse_a_store_that_does_not_exist(tmp_path, monkeypatch, capsys, argv,
                                                           user_cache):
    """A mistyped store is an error naming it (status 2), not an empty store; an existing empty
    store is still reported as empty."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run-without-store").mkdir()
    pd.DataFrame({"unit_key": ["ab" * 12]}).to_csv(tmp_path / "run-without-store" / "units.csv")
    assert sweval_cli("cache", *argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "error: no unit store at " in err and "--cache DIR" in err

    (tmp_path / "empty" / "units").mkdir(parents=True)
    assert sweval_cli("cache", "list", "--output", "empty") == 0
    assert "unit store empty/units: empty" in capsys.readouterr().out
    assert sweval_cli("cache", "size", "--cache", "empty/units") == 0
    assert re.search(r"total\W+0\b", capsys.readouterr().out)


def test_cache_prune_deletes_the_lock_files_of_its_units_unless_a_run_holds_one(
    tmp_path, monkeypatch, capsys, user_cache
):
    """A unit's lock file goes with the unit (taken without waiting, deleted while held); a
    unit whose lock another process holds (a run computing it) is left, with its lock file.
    list and size count units, never lock files."""
    import subprocess
    import textwrap

    def unit_lock_path(store: Path, key: str) -> Path:
        return store / key[:2] / f".{key}.lock"

    out = Path(config(tmp_path).output)
    evaluate_config(config(tmp_path))
    store = user_cache
    keys = [path.parent.name for path in stored_units(store)]
    assert sorted(store.glob("*/.*.lock")) == sorted(unit_lock_path(store, k) for k in keys)
    entries = list(UnitStore(store).entries())  # what list and size show
    assert sorted(entry.key for entry in entries) == sorted(keys)
    assert sum(entry.size_bytes for entry in entries) == sum(
        path.stat().st_size for path in store.glob("[0-9a-f][0-9a-f]/*/*"))  # units' files only
    assert sweval_cli("cache", "size", "--output", out) == 0
    assert re.search(rf"total\W+{len(keys)}\b", capsys.readouterr().out)

    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from filelock import FileLock
            lock = FileLock({str(unit_lock_path(store, keys[0]))!r}, thread_local=False)
            lock.acquire()
            print("held", flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        age_units(store, 2)  # every unit written two days ago
        assert sweval_cli("cache", "prune", "--older-than", "1D", "--output", out) == 0
        printed = " ".join(capsys.readouterr().out.split())
        assert f"deleted {len(keys) - 1} units" in printed and "left 1" in printed
        assert [path.parent.name for path in stored_units(store)] == [keys[0]]
        assert list(store.glob("*/.*.lock")) == [unit_lock_path(store, keys[0])]
    finally:
        holder.communicate("")
    assert sweval_cli("cache", "prune", "--older-than", "1D", "--output", out) == 0
    assert stored_units(store) == [] and list(store.glob("*/.*.lock")) == []


# ------------------------------------------------------------------------------ after an upgrade
@pytest.mark.slow
def test_units_of_other_code_are_recomputed_not_mixed_and_the_run_says_how_many(
    tmp_path, fits, monkeypatch, capsys, caplog, own_unit_store
):
    """An upgrade that changes pop's code (faked: its code version differs): the 3 pop units
    stored by the old code are recomputed, not reused, and the run says so; pop-n's are reused."""
    import logging

    from sweval.evaluators.units import unit as units
    from sweval.flows.cli.app import main

    output = tmp_path / "x"
    base = ["sweval", "run", "--no-prefect", "--no-tracking", "--no-progress",
            "--data", "movielens-latest-small", "--window", "7D", "--u-min", "3",
            "--algorithms", "pop,pop-n", "--output", str(output)]
    monkeypatch.setattr(sys, "argv", [*base, "--folds", "3"])
    main()
    assert "reused 0 units, computed 6\n" in capsys.readouterr().out
    old_pop = units.code_version("pop")

    real = units.code_version
    monkeypatch.setattr(units, "code_version",
                        lambda name: "0123456789abcdef" if name == "pop" else real(name))
    fits.clear()
    monkeypatch.setattr(sys, "argv", [*base, "--folds", "4"])
    with caplog.at_level(logging.INFO, logger="sweval.evaluators.run.evaluate"):
        main()
    # pop: 4 units (3 were the old code's), pop-n: the new earliest fold only
    assert sorted(fits) == [(0, "pop"), (0, "pop-n"), (1, "pop"), (2, "pop"), (3, "pop")]
    line = "reused 3 units, computed 5 (3 because the code changed)"
    assert f"units: {line}" in capsys.readouterr().out
    # the run's log says the same before the work (the flow logs it too)
    assert "reusing 3 units, computing 5 (3 because the code changed)" in caplog.text

    # Nothing is mixed or deleted: the store holds pop's 3 old units and its 4 new ones apart.
    stored = list(UnitStore(own_unit_store).records())
    pop_codes = sorted(r["code"] for r in stored if r["algorithm"] == "pop")
    assert pop_codes == sorted([old_pop] * 3 + ["0123456789abcdef"] * 4)
    # Same numbers as a run that never saw the old units (the faked upgrade changed no formula).
    fresh = tmp_path / "fresh"
    monkeypatch.setattr(sys, "argv", [*base[:-1], str(fresh), "--folds", "4"])
    main()
    assert (fresh / "results.csv").read_bytes() == (output / "results.csv").read_bytes()


def test_a_rerun_after_the_upgrade_reuses_the_new_units_and_counts_no_code_change(
    tmp_path, fits, monkeypatch
):
    from sweval.evaluators.units import unit as units

    evaluate_config(config(tmp_path, folds=2))
    real = units.code_version
    monkeypatch.setattr(units, "code_version", lambda name: real(name)[::-1])
    upgraded = evaluate_config(config(tmp_path, folds=2))
    assert (upgraded.n_reused, upgraded.n_computed, upgraded.n_code_changed) == (0, 4, 4)
    fits.clear()
    again = evaluate_config(config(tmp_path, folds=2))
    assert fits == [] and (again.n_reused, again.n_computed, again.n_code_changed) == (4, 0, 0)


def test_a_unit_pruned_while_the_run_reuses_it_is_computed_again(tmp_path, monkeypatch):
    """`sweval cache prune` beside a run deleted units the run had planned to reuse: reading them
    back at the end crashed the run (RuntimeError: has not been computed). They are computed
    again, to the same numbers."""
    from sweval.evaluators.run.driver import Driver

    first = evaluate_config(config(tmp_path)).results
    real_collect = Driver.collect

    def then_prune(driver):
        assert driver.store.remove(driver.work.units[0].key)  # what a concurrent prune does
        return real_collect(driver)

    monkeypatch.setattr(Driver, "collect", then_prune)
    again = evaluate_config(config(tmp_path))
    pd.testing.assert_frame_equal(again.results, first)
    assert again.units["reused"].tolist() == [False] + [True] * (len(again.units) - 1)
    assert (again.n_computed, again.n_reused) == (1, len(again.units) - 1)  # the summary's count


def test_a_unit_whose_lists_were_cut_short_is_computed_again(tmp_path: Path, caplog,
                                                             own_unit_store) -> None:
    """QA: a truncated or emptied lists.parquet stopped every run ("delete that directory to
    recompute it"), one damaged unit per attempt; it is now found at planning and recomputed,
    with a warning, and the tables are the same."""
    first = evaluate_config(config(tmp_path))
    lists = sorted(own_unit_store.glob("*/*/lists.parquet"))
    assert len(lists) == first.n_computed >= 2
    lists[0].write_bytes(lists[0].read_bytes()[:100])  # cut short
    lists[1].write_bytes(b"")  # emptied
    before = (tmp_path / "out" / "results.csv").read_bytes()
    with caplog.at_level("WARNING", logger="sweval.evaluators.units.store"):
        again = evaluate_config(config(tmp_path))
    assert again.n_computed == 2 and again.n_reused == first.n_computed - 2
    assert (tmp_path / "out" / "results.csv").read_bytes() == before
    assert caplog.text.count("is missing or cut short; computing it again") == 2


def test_a_unit_whose_lists_changed_in_place_is_computed_again(tmp_path: Path, caplog,
                                                               own_unit_store) -> None:
    """Lists damaged in place (bytes flipped, the size kept: the footer check at planning passes)
    or copied over from another unit stopped the run, one unit per attempt, or were reused as
    they were: each unit's record holds its lists' SHA-256, checked as they are read; such a
    unit is computed again, with a warning, to the same tables."""
    first = evaluate_config(config(tmp_path))
    lists = sorted(own_unit_store.glob("*/*/lists.parquet"))
    assert len(lists) == first.n_computed >= 3
    flipped = bytearray(lists[0].read_bytes())
    middle = len(flipped) // 2
    flipped[middle : middle + 8] = bytes(255 - b for b in flipped[middle : middle + 8])
    lists[0].write_bytes(bytes(flipped))  # same size, still ends in PAR1
    lists[1].write_bytes(lists[2].read_bytes())  # another unit's (whole, readable) lists
    before = (tmp_path / "out" / "results.csv").read_bytes()
    with caplog.at_level("WARNING"):
        again = evaluate_config(config(tmp_path))
    assert again.n_computed == 2 and again.n_reused == first.n_computed - 2
    assert (tmp_path / "out" / "results.csv").read_bytes() == before
    damaged = {str(path.parent) for path in lists[:2]}
    said = [r.getMessage() for r in caplog.records if "computing it again" in r.getMessage()]
    assert len(said) == 2 and {m.split(":")[0] for m in said} == damaged
    assert all("SHA-256 differs" in m or "unreadable unit" in m for m in said)
    assert any("SHA-256 differs" in m for m in said)  # the copy reads: only the hash tells
    # the units were saved again, whole: a third run reuses every one, silently
    caplog.clear()
    with caplog.at_level("WARNING"):
        third = evaluate_config(config(tmp_path))
    assert third.n_computed == 0 and "computing it again" not in caplog.text
    assert (tmp_path / "out" / "results.csv").read_bytes() == before


def test_a_unit_written_without_a_checksum_is_read_unchecked(tmp_path: Path,
                                                              own_unit_store) -> None:
    """Units stored before records held the lists' SHA-256 are reused as they are."""
    first = evaluate_config(config(tmp_path))
    records = stored_units(own_unit_store)
    for path in records:
        record = json.loads(path.read_text())
        assert len(record.pop("lists_sha256")) == 64
        path.write_text(json.dumps(record))
    again = evaluate_config(config(tmp_path))
    assert again.n_computed == 0 and again.n_reused == first.n_computed


def test_an_unchecked_unit_holding_another_units_lists_is_computed_again(
        tmp_path: Path, caplog, own_unit_store) -> None:
    """A unit written before records held the lists' SHA-256, holding another fold's lists (a
    copy, a restored backup) ended the run in a traceback ("the lists rank other users than
    the split evaluates"), and one holding another log's lists in an error telling to delete
    it: both are computed again, with a warning, to the same tables."""
    first = evaluate_config(config(tmp_path))
    before = (tmp_path / "out" / "results.csv").read_bytes()
    records = {path: json.loads(path.read_text()) for path in stored_units(own_unit_store)}
    pop = sorted((r["split_index"], path) for path, r in records.items()
                 if r["label"] == "pop")
    (_, target), (_, other) = pop[0], pop[-1]  # the first fold's, the last fold's
    for path, record in records.items():
        record.pop("lists_sha256")
        path.write_text(json.dumps(record))
    (target.parent / "lists.parquet").write_bytes((other.parent / "lists.parquet").read_bytes())
    foreign = next(path for path in records if path not in (target, other))
    table = pd.read_parquet(foreign.parent / "lists.parquet")
    table["user"] = "nobody-" + table["user"].astype(str)
    table.to_parquet(foreign.parent / "lists.parquet")
    with caplog.at_level("WARNING"):
        again = evaluate_config(config(tmp_path))
    assert again.n_computed == 2 and again.n_reused == first.n_computed - 2
    assert (tmp_path / "out" / "results.csv").read_bytes() == before
    said = [r.getMessage() for r in caplog.records if "computing it again" in r.getMessage()]
    assert sorted(m.split(":")[0] for m in said) == sorted(str(p.parent) for p in (target, foreign))
    assert any("rank other users than its window evaluates" in m for m in said)
    assert any("ranks ids this log does not have" in m for m in said)


def test_cache_prune_deletes_what_killed_writes_left_once_an_hour_old(
    tmp_path, monkeypatch, capsys, user_cache
):
    """A SIGKILL in the middle of a unit's write leaves a hidden temporary file in its directory,
    or a unit directory whose record was never written; no run reads them and nothing deleted
    them. Every prune (whatever it selects) deletes those an hour old, under the unit's lock;
    finished units and younger leftovers stay, and --dry-run only counts them."""
    out = Path(config(tmp_path).output)
    first = evaluate_config(config(tmp_path))
    store = user_cache
    records = stored_units(store)
    finished_dir = records[0].parent
    stale_tmp = finished_dir / ".lists.parquet.k1ll3d.tmp"
    stale_tmp.write_bytes(b"x" * 1000)
    fresh_tmp = finished_dir / ".unit.json.n0wn0w.tmp"  # a write in progress, maybe
    fresh_tmp.write_bytes(b"{")
    unfinished = store / "ab" / ("ab" + "0" * 22)  # lists written, the record never
    unfinished.mkdir(parents=True)
    (unfinished / "lists.parquet").write_bytes(b"y" * 2000)
    hours_ago = time.time() - 2 * 3600
    for path in (stale_tmp, unfinished / "lists.parquet"):
        os.utime(path, (hours_ago, hours_ago))

    assert sweval_cli("cache", "prune", "--older-than", "30D", "--output", out,
                         "--dry-run") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "would delete 0 units" in said
    assert "would also delete 2 file(s) left by killed writes (2.9 KiB)" in said
    assert stale_tmp.exists() and unfinished.exists()

    assert sweval_cli("cache", "prune", "--older-than", "30D", "--output", out) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "deleted 0 units" in said and "also deleted 2 file(s) left by killed writes" in said
    assert not stale_tmp.exists() and not unfinished.exists()
    assert not (store / "ab" / f".{unfinished.name}.lock").exists()
    assert fresh_tmp.exists()  # younger than an hour: kept
    assert stored_units(store) == records  # every finished unit stays, and is reused whole
    again = evaluate_config(config(tmp_path))
    assert again.n_computed == 0 and again.n_reused == first.n_computed
