"""Live runs of a unit store: `sweval cache prune` keeps what they use, and a run still writing
its output directory is named, not taken for a directory without units.csv."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sweval_testing import sweval_cli
from test_units import age_units, config, stored_units

from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.units.locks import registrants
from sweval.evaluators.units.store import RUNS_FOLDER, UnitStore


@contextmanager
def holding(script: str, *args: str | Path) -> Iterator[subprocess.Popen[str]]:
    """Run ``script`` (Python, which prints ``ready`` once it holds what it holds, then sleeps)
    in another process for the block; SIGKILL it at the end."""
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process
    finally:
        process.kill()
        process.wait(timeout=30)


USES_THE_STORE = """
    import sys, time
    from sweval.evaluators.units.store import UnitStore
    store = UnitStore(sys.argv[1])
    with store.in_use():
        if sys.argv[2:] != ["--planning"]:
            for key in sys.argv[2:]:  # as a run finds the units it will reuse when it plans
                assert store.has(key)
            store.planned()
        print("ready", flush=True)
        time.sleep(600)
"""


def test_a_live_runs_registration_is_seen_while_it_lives_and_cleared_once_it_is_killed(tmp_path):
    folder = tmp_path / "store" / RUNS_FOLDER
    before = time.time()
    with holding(USES_THE_STORE, tmp_path / "store") as process:
        live = registrants(folder)
        assert [record["pid"] for record in live] == [process.pid]
        assert before <= live[0]["since"] <= time.time()
        process.send_signal(signal.SIGKILL)  # no clean-up of its own: the kernel drops its lock
        process.wait(timeout=30)
        assert len(list(folder.glob("*.lock"))) == 1
        assert registrants(folder) == []
        assert list(folder.glob("*.lock")) == []  # the reader removed the dead run's file
    store = UnitStore(tmp_path / "store")
    with store.in_use():
        assert [record["pid"] for record in store.live_runs()] == [os.getpid()]
    assert store.live_runs() == [] and list(folder.glob("*.lock")) == []


@pytest.mark.slow
def test_prune_keeps_the_units_a_live_run_uses_and_says_so(tmp_path, monkeypatch, capsys,
                                                           user_cache):
    """QA: `prune --older-than 1s` during a run deleted units the run had just reused or
    computed; a run that had planned to reuse a unit then failed to load it."""
    out = Path(config(tmp_path).output)
    evaluate_config(config(tmp_path))
    store = user_cache
    age_units(store, 2)
    pop = [path.parent.name for path in stored_units(store) if '"pop"' in path.read_text()]
    n_units = len(stored_units(store))
    assert 0 < len(pop) < n_units
    with holding(USES_THE_STORE, store, *pop) as process:
        time.sleep(1.5)  # the reused units are older than --older-than 1s by now
        assert sweval_cli("cache", "prune", "--older-than", "1s", "--output", out) == 0
        said = " ".join(capsys.readouterr().out.split())
        assert f"deleted {n_units - len(pop)} units" in said
        assert f"kept {len(pop)} that running sweval commands use or may use (pid {process.pid}" \
            in said
        assert sorted(path.parent.name for path in stored_units(store)) == sorted(pop)
    assert sweval_cli("cache", "prune", "--older-than", "1s", "--output", out) == 0
    assert f"deleted {len(pop)} units" in capsys.readouterr().out  # the run is gone
    assert stored_units(store) == []


def test_prune_keeps_every_unit_while_a_live_run_has_not_planned(tmp_path, monkeypatch, capsys,
                                                                 user_cache):
    """QA: a prune between a run's start and its planning (the log loading: 1.45 s there)
    deleted 396 units the run then recomputed; a comparison finds its units as it goes."""
    out = Path(config(tmp_path).output)
    evaluate_config(config(tmp_path))
    store = user_cache
    age_units(store, 2)
    n_units = len(stored_units(store))
    with holding(USES_THE_STORE, store, "--planning"):
        assert sweval_cli("cache", "prune", "--older-than", "1s", "--output", out) == 0
        assert f"deleted 0 units (0 B) from {store}; kept {n_units} that running sweval " \
            in " ".join(capsys.readouterr().out.split())
        assert len(stored_units(store)) == n_units


def test_a_unit_found_after_prune_chose_it_is_not_deleted(tmp_path, user_cache):
    evaluate_config(config(tmp_path))
    store_path = user_cache
    age_units(store_path, 2)
    store = UnitStore(store_path)
    chosen = list(store.entries())
    assert store.has(chosen[0].key)  # a run finds it after prune listed it
    assert not store.remove(chosen[0].key, last_used=chosen[0].last_used)
    assert store.remove(chosen[1].key, last_used=chosen[1].last_used)
    assert store.has(chosen[0].key) and not store.has(chosen[1].key)


def test_prune_run_of_a_run_still_writing_names_it(tmp_path, monkeypatch, capsys):
    """It said "no units.csv with a unit_key column (not a run directory?)"."""
    script = """
        import sys, time
        from sweval.evaluators.units.locks import output_lock
        with output_lock(sys.argv[1]):
            print("ready", flush=True)
            time.sleep(600)
    """
    running = tmp_path / "running"
    with holding(script, running) as process:
        assert sweval_cli("cache", "prune", "--run", running, "--cache",
                             tmp_path) == 2
        said = " ".join("".join(capsys.readouterr()).split())
        assert f"a sweval run is writing there (pid {process.pid}" in said
        assert "its units.csv is written when it ends" in said
    assert sweval_cli("cache", "prune", "--run", running, "--cache", tmp_path) == 2
    assert "no units.csv with a unit_key column" in "".join(capsys.readouterr())


def test_a_lifetime_registration_is_removed_when_its_process_exits(tmp_path):
    """QA: every command that used `sweval up`'s servers left its file in server-users/ (only
    a later `status` or `down` cleared them)."""
    folder = tmp_path / "server-users"
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                    "from sweval.evaluators.units.locks import register_for_life; "
                    "register_for_life(Path(sys.argv[1])); "
                    "assert len(list(Path(sys.argv[1]).glob('*.lock'))) == 1; "
                    "import gc; gc.freeze()",  # as the sweval command exits
                    str(folder)], check=True, timeout=120)
    assert list(folder.glob("*.lock")) == []


class _LoadingTheLog(Exception):
    """Raised where a command loads its log, once it has seen its own registration."""


@pytest.mark.parametrize("command", ["compare", "leakage", "gap"])
def test_commands_that_find_units_as_they_go_register_before_loading_the_log(
    command: str, tmp_path: Path, monkeypatch, user_cache: Path
) -> None:
    """A prune while `compare`, `leakage` or `gap` loaded its log (seconds on a large one)
    deleted units it was about to reuse: they registered only once the log was loaded."""
    from sweval.evaluators.experiments import compare as compare_library
    from sweval.evaluators.experiments import gap as gap_library
    from sweval.evaluators.experiments import leakage_run
    from sweval.evaluators.experiments.gap import GapDesign
    from sweval.evaluators.experiments.leakage import SeverityDesign
    from sweval.flows.cli import compare, gap, leakage

    store = UnitStore(user_cache)

    def loading(*_args: object, **_kwargs: object) -> None:
        assert [record["pid"] for record in store.live_runs()] == [os.getpid()]
        raise _LoadingTheLog

    with pytest.raises(_LoadingTheLog):
        if command == "compare":
            monkeypatch.setattr(compare_library, "load_data", loading)
            compare.run_compare(config(tmp_path), ["sw-eval"], output=tmp_path / command)
        elif command == "leakage":
            monkeypatch.setattr(leakage_run, "load_data", loading)
            leakage.run_leakage(config(tmp_path), SeverityDesign(test_start=0, period_s=86400,
                                                                 periods=1),
                                output=tmp_path / command)
        else:
            monkeypatch.setattr(gap_library, "load_data", loading)
            gap.run_gap(config(tmp_path), GapDesign(deploy_start=0, width_s=86400),
                        output=tmp_path / command)
    assert store.live_runs() == []


def test_a_lock_record_masks_the_password_in_its_command_line(monkeypatch):
    """The record of a lock's holder (read by other users, printed by `sweval status` and in
    'locked' errors) shows a --tracking-uri's password masked."""
    from sweval.evaluators.units.locks import owner_record

    monkeypatch.delenv("PREFECT__FLOW_RUN_ID", raising=False)
    monkeypatch.setattr(sys, "argv", ["/venv/bin/sweval", "run", "--tracking-uri",
                                      "postgresql://ana:s3cret@db.internal:5432/mlflow"])
    assert owner_record()["command"] == (
        "sweval run --tracking-uri postgresql://ana:***@db.internal:5432/mlflow")
