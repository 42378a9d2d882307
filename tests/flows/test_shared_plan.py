"""The run's plan shipped next to the shared log (evaluators/run/shared_plan.py): a job in another
process loads it onto the mapped log instead of planning the run again."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import pytest


def test_a_fold_task_uses_the_flows_plan_instead_of_planning_again(
    write_log, make_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sweval.evaluators.run.evaluate as evaluate
    from sweval.evaluators.run import work as works
    from sweval.evaluators.run.driver import Driver
    from sweval.evaluators.run.evaluate import prepare
    from sweval.evaluators.run.work import work_of
    from sweval.flows.executors import compute_remote

    prepared = prepare(make_config(write_log(8), tracking=False))
    job = Driver(prepared.work, prepared.recipe.store()).jobs()[0]
    folder = prepared.share()
    recipe = replace(prepared.recipe, shared_log=str(folder))
    assert list(folder.glob("plan-*.pkl"))
    works._WORKS.clear()  # as on a fresh worker process

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the worker planned the run again")

    monkeypatch.setattr(evaluate, "make_plan", refuse)
    outcome = compute_remote(recipe, job)
    assert outcome.measured and not outcome.failed
    work = work_of(recipe)
    assert [unit.key for unit in work.units] == [unit.key for unit in prepared.work.units]
    assert all(unit.split.log is not prepared.plan.log for unit in work.units)
    assert len({id(unit.split.log) for unit in work.units}) == 1  # the mapped log, not copies
    prepared.unshare()


def test_a_plan_that_cannot_be_pickled_is_not_shared(tmp_path: Path, write_log,
                                                     make_config) -> None:
    from dataclasses import replace

    from sweval.evaluators.run.evaluate import prepare
    from sweval.evaluators.run.shared_plan import read_plan, write_plan

    plan = prepare(make_config(write_log(8), tracking=False)).plan
    unpicklable = replace(plan, searches=[threading.Lock()])  # type: ignore[list-item]
    folder = tmp_path / "shared"
    folder.mkdir()
    assert not write_plan(unpicklable, folder / "plan.pkl")
    assert not list(folder.iterdir())
    assert read_plan(folder / "plan.pkl", plan.log) is None
