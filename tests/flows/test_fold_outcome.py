"""What a fold task sends back (flows/pipeline.py): its units measured at the run's k, from
which the flow writes its tables without reading the units back; their lists only for a cluster
that may not share the flow's unit store."""

from __future__ import annotations

import pandas as pd
import pytest

from sweval.evaluators.run.outputs import collect
from sweval.evaluators.units.store import UnitStore


def _run(evaluation, compute_fold) -> list:  # type: ignore[no-untyped-def]
    outcomes = []
    for job in evaluation.jobs():
        outcome = compute_fold(**evaluation.job_parameters(job))
        evaluation.accept(job, outcome)
        outcomes.append(outcome)
    return outcomes


def test_the_tables_come_from_the_measured_units_and_equal_the_read_back_ones(
    write_log, make_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweval.flows.pipeline import Evaluation, compute_fold, prepare

    prepared = prepare(make_config(write_log(8), tracking=False))
    evaluation = Evaluation(prepared)
    outcomes = _run(evaluation, compute_fold)
    assert all(not outcome.files for outcome in outcomes)  # the store is the flow's own
    assert len(evaluation.measuring.results) == evaluation.computed == len(prepared.plan.units)
    read_back = collect(prepared.plan, evaluation.store)  # every unit loaded and measured

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a unit was read back from the store")

    monkeypatch.setattr(UnitStore, "load", refuse)
    outputs = evaluation.outputs()
    pd.testing.assert_frame_equal(outputs.results, read_back.results)
    pd.testing.assert_frame_equal(outputs.summary, read_back.summary)
    pd.testing.assert_frame_equal(outputs.overlap, read_back.overlap)


def test_a_cluster_that_may_not_share_the_store_gets_the_lists_asked_for(
    write_log, make_config
) -> None:
    from sweval.flows.pipeline import Evaluation, compute_fold, prepare

    config = make_config(write_log(8), tracking=False, task_runner="dask",
                         dask_address="tcp://127.0.0.1:1", folds=2)
    evaluation = Evaluation(prepare(config))
    assert all(evaluation.job_parameters(job)["send_lists"] for job in evaluation.jobs())
    for outcome in _run(evaluation, compute_fold):
        assert outcome.files and outcome.files.keys() == outcome.measured.keys()
