"""The log shipped once to fold tasks in other processes (flows/dask/shared_log.py): the mapped log is
the loaded log, and a fold task given it never reads the data file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweval.data.log import InteractionLog
from sweval.flows.dask.shared_log import read_shared, remove_shared, write_shared


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
    from sweval.flows.pipeline import _PLANS, Evaluation, compute_fold, prepare

    data = write_log(8)
    prepared = prepare(make_config(data, tracking=False))
    evaluation = Evaluation(prepared)
    job = evaluation.jobs()[0]
    reference = compute_fold(**evaluation.job_parameters(job))  # the flow's own plan
    evaluation.share_log()
    shared = evaluation.job_parameters(job)
    assert shared["shared_log"] is not None
    data.rename(data.with_suffix(".gone"))  # a worker that read the file would fail now
    for unit in Path(prepared.plan.config.output, "units").glob("*/*"):
        if not unit.is_dir():  # a unit's lock file
            continue
        for file in unit.iterdir():
            file.unlink()
        unit.rmdir()  # nothing to reuse: the task computes every unit again
    _PLANS.clear()  # as on a fresh worker process
    outcome = compute_fold(**shared)
    assert outcome.log == reference.log == prepared.plan.log.fingerprint()
    assert outcome.measured and outcome.measured.keys() == reference.measured.keys()
    for key, result in outcome.measured.items():
        expected = reference.measured[key]
        np.testing.assert_array_equal(result.users, expected.users)
        np.testing.assert_array_equal(result.recommended, expected.recommended)
        assert result.values.keys() == expected.values.keys()
        for metric, values in result.values.items():
            np.testing.assert_array_equal(values, expected.values[metric])
    evaluation.unshare_log()
    assert evaluation.shared_log is None
    assert not Path(prepared.plan.config.output, "shared-log").exists()


def test_a_worker_that_cannot_see_the_shared_log_loads_the_file(write_log, make_config) -> None:
    from sweval.flows.pipeline import _PLANS, Evaluation, compute_fold, prepare

    data = write_log(8)
    evaluation = Evaluation(prepare(make_config(data, tracking=False)))
    job = evaluation.job_parameters(evaluation.jobs()[0])
    _PLANS.clear()
    outcome = compute_fold(**(job | {"shared_log": str(data.parent / "elsewhere")}))
    assert outcome.measured  # planned from the data file, fingerprint checked
