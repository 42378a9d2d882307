"""Rolling mode: a second run over a grown log evaluates only the new complete windows and
appends them to the same MLflow runs (one growing series per algorithm)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from flow_helpers import check_mlflow_matches_results
from flow_logs import log_frame
from sweval_testing import DAY, T0, experiment_runs

from sweval.data.timestamps import iso_utc
from sweval.evaluators.run.rolling import progress_line
from sweval.flows.sliding_window import sliding_window_eval


@pytest.mark.slow
def test_rolling_runs_add_only_the_new_windows(
    write_log, make_config, mlflow_uri: str, tmp_path: Path, count_units: list[tuple[int, str]]
) -> None:
    full = log_frame(8.5)
    data = write_log(frame=full[full["timestamp"] < T0 + int(5.5 * DAY)])
    config = make_config(data, folds=1)  # --folds is ignored in rolling mode
    output = Path(config.output)

    sliding_window_eval(config=config, rolling=True)
    # t_0 = day 1, last event in day 5: windows [1,2) .. [4,5) are complete, [5,6) is not
    assert sorted(pd.read_csv(output / "folds.csv")["fold"]) == [0, 1, 2, 3]
    assert sorted({f for f, _ in count_units}) == [0, 1, 3]  # fold 2 (day 3) is skipped
    state = json.loads((output / "rolling.json").read_text())
    assert state["n_folds"] == 4 and state["horizon"] == T0 + 5 * DAY
    assert progress_line(state) == (f"rolling: 4 new windows evaluated (folds 0-3); the series "
                                    f"holds 4, up to {iso_utc(T0 + 5 * DAY)}.")
    skipped = pd.read_csv(output / "folds.csv").query("skipped")["fold"]  # fold 2: day 3
    assert progress_line(state, skipped).startswith(  # QA: all-skipped windows read as evaluated
        "rolling: 4 new windows evaluated (folds 0-3, 1 skipped); the series holds 4")
    first_parent = json.loads((output / "tracking.json").read_text())["parent_run_id"]

    count_units.clear()
    write_log(frame=full)  # the log grew: days 5.5 to 8.5
    sliding_window_eval(config=config, rolling=True)
    assert sorted({f for f, _ in count_units}) == [4, 5, 6]  # windows [5,6) [6,7) [7,8)
    assert len(count_units) == 6
    assert sorted(pd.read_csv(output / "folds.csv")["fold"]) == list(range(7))
    assert progress_line(json.loads((output / "rolling.json").read_text())).startswith(
        "rolling: 3 new windows evaluated (folds 4-6); the series holds 7")
    parent = check_mlflow_matches_results(mlflow_uri, config.experiment, output)
    assert parent.info.run_id == first_parent
    assert parent.data.tags["sweval.mode"] == "rolling"
    assert parent.data.tags["sweval.n_folds"] == "7"

    # Same numbers as one batch run over the grown log with the same windows.
    batch = make_config(data, folds=7, output=str(tmp_path / "batch"), tracking=False)
    sliding_window_eval(config=batch)
    columns = ["fold", "t_start", "t_end", "algorithm", "metric", "k", "value", "n_eligible"]
    rolling_table = pd.read_csv(output / "results.csv")[columns]
    batch_table = pd.read_csv(tmp_path / "batch" / "results.csv")[columns]
    pd.testing.assert_frame_equal(rolling_table, batch_table)

    count_units.clear()
    sliding_window_eval(config=config, rolling=True)  # nothing new
    assert count_units == []
    assert progress_line(json.loads((output / "rolling.json").read_text())).startswith(
        "rolling: no new complete window since the last run; the series holds 7")  # QA: silent
    check_mlflow_matches_results(mlflow_uri, config.experiment, output)


@pytest.mark.slow
def test_rolling_series_restarts_when_history_changes(
    write_log, make_config, mlflow_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    frame = log_frame(6.5)
    data = write_log(frame=frame)
    config = make_config(data, start=None, folds=3)
    output = Path(config.output)
    sliding_window_eval(config=config, rolling=True)
    state = json.loads((output / "rolling.json").read_text())
    # without --start: the last 3 complete windows, t_0 fixed for the series
    assert state["start"] == T0 + 3 * DAY and state["n_folds"] == 3
    first_parent = json.loads((output / "tracking.json").read_text())["parent_run_id"]

    edited = frame.copy()
    edited.loc[0, "item"] = "i29"  # rewrite history before the horizon
    write_log(frame=edited)
    with caplog.at_level("WARNING", logger="sweval.evaluators.run.rolling"):
        sliding_window_eval(config=config, rolling=True)
    horizon = iso_utc(state["horizon"])  # the warning gives the horizon as a date, not seconds
    assert f"rolling: the data before {horizon} changed" in caplog.text
    parents, _ = experiment_runs(mlflow_uri, config.experiment)
    assert len(parents) == 2  # a new series, a new parent run
    assert json.loads((output / "tracking.json").read_text())["parent_run_id"] != first_parent
    restarted = json.loads((output / "rolling.json").read_text())
    assert (restarted["start"], restarted["n_folds"]) == (state["start"], 3)  # QA: not shorter


def test_a_series_restarted_by_a_new_configuration_keeps_its_windows(
    write_log, make_config
) -> None:
    """QA: adding an algorithm restarted the series from --folds' last windows: its earlier
    windows dropped out of results.csv and MLflow. The new series keeps t_0 and every window."""
    from sweval.evaluators.run.rolling import plan_rolling
    from sweval.evaluators.run.sources import load_data

    frame = log_frame(8.5)
    early = frame[frame["timestamp"] < T0 + int(6.5 * DAY)]
    config, state = _recorded_series(write_log, make_config, early)
    write_log(frame=frame)  # two more days, and one more algorithm
    grown = config.model_copy(update={"algorithms": [*config.algorithms, "item-knn"]})
    step = plan_rolling(grown, load_data(grown))
    assert step is not None and step.previous_folds == 0  # a new series ...
    assert int(step.plan.config.start) == state["start"]  # ... over the same windows and more
    assert len(step.plan.folds) == state["n_folds"] + 2


def test_a_series_whose_state_file_is_gone_starts_a_new_parent_run(
    write_log, make_config, caplog: pytest.LogCaptureFixture
) -> None:
    """QA: with rolling.json deleted (or emptied), the next run chose its windows afresh but
    reopened the series' MLflow parent, whose steps were other windows."""
    from sweval.evaluators.run.rolling import plan_rolling, rolling_key
    from sweval.evaluators.run.sources import load_data

    config, _ = _recorded_series(write_log, make_config, log_frame(6.5))
    output = Path(config.output)
    (output / "tracking.json").write_text(json.dumps({"key": rolling_key(config)}))
    (output / "rolling.json").write_text("")
    with caplog.at_level("WARNING", logger="sweval.evaluators.run.rolling"):
        assert plan_rolling(config, load_data(config)) is not None
    assert "rolling.json is missing or unreadable; starting a new series" in caplog.text
    assert not (output / "tracking.json").exists()


def test_a_run_without_rolling_into_a_series_is_refused(write_log, make_config) -> None:
    """QA: a run without --rolling into a series' output replaced its MLflow record, and the
    series' next run logged every window again under a new parent run."""
    from sweval.data.errors import SwevalError
    from sweval.evaluators.run.evaluate import prepare

    config, _ = _recorded_series(write_log, make_config, log_frame(6.5))
    with pytest.raises(SwevalError, match="holds a rolling series .*Pass --rolling"):
        prepare(config)


def test_rolling_without_a_complete_window_does_nothing(write_log, make_config) -> None:
    data = write_log(frame=log_frame(1.5))
    config = make_config(data, start=str(T0 + DAY), tracking=False)
    assert sliding_window_eval(config=config, rolling=True) is None
    assert not (Path(config.output) / "results.csv").exists()


def test_fold_tasks_elsewhere_accept_a_log_that_grew_after_the_horizon(
    write_log, make_config
) -> None:
    """A Dask worker loads the log itself: in rolling mode, events appended after the plan's
    horizon do not matter; in batch mode any change is refused."""
    from sweval.data.errors import SwevalError
    from sweval.evaluators.run import work as works
    from sweval.evaluators.run.driver import Driver
    from sweval.evaluators.run.evaluate import prepare
    from sweval.flows.executors import compute_remote

    full = log_frame(8.5)
    data = write_log(frame=full[full["timestamp"] < T0 + int(5.5 * DAY)])
    rolling = prepare(make_config(data, tracking=False), rolling=True)
    batch = prepare(make_config(data, tracking=False, folds=4, output=str(data.parent / "b")))
    run = Driver(rolling.work, rolling.recipe.store())
    first = run.jobs()[0]
    batch_job = Driver(batch.work, batch.recipe.store()).jobs()[0]
    write_log(frame=full)  # the log grows while the run is going
    works._WORKS.clear()  # as on a fresh worker process
    outcome = compute_remote(rolling.recipe, first)
    assert len(outcome.measured) == 2  # pop and pop-n of the first fold
    # measured on the grown log's codes: the command measures the stored units itself instead
    assert outcome.codes != rolling.plan.log.fingerprint()
    run.accept(first, outcome)
    assert len(run.computed) == 2 and run.measured == {}
    works._WORKS.clear()
    with pytest.raises(SwevalError, match="data changed while the evaluation ran"):
        compute_remote(batch.recipe, batch_job)


def _recorded_series(write_log, make_config, frame: pd.DataFrame):
    """A rolling series of 3 daily windows recorded over ``frame`` (no flow run needed)."""
    from sweval.evaluators.run.rolling import plan_rolling, record
    from sweval.evaluators.run.sources import load_data

    config = make_config(write_log(frame=frame), start=None, folds=3, tracking=False)
    Path(config.output).mkdir(parents=True)
    step = plan_rolling(config, load_data(config))
    assert step is not None
    record(step)
    return config, json.loads((Path(config.output) / "rolling.json").read_text())


@pytest.mark.parametrize(("change", "message"), [
    ("shrank", r"the log now ends at .*, before the end of the windows the rolling series has "
               r"evaluated .*: it lost its latest transactions"),
    ("lost a row", r"transactions before .*at the rolling series' last run: the log lost"),
    ("row cut short", r"1 transaction\(s\) dated before the log's first event at the rolling "
                      r"series' last run \(.*\): \(user u1, item i2, 1970-01-02T00:42:54Z\)\. "
                      r"A row cut short"),
    ("negative time", r"\(user u1, item i2, 1969-12-31T23:59:55Z\)"),
])
def test_a_log_that_lost_transactions_or_gained_some_before_its_start_stops_the_series(
    write_log, make_config, change: str, message: str
) -> None:
    """QA: an export caught half-written (its last row cut to `64,231,88974`: an event in
    1970) or a partial one restarted the series with a warning and changed numbers, and the
    next complete export split the MLflow history again."""
    from sweval.data.errors import SwevalError
    from sweval.evaluators.run.rolling import plan_rolling
    from sweval.evaluators.run.sources import load_data

    frame = log_frame(6.5)
    config, state = _recorded_series(write_log, make_config, frame)
    assert state["prefix_rows"] > 0 and state["first_event"] == frame["timestamp"].min()
    if change == "shrank":
        frame = frame[frame["timestamp"] < state["horizon"] - DAY]
    elif change == "lost a row":
        frame = frame.drop(index=frame.index[frame["timestamp"] < state["horizon"]][-1])
    else:
        stamp = 88_974 if change == "row cut short" else -5
        frame = pd.concat([frame, pd.DataFrame({"user": ["u1"], "item": ["i2"],
                                                "timestamp": [stamp]})])
    write_log(frame=frame)
    with pytest.raises(SwevalError, match=message) as error:
        plan_rolling(config, load_data(config))
    assert "rolling.json and " in str(error.value)
    assert "tracking.json to start a new series" in str(error.value)
    assert (Path(config.output) / "rolling.json").exists()  # the series is kept
    # the remedy: what a series restarting by itself drops (its state and MLflow record)
    for name in ("rolling.json", "tracking.json"):
        (Path(config.output) / name).unlink(missing_ok=True)
    assert plan_rolling(config, load_data(config)) is not None


def test_late_events_restart_the_series_and_say_how_many_transactions_changed(
    write_log, make_config, caplog: pytest.LogCaptureFixture
) -> None:
    from sweval.evaluators.run.rolling import plan_rolling
    from sweval.evaluators.run.sources import load_data

    frame = log_frame(6.5)
    config, state = _recorded_series(write_log, make_config, frame)
    late = pd.DataFrame({"user": ["u1"], "item": ["i2"], "timestamp": [state["horizon"] - 60]})
    write_log(frame=pd.concat([frame, late]))
    with caplog.at_level("WARNING", logger="sweval.evaluators.run.rolling"):
        assert plan_rolling(config, load_data(config)) is not None
    n = state["prefix_rows"]
    assert (f"changed ({n + 1:,} transactions before it now, {n:,} at the last run); "
            "starting a new series") in caplog.text


def test_a_lag_evaluates_a_window_once_the_log_is_that_far_past_its_end(
    write_log, make_config, caplog: pytest.LogCaptureFixture
) -> None:
    """QA: an export that runs a day late split the series at every window (its late events
    landed in a window already evaluated). With --lag 1D they land before it is evaluated."""
    from sweval.evaluators.run.rolling import plan_rolling, record
    from sweval.evaluators.run.sources import load_data

    full = log_frame(6.5)
    config = make_config(write_log(frame=full[full["timestamp"] < T0 + int(4.5 * DAY)]),
                         start=str(T0 + DAY), tracking=False, lag="1D")
    Path(config.output).mkdir(parents=True)
    step = plan_rolling(config, load_data(config))
    assert step is not None and len(step.plan.folds) == 2  # [1,2) [2,3); [3,4) needs day 5
    record(step)
    late = pd.DataFrame({"user": ["u1"], "item": ["i2"], "timestamp": [T0 + 3 * DAY + 60]})
    write_log(frame=pd.concat([full, late]))  # day 3's late event, and the log reached day 6.5
    with caplog.at_level("WARNING", logger="sweval.evaluators.run.rolling"):
        step = plan_rolling(config, load_data(config))
    assert "changed" not in caplog.text  # the same series: the late event is in a new window
    assert step is not None and step.previous_folds == 2 and step.new_folds == [2, 3]
    # a lag raised later keeps what the series evaluated (no "lost transactions" error)
    record(step)
    raised = config.model_copy(update={"lag": "3D"})
    step = plan_rolling(raised, load_data(raised))
    assert step is not None and step.previous_folds == 4 and step.new_folds == []


def test_the_lag_is_a_tag_of_the_series_not_a_write_once_param(make_config, tmp_path) -> None:
    """QA: a lag changed within a series (allowed) warned "MLflow param lag: keeping ..." at
    every run, and the parent kept the old value for good."""
    from sweval.flows.tracking.records import parent_params_and_tags

    config = make_config(tmp_path / "log.csv", lag="2D")
    params, tags = parent_params_and_tags(config, key="k", fingerprint="f", source="s",
                                          mode="rolling", flow_run_id=None, flow_run_name=None)
    assert "lag" not in params and tags["sweval.config.lag"] == "2D"
