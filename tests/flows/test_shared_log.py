"""The log shipped once to fold tasks in other processes (data/shared.py): the mapped log is
the loaded log, and a fold task given it never reads the data file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweval.data.log import InteractionLog
from sweval.data.shared import read_shared, remove_shared, write_shared


def test_the_mapped_log_equals_the_loaded_one(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "user": ["b", "a", "b", "c", "a", "a"],
            "item": ["x", "y", "x", "z", "x", "y"],
            "timestamp": [5, 1, 3, 9, 2, 1],
            "policy": ["A", "B", "A", "A", "B", "B"],
        }
    )
    log = InteractionLog.from_frame(frame, policy_col="policy", source="frame")
    path = write_shared(log, tmp_path / "shared")
    assert write_shared(log, tmp_path / "shared") == path  # written once, then reused
    mapped = read_shared(path)
    for name in ("user", "item", "timestamp", "policy"):
        assert isinstance(getattr(mapped, name), np.memmap)
        assert not getattr(mapped, name).flags.writeable
        np.testing.assert_array_equal(getattr(mapped, name), getattr(log, name))
    for name in ("user_ids", "item_ids", "policy_ids"):
        np.testing.assert_array_equal(getattr(mapped, name), getattr(log, name))
    assert (mapped.source, mapped.dedup, mapped.n_duplicates) == (
        log.source, log.dedup, log.n_duplicates,
    )  # fmt: skip
    assert mapped.fingerprint() == log.fingerprint()
    assert [p.name for p in (tmp_path / "shared").iterdir()] == [log.fingerprint()]
    remove_shared(tmp_path / "shared")
    assert not (tmp_path / "shared").exists()


def test_a_fold_task_with_the_shared_log_never_reads_the_file(write_log, make_config) -> None:
    from dataclasses import replace

    from sweval.evaluators.run import work as works
    from sweval.evaluators.run.driver import Driver
    from sweval.evaluators.run.evaluate import prepare
    from sweval.flows.executors import compute_remote

    data = write_log(8)
    prepared = prepare(make_config(data, tracking=False))
    job = Driver(prepared.work, prepared.recipe.store()).jobs()[0]
    reference = compute_remote(prepared.recipe, job)  # the command's own work
    shared = replace(prepared.recipe, shared_log=str(prepared.share()))
    data.rename(data.with_suffix(".gone"))  # a worker that read the file would fail now
    for unit in prepared.recipe.store().directory.glob("*/*"):
        if not unit.is_dir():  # a unit's lock file
            continue
        for file in unit.iterdir():
            file.unlink()
        unit.rmdir()  # nothing to reuse: the task computes every unit again
    works._WORKS.clear()  # as on a fresh worker process
    outcome = compute_remote(shared, job)
    assert outcome.codes == reference.codes == prepared.plan.log.fingerprint()
    assert outcome.measured and outcome.measured.keys() == reference.measured.keys()
    for key, result in outcome.measured.items():
        expected = reference.measured[key]
        np.testing.assert_array_equal(result.users, expected.users)
        np.testing.assert_array_equal(result.recommended, expected.recommended)
        assert result.values.keys() == expected.values.keys()
        for metric, values in result.values.items():
            np.testing.assert_array_equal(values, expected.values[metric])
    prepared.unshare()
    assert not Path(prepared.plan.config.output, "shared-log").exists()


def test_a_worker_that_cannot_see_the_shared_log_loads_the_file(write_log, make_config) -> None:
    from dataclasses import replace

    from sweval.evaluators.run import work as works
    from sweval.evaluators.run.driver import Driver
    from sweval.evaluators.run.evaluate import prepare
    from sweval.flows.executors import compute_remote

    data = write_log(8)
    prepared = prepare(make_config(data, tracking=False))
    job = Driver(prepared.work, prepared.recipe.store()).jobs()[0]
    works._WORKS.clear()
    outcome = compute_remote(replace(prepared.recipe, shared_log=str(data.parent / "elsewhere")),
                             job)
    assert outcome.measured  # planned from the data file, fingerprint checked
