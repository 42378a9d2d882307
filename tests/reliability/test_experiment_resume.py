"""A kill in the middle of ``compare``, ``leakage``, ``gap`` or a retraining run (``--horizon``,
``--cadence``, ``--update``) loses no finished unit.

Each command runs in a child process whose every unit takes an extra 0.3 s, and is killed
(SIGKILL, its whole process group) once a few units are in the store. The rerun, in this
process, computes exactly the units the store lacks, and writes the same tables as an
uninterrupted run into a fresh directory and store.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweval_testing import UNITS_GLOB, sweval_cli

import sweval.evaluators.run.driver

pytestmark = pytest.mark.slow

_SLOW_COMMAND = """
import sys, time
import sweval.evaluators.run.driver as driver
original = driver.compute_unit
def slow(*args, **kwargs):
    time.sleep(0.3)
    return original(*args, **kwargs)
driver.compute_unit = slow
from sweval.flows.cli.app import main
sys.argv = ["sweval", *sys.argv[1:]]
main()
"""

COMMON = ("--window", "1D", "--k", "5", "--u-min", "2", "--no-tracking", "--no-progress",
          "--no-report", "--algorithms", "pop,pop-n,item-knn")
#: (command, its options, the table compared with an uninterrupted run's)
COMMANDS = {
    "compare": (("compare", "--folds", "4", "--protocols", "sw-eval,temporal-global,loocv"),
                "compare.csv"),
    "leakage": (("leakage", "--leak-test-start", "2015-06-10", "--leak-periods", "3"),
                "change.csv"),
    "gap": (("gap", "--start", "2015-06-12"), "gap.csv"),
    # models fitted once per fold serve the next windows (staleness), refitted every c
    # windows or updated in between (cadence): the served and updated units resume too
    "retraining": (("run", "--no-prefect", "--folds", "5", "--horizon", "2", "--cadence",
                    "1,2", "--update"), "staleness.csv"),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log") / "log.csv"
    assert sweval_cli("generate", path, "--scale", "0.02", "--days", "20", "--seed", "3") == 0
    return path


def stored_keys(store: Path) -> set[str]:
    return {json.loads(path.read_text())["key"] for path in store.glob(UNITS_GLOB)}


def kill_when_stored(argv: list[str], store: Path, *, at_least: int) -> set[str]:
    """Run ``sweval ARGV`` slowed down, SIGKILL it once ``at_least`` units are stored; the keys
    of the units it finished."""
    process = subprocess.Popen([sys.executable, "-c", _SLOW_COMMAND, *argv],
                               start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while len(list(store.glob(UNITS_GLOB))) < at_least:
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no unit was stored in time"
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stderr.close()
    return stored_keys(store)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_killed_command_resumes_with_no_finished_unit_recomputed(
    command: str, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options, table = COMMANDS[command]
    argv = [*options, "--data", str(data), *COMMON]
    store, out = tmp_path / "units", tmp_path / "out"
    finished = kill_when_stored([*argv, "--output", str(out), "--cache", str(store)], store,
                                at_least=2)
    assert finished

    computed: list[str] = []
    original = sweval.evaluators.run.driver.compute_unit

    def counting(unit, store, **kwargs):  # noqa: ANN001, ANN003, ANN202
        computed.append(unit.key)
        return original(unit, store, **kwargs)

    monkeypatch.setattr(sweval.evaluators.run.driver, "compute_unit", counting)
    assert sweval_cli(*argv, "--output", out, "--cache", store) == 0
    assert computed, "the kill came after the last unit: nothing was left to resume"
    assert not finished & set(computed), "a finished unit was computed again"
    assert set(computed) == stored_keys(store) - finished

    reference = tmp_path / "reference"
    assert sweval_cli(*argv, "--output", reference, "--cache", tmp_path / "fresh") == 0
    assert (out / table).read_bytes() == (reference / table).read_bytes()
    if command == "retraining":  # the cadences' values too (their seconds are each fit's own)
        import pandas as pd

        timings = ["fit_s", "update_s"]
        pd.testing.assert_frame_equal(pd.read_csv(out / "cadence.csv").drop(columns=timings),
                                      pd.read_csv(reference / "cadence.csv").drop(columns=timings))
        assert len(stored_keys(store)) > 3 * 5  # served and updated units beside the fits
