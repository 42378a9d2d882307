"""The flow's plan shipped next to the shared log (flows/dask/shared_plan.py): a fold task in another
process loads it onto the mapped log instead of planning the run again."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest


def test_a_fold_task_uses_the_flows_plan_instead_of_planning_again(
    write_log, make_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sweval.flows.pipeline as pipeline
    from sweval.flows.pipeline import _PLANS, Evaluation, compute_fold, prepare

    prepared = prepare(make_config(write_log(8), tracking=False))
    evaluation = Evaluation(prepared)
    job = evaluation.jobs()[0]
    evaluation.share_log()
    assert list(Path(evaluation.shared_log).glob("plan-*.pkl"))
    _PLANS.clear()  # as on a fresh worker process

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the worker planned the run again")

    monkeypatch.setattr(pipeline, "make_plan", refuse)
    outcome = compute_fold(**evaluation.job_parameters(job))
    assert outcome.measured and not outcome.failed
    plan = next(iter(_PLANS.values()))
    assert plan is not prepared.plan and plan.key == prepared.plan.key
    assert [unit.key for unit in plan.units] == [unit.key for unit in prepared.plan.units]
    assert all(split.log is plan.log for split in plan.splits)  # the mapped log, not a copy
    evaluation.unshare_log()


def test_a_plan_that_cannot_be_pickled_is_not_shared(tmp_path: Path, write_log,
                                                     make_config) -> None:
    from dataclasses import replace

    from sweval.flows.pipeline import prepare
    from sweval.flows.dask.shared_plan import read_plan, write_plan

    plan = prepare(make_config(write_log(8), tracking=False)).plan
    unpicklable = replace(plan, searches=[threading.Lock()])  # type: ignore[list-item]
    folder = tmp_path / "shared"
    folder.mkdir()
    assert not write_plan(unpicklable, folder / "plan.pkl")
    assert not list(folder.iterdir())
    assert read_plan(folder / "plan.pkl", plan.log) is None
