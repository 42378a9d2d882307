"""What a job sends back (evaluators/run/driver.py): its units measured at the run's k, from
which the command writes its tables without reading the units back; their lists only for a
cluster that may not share the command's unit store."""

from __future__ import annotations

import pandas as pd
import pytest

from sweval.evaluators.run.driver import Driver, compute_group
from sweval.evaluators.run.evaluate import prepare
from sweval.evaluators.run.outputs import tables
from sweval.evaluators.units.store import UnitStore


def test_the_tables_come_from_the_measured_units_and_equal_the_read_back_ones(
    write_log, make_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sweval.evaluators.run.sources import unit_store

    prepared = prepare(make_config(write_log(8), tracking=False))
    plan, work = prepared.plan, prepared.work
    store = unit_store(plan.config)
    driver = Driver(work, store)
    for job in driver.jobs():
        outcome = compute_group(work, job, store)
        assert not outcome.files  # the store is the command's own
        driver.accept(job, outcome)
    assert len(driver.measured) == len(driver.computed) == len(plan.units)
    read_back = Driver(work, store).collect()  # every unit loaded and measured

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a unit was read back from the store")

    monkeypatch.setattr(UnitStore, "load", refuse)
    measured = driver.collect()
    where = {"directory": plan.config.output, "unit_store": store.directory}
    expected = tables(plan, read_back, work.measurer, **where)
    outputs = tables(plan, measured, work.measurer, **where)
    pd.testing.assert_frame_equal(outputs.results, expected.results)
    pd.testing.assert_frame_equal(outputs.summary, expected.summary)
    pd.testing.assert_frame_equal(outputs.overlap, expected.overlap)


def test_a_cluster_that_may_not_share_the_store_gets_the_lists_asked_for(
    write_log, make_config, tmp_path
) -> None:
    prepared = prepare(make_config(write_log(8), tracking=False, folds=2))
    store = UnitStore(tmp_path / "worker-store").prepare()
    driver = Driver(prepared.work, store)
    for job in driver.jobs():
        outcome = compute_group(prepared.work, job, store, send_lists=True)
        assert outcome.files and outcome.files.keys() == outcome.measured.keys()
