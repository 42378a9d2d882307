"""The flow end to end: outputs, MLflow layout and values, task runners, the in-process path."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from flow_helpers import check_mlflow_matches_results
from mlflow import MlflowClient
from sweval_testing import experiment_runs

from sweval.data.errors import SwevalError
from sweval.flows.execute import execute
from sweval.flows.sliding_window import retry_on_io, sliding_window_eval


def test_flow_end_to_end_logs_one_parent_and_one_child_per_algorithm(
    write_log, make_config, mlflow_uri: str, tmp_path: Path
) -> None:
    config = make_config(write_log(8), report=True)  # its files are logged to MLflow
    state = sliding_window_eval(config=config, return_state=True)
    assert state.is_completed()
    outputs = state.result()
    output = Path(config.output)
    for name in ("results.csv", "summary.csv", "folds.csv", "units.csv", "config.json"):
        assert (output / name).exists()
    folds = pd.read_csv(output / "folds.csv")
    assert len(folds) == 7 and folds["skipped"].sum() == 1  # the quiet day, fold 2
    assert len(outputs.results) == len(pd.read_csv(output / "results.csv"))

    parent = check_mlflow_matches_results(mlflow_uri, config.experiment, output)
    tags = parent.data.tags
    assert tags["prefect.flow_run_id"] == str(state.state_details.flow_run_id)
    assert tags["sweval.data_fingerprint"] == outputs_fingerprint(output)
    assert tags["sweval.version"]
    assert tags["sweval.mode"] == "batch"
    assert parent.data.params["window"] == "1D" and parent.data.params["k"] == "5,10"
    assert "scale" not in parent.data.params and "seed" not in parent.data.params  # real data
    client = MlflowClient(mlflow_uri)
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    expected = {"results.csv", "folds.csv", "summary.csv", "config.json", "sweval_config.json",
                "overlap.csv", "report.html", "report-recall-at-10-over-time.png"}
    assert expected <= artifacts
    logged = Path(client.download_artifacts(parent.info.run_id, "report.html", str(tmp_path)))
    assert logged.read_bytes() == (output / "report.html").read_bytes()  # logged once written
    _, children = experiment_runs(mlflow_uri, config.experiment)
    assert {a.path for a in client.list_artifacts(children["pop"].info.run_id)} == {"per_fold.csv"}
    assert children["pop-n"].data.params["n_recent"] == "1000"
    # where each algorithm ran: on its child run and, by name, on the parent
    assert children["pop"].data.tags["sweval.device"] == "cpu"
    assert children["pop-n"].data.tags["sweval.device"] == "cpu"
    assert tags["sweval.device.pop"] == tags["sweval.device.pop-n"] == "cpu"
    assert tags["sweval.n_folds"] == "7"


def outputs_fingerprint(output: Path) -> str:
    import json

    return json.loads((output / "config.json").read_text())["data"]["fingerprint"]


@pytest.mark.slow
def test_threads_runner_and_no_prefect_path_give_the_same_table(
    write_log, make_config, tmp_path: Path
) -> None:
    data = write_log(8)
    sequential = make_config(data, output=str(tmp_path / "seq"), tracking=False)
    threads = make_config(
        data, output=str(tmp_path / "thr"), tracking=False, task_runner="threads", workers=2
    )
    sliding_window_eval(config=sequential)
    sliding_window_eval(config=threads)
    execute(make_config(data, output=str(tmp_path / "local"), tracking=False))
    expected = (tmp_path / "seq" / "results.csv").read_text()
    assert (tmp_path / "thr" / "results.csv").read_text() == expected
    assert (tmp_path / "local" / "results.csv").read_text() == expected


def test_warm_start_in_the_threads_runner_chains_the_folds_like_the_local_run(
    write_log, make_config, tmp_path: Path
) -> None:
    """With two workers, warm-started folds still run in order, each from its predecessor."""
    data = write_log(8)
    params = {"als": {"factors": 4, "iterations": 4, "warm_start": True, "warm_iterations": 1,
                      "device": "cpu"}}
    common = dict(tracking=False, algorithms=["pop", "als"], params=params, u_min=2)
    threads = make_config(
        data, output=str(tmp_path / "thr"), task_runner="threads", workers=2, **common
    )
    sliding_window_eval(config=threads)
    execute(make_config(data, output=str(tmp_path / "local"), **common))
    expected = (tmp_path / "local" / "results.csv").read_text()
    assert (tmp_path / "thr" / "results.csv").read_text() == expected


def test_flow_accepts_a_plain_dict_as_its_configuration(write_log, make_config) -> None:
    config = make_config(write_log(8), tracking=False)
    outputs = sliding_window_eval(config=config.model_dump(mode="json"))
    assert set(outputs.results["algorithm"]) == {"pop", "pop-n"}


def test_user_errors_fail_the_flow_with_the_library_error(write_log, make_config) -> None:
    config = make_config(write_log(8), algorithms=["pop", "no-such-algorithm"], tracking=False)
    with pytest.raises(SwevalError, match="unknown algorithm"):
        sliding_window_eval(config=config)


class _State:
    def __init__(self, exc: BaseException) -> None:
        self.data = exc


def test_tasks_retry_on_transient_io_errors_only() -> None:
    wrapped = SwevalError("cannot write results")
    wrapped.__cause__ = OSError(28, "No space left on device")
    assert retry_on_io(None, None, _State(TimeoutError("NFS stalled")))
    assert retry_on_io(None, None, _State(wrapped))
    missing = SwevalError("no such file")
    missing.__cause__ = FileNotFoundError("log.csv")
    assert not retry_on_io(None, None, _State(missing))
    assert not retry_on_io(None, None, _State(SwevalError("--window '0D': must be longer")))
    assert not retry_on_io(None, None, _State(ValueError("a bug")))


def test_stratified_run_has_one_child_per_algorithm_and_stratum(
    write_log, make_config, mlflow_uri: str
) -> None:
    from flow_logs import log_frame

    frame = log_frame(8)
    frame["policy"] = ["A" if int(user[1:]) % 2 else "B" for user in frame["user"]]
    config = make_config(
        write_log(frame=frame), stratify_by="policy", stratify_mode="test", u_min=2
    )
    sliding_window_eval(config=config)
    results = pd.read_csv(Path(config.output) / "results.csv")
    assert set(results["stratum"]) == {"all", "A", "B"}
    _, children = experiment_runs(mlflow_uri, config.experiment)
    assert sorted(children) == ["pop", "pop [A]", "pop [B]", "pop-n", "pop-n [A]", "pop-n [B]"]
    client = MlflowClient(mlflow_uri)
    for algorithm in ("pop", "pop-n"):
        for stratum in ("A", "B"):
            child = children[f"{algorithm} [{stratum}]"]
            assert child.data.tags["sweval.stratum"] == stratum
            rows = results[(results["algorithm"] == algorithm) & (results["stratum"] == stratum)
                           & (results["metric"] == "recall") & (results["k"] == 10)
                           & ~results["skipped"]]
            history = client.get_metric_history(child.info.run_id, "recall_at_10")
            assert {m.step: m.value for m in history} == pytest.approx(
                dict(zip(rows["fold"], rows["value"], strict=True)), rel=1e-9
            )


def test_tracking_uri_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from sweval.evaluators.config.model import EvalConfig
    from sweval.flows.tracking import artifact_root, experiment_name, resolve_tracking_uri

    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri(EvalConfig()) == f"sqlite:///{tmp_path / 'home' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert resolve_tracking_uri(EvalConfig()) == "http://127.0.0.1:5000"
    assert resolve_tracking_uri(EvalConfig(tracking_uri="sqlite:///x.db")) == "sqlite:///x.db"
    assert artifact_root("sqlite:////srv/ml/mlflow.db") == Path("/srv/ml/mlartifacts")
    assert artifact_root("http://127.0.0.1:5000") is None
    ml_small = EvalConfig(data="movielens-latest-small")
    assert experiment_name(ml_small) == "sweval/movielens-latest-small"
    assert experiment_name(EvalConfig(experiment="mine")) == "mine"


def test_fold_tasks_sharing_a_process_share_its_cores(
    write_log, make_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The threads runner gives each fold task cpus // workers threads; others leave defaults.

    The budget is set inside the task (OpenMP's thread count is per thread) and removed after it.
    """
    import sweval.flows.executors as module
    from sweval.algorithms.threads import unit_threads
    from sweval.evaluators.run import driver
    from sweval.evaluators.run.evaluate import prepare

    data = write_log(8)
    monkeypatch.setattr(module, "usable_cpus", lambda: 8)
    budgets = {
        (runner, workers): module.threads_per_job(
            make_config(data, task_runner=runner, workers=workers)
        )
        for runner in ("sequential", "threads", "dask")
        for workers in (None, 1, 3, 16)
    }
    assert budgets == {
        ("sequential", None): None, ("sequential", 1): None, ("sequential", 3): None,
        ("sequential", 16): None,
        ("threads", None): 1,  # --workers not given: one task per usable CPU
        ("threads", 1): 8,  # one task: all of them
        ("threads", 3): 2,
        ("threads", 16): 1,
        ("dask", None): None, ("dask", 1): None, ("dask", 3): None, ("dask", 16): None,
    }

    seen = []
    original = driver.compute_unit

    def recording(unit, store, **kwargs):
        seen.append(unit_threads.get())
        return original(unit, store, **kwargs)

    monkeypatch.setattr(driver, "compute_unit", recording)
    prepared = prepare(make_config(data, task_runner="threads", workers=3, tracking=False))
    job = driver.Driver(prepared.work, prepared.recipe.store()).jobs()[0]
    driver.compute_group(prepared.work, job, prepared.recipe.store(), threads=2)
    assert seen and set(seen) == {2}
    assert unit_threads.get() is None


def test_variants_are_children_of_their_own_in_mlflow(
    write_log, make_config, mlflow_uri: str
) -> None:
    config = make_config(write_log(8), algorithms=["pop-n", "pop-n(n_recent=7)", "pop"],
                         task_runner="threads", workers=2)
    sliding_window_eval(config=config)
    check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))
    _parents, children = experiment_runs(mlflow_uri, config.experiment)
    assert children["pop-n(n_recent=7)"].data.params["n_recent"] == "7"
    assert children["pop-n(n_recent=7)"].data.params["registry_name"] == "pop-n"


@pytest.mark.slow
def test_a_tuned_algorithm_is_a_child_of_its_own_in_mlflow(
    write_log, make_config, mlflow_uri: str
) -> None:
    config = make_config(write_log(8), algorithms=["pop", "pop-n"],
                         tune={"pop-n": {"n_recent": [3, 50]}})
    sliding_window_eval(config=config)
    check_mlflow_matches_results(mlflow_uri, config.experiment, Path(config.output))
    _parents, children = experiment_runs(mlflow_uri, config.experiment)
    assert {"pop-n[tuned]", "pop-n(n_recent=3)", "pop-n(n_recent=50)"} <= set(children)
    assert (Path(config.output) / "tuning.csv").exists()
    artifacts = MlflowClient(mlflow_uri).list_artifacts(children["pop-n[tuned]"].info.run_id)
    assert "tuning.csv" in {artifact.path for artifact in artifacts}


def test_flow_logs_every_chosen_metric_and_writes_per_user_values(
    write_log, make_config, mlflow_uri: str
) -> None:
    config = make_config(write_log(8), metrics=["all"], per_user=True)
    state = sliding_window_eval(config=config, return_state=True)
    assert state.is_completed()
    output = Path(config.output)
    results = pd.read_csv(output / "results.csv")
    assert {"precision", "recall_capped", "mrr", "recency", "coverage", "popularity",
            "gini"} <= set(results["metric"])
    # every metric of every non-skipped fold reaches MLflow, step by step, as in results.csv
    check_mlflow_matches_results(mlflow_uri, config.experiment, output)
    per_user = pd.read_parquet(output / "per_user.parquet")
    used = results[~results["skipped"] & results["metric"].eq("mrr") & results["k"].eq(5)]
    mine = per_user[per_user["metric"].eq("mrr") & per_user["k"].eq(5)]
    means = mine.groupby(["fold", "algorithm"])["value"].mean()
    for row in used.itertuples():
        assert means.loc[(row.fold, row.algorithm)] == pytest.approx(row.value, rel=1e-9)
    artifacts = {a.path for a in MlflowClient(mlflow_uri).list_artifacts(
        experiment_runs(mlflow_uri, config.experiment)[0][0].info.run_id)}
    assert {"overlap.csv", "per_user.parquet"} <= artifacts


def test_a_rerun_that_changes_nothing_logs_no_summary_again(
    write_log, make_config, mlflow_uri: str
) -> None:
    """Rerunning a finished evaluation reopens its MLflow runs: the per-fold series and the
    summaries (step 0) each keep one value, not one more per rerun."""
    config = make_config(write_log(8))
    sliding_window_eval(config=config)
    sliding_window_eval(config=config)
    parents, children = experiment_runs(mlflow_uri, config.experiment)
    assert len(parents) == 1
    client = MlflowClient(mlflow_uri)
    for child in children.values():
        for key in ("n_folds", "mean_recall_at_10", "recall_at_10"):
            history = client.get_metric_history(child.info.run_id, key)
            steps = [m.step for m in history]
            assert steps and len(steps) == len(set(steps)), (child.info.run_name, key, steps)
