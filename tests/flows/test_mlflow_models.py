"""MLflow's logged models: one record per algorithm configuration of a run, its fold metrics
linked to the fold's dataset, ranked across runs; read back from a real local store."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient
from sweval_testing import experiment_runs

from sweval.flows.execute import execute
from sweval.flows.tracking.inputs import fold_digest
from sweval.flows.tracking.models import MODEL_TYPE, _model_name


def test_model_names_drop_what_mlflow_refuses() -> None:
    assert _model_name("pop") == "pop"
    assert _model_name("my_pkg.models:CoVisit(days=1.5)") == "my_pkg_models_CoVisit(days=1_5)"
    assert _model_name('user-knn(weighting="cosine")') == "user-knn(weighting=_cosine_)"


def _models(uri: str, experiment: str, **search) -> list:
    client = MlflowClient(uri)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    return list(client.search_logged_models([experiment_id], **search))


@pytest.mark.slow
def test_each_configuration_is_a_logged_model_with_fold_metrics_on_the_fold_datasets(
    write_log, make_config, mlflow_uri: str, tmp_path: Path
) -> None:
    config = make_config(write_log(8))
    execute(config, tracking=True)
    results = pd.read_csv(Path(config.output) / "results.csv")
    fingerprint = __import__("json").loads(
        (Path(config.output) / "config.json").read_text())["data"]["fingerprint"]
    _, children = experiment_runs(mlflow_uri, config.experiment)
    models = {m.tags["sweval.algorithm"]: m for m in _models(mlflow_uri, config.experiment)}
    assert sorted(models) == ["pop", "pop-n"]
    for label, model in models.items():
        child = children[label]
        assert model.model_type == MODEL_TYPE and str(model.status) in ("READY",
                                                                        "LoggedModelStatus.READY")
        assert model.source_run_id == child.info.run_id
        assert model.params == child.data.params  # the configuration, as the child has it
        folds = {}
        for metric in model.metrics:
            if metric.key == "recall_at_10":
                folds[metric.step] = metric
        mine = results[(results["algorithm"] == label) & (results["stratum"] == "all")
                       & (results["metric"] == "recall") & (results["k"] == 10)
                       & ~results["skipped"]]
        assert sorted(folds) == sorted(mine["fold"])
        inputs = {d.dataset.name: d.dataset.digest for d in child.inputs.dataset_inputs}
        for row in mine.itertuples():
            metric = folds[row.fold]
            assert metric.value == pytest.approx(row.value, rel=1e-9)
            assert metric.timestamp == row.t_start * 1000  # the window start
            assert metric.dataset_name == f"log fold {row.fold}"
            assert metric.dataset_digest == fold_digest(fingerprint, row.t_start, row.t_end,
                                                        None, "all")
            assert inputs[metric.dataset_name] == metric.dataset_digest  # the run's own input
        means = [m for m in model.metrics if m.key == "mean_recall_at_10"]
        assert len(means) == 1 and means[0].dataset_name == "log"
        assert means[0].dataset_digest == fingerprint

    # a second run, another configuration: the experiment ranks all three
    other = make_config(write_log(8), output=str(tmp_path / "other"),
                        algorithms=["pop-n(n_recent=20)"])
    execute(other, tracking=True)
    ranked = _models(mlflow_uri, config.experiment, order_by=[
        {"field_name": "metrics.mean_recall_at_10", "ascending": False}])
    summaries = pd.concat([pd.read_csv(Path(c.output) / "summary.csv") for c in (config, other)])
    wanted = summaries[(summaries["stratum"] == "all") & (summaries["metric"] == "recall")
                       & (summaries["k"] == 10)]
    by_label = dict(zip(wanted["algorithm"], wanted["mean"], strict=True))
    ranked_means = [next(x.value for x in m.metrics if x.key == "mean_recall_at_10")
                    for m in ranked]
    assert sorted(m.tags["sweval.algorithm"] for m in ranked) == sorted(by_label)
    assert ranked_means == sorted(ranked_means, reverse=True)  # best first (ties in any order)
    for model, mean in zip(ranked, ranked_means, strict=True):
        assert mean == pytest.approx(by_label[model.tags["sweval.algorithm"]], rel=1e-9)


@pytest.mark.slow
def test_a_resumed_run_keeps_its_models(write_log, make_config, mlflow_uri: str) -> None:
    config = make_config(write_log(8))
    execute(config, tracking=True)
    first = {m.model_id for m in _models(mlflow_uri, config.experiment)}
    execute(config, tracking=True)  # the same output: the runs and their models are reopened
    assert {m.model_id for m in _models(mlflow_uri, config.experiment)} == first
