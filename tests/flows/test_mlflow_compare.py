"""MLflow as the place to compare an evaluation: the experiment's kind, the runs' inputs
(``mlflow.data``), the parent run's description and the saved view of the latest evaluation, read
back from the store and checked against independent computations (pandas, hand-made tables)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sweval_testing import experiment_runs

from sweval.data.loaders import load_log
from sweval.evaluators.config.model import EvalConfig
from sweval.flows.execute import execute
from sweval.flows.tracking import latest_comparison_url, open_client
from sweval.flows.tracking.note import summary_markdown
from sweval.flows.tracking.view import VIEW_TAG


def _inputs(run: Any) -> dict[str, Any]:
    """``{dataset name: DatasetInput}`` of a run."""
    return {d.dataset.name: d for d in run.inputs.dataset_inputs}


def _context(dataset_input: Any) -> str:
    return {t.key: t.value for t in dataset_input.tags}["mlflow.data.context"]


def _day(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


@pytest.mark.slow
def test_the_runs_carry_the_log_and_each_folds_window_as_datasets(
    write_log, make_config, mlflow_uri: str
) -> None:
    path = write_log(8)
    config = make_config(path)
    execute(config, tracking=True)
    execute(config, tracking=True)  # a rerun reopens the runs: no input is logged twice
    output = Path(config.output)
    results = pd.read_csv(output / "results.csv")
    parents, children = experiment_runs(mlflow_uri, config.experiment)
    (parent,) = parents
    client = open_client(mlflow_uri)
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"

    # the log: digest = the fingerprint of the log as loaded on its own; its size from pandas
    raw = pd.read_csv(path)
    expected_profile = {
        "interactions": len(raw.drop_duplicates(["user", "item"])),
        "users": raw["user"].nunique(), "items": raw["item"].nunique(),
        "first": _day(int(raw["timestamp"].min())), "last": _day(int(raw["timestamp"].max())),
    }
    fingerprint = load_log(str(path)).fingerprint()
    for run in [parent, *children.values()]:
        inputs = _inputs(run)
        log = inputs[config.dataset_name]
        assert log.dataset.digest == fingerprint
        assert json.loads(log.dataset.source) == {"uri": str(path.resolve())}
        assert log.dataset.source_type == "local"
        assert _context(log) == "evaluation"
        assert json.loads(log.dataset.profile) == expected_profile
    assert len(parent.inputs.dataset_inputs) == 1

    # each child: one dataset per fold, its window as the context, the same for every child
    folds = results.drop_duplicates("fold").set_index("fold")
    per_fold: dict[int, set[str]] = {}
    for child in children.values():
        inputs = _inputs(child)
        assert len(inputs) == 1 + len(folds)  # the log and every fold, each once
        for fold, row in folds.iterrows():
            window = inputs[f"{config.dataset_name} fold {fold}"]
            assert _context(window) == f"{_day(row['t_start'])} – {_day(row['t_end'])}"
            profile = json.loads(window.dataset.profile)
            assert profile["eligible_users"] == row["n_eligible"]
            assert profile["skipped"] == bool(row["skipped"])
            per_fold.setdefault(int(fold), set()).add(window.dataset.digest)
    assert all(len(digests) == 1 for digests in per_fold.values())  # same fold, same digest
    assert len({next(iter(d)) for d in per_fold.values()}) == len(folds)  # folds differ
    assert folds["skipped"].any()  # the quiet day's fold is among them


def test_the_parent_run_describes_the_summary_and_the_protocol(
    write_log, make_config, mlflow_uri: str
) -> None:
    config = make_config(write_log(8))
    execute(config, tracking=True)
    summary = pd.read_csv(Path(config.output) / "summary.csv")
    (parent,), _ = experiment_runs(mlflow_uri, config.experiment)
    note = parent.data.tags["mlflow.note.content"]

    rows = [line for line in note.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[1:]
    assert header == "| algorithm | Recall@5 | Recall@10 | folds used/skipped |"
    recall = summary[(summary["metric"] == "recall") & (summary["stratum"] == "all")]
    assert [r.split(" | ")[0].removeprefix("| ") for r in body] == ["pop", "pop-n"]
    for line in body:
        cells = [c.strip() for c in line.strip("| ").split(" | ")]
        algorithm = cells[0]
        for k, cell in zip((5, 10), cells[1:3], strict=True):
            row = recall[(recall["algorithm"] == algorithm) & (recall["k"] == k)].iloc[0]
            best = recall[recall["k"] == k]["mean"].max()
            value = float(re.search(r"\d\.\d{4}", cell).group())
            assert value == pytest.approx(row["mean"], abs=5e-5)
            assert cell.startswith("**") == (row["mean"] == best)
        assert cells[3] == f"{int(row['n_folds'])}/{int(row['n_skipped'])}"
    assert all(line.endswith("| 6/1 |") for line in body)  # day 3's fold is skipped
    for words in ("7 consecutive windows of 1D", "u_min = 5", "k = 5, 10", "Relevance `all`",
                  "No stratification", "first starting at"):
        assert words in note


def test_summary_markdown_of_a_hand_made_summary() -> None:
    summary = pd.DataFrame({
        "algorithm": ["a", "b", "a", "b"], "stratum": "all", "metric": "recall",
        "k": [5, 5, 10, 10], "mean": [0.2, 0.1, 0.3, 0.3], "std": 0.0,
        "n_folds": 4, "n_skipped": 1, "delta": [0.0, -0.5, 0.0, 0.0],
    })
    assert summary_markdown(summary) == (
        "| algorithm | Recall@5 | Recall@10 | folds used/skipped |\n"
        "|---|---:|---:|---:|\n"
        "| a | **0.2000** | **0.3000** | 4/1 |\n"
        "| b | 0.1000 (-50%) | **0.3000** | 4/1 |"
    )


@pytest.mark.slow
def test_the_latest_evaluation_has_a_saved_comparison_view(
    write_log, make_config, mlflow_uri: str, tmp_path: Path
) -> None:
    config = make_config(write_log(8))
    execute(config, tracking=True)
    (parent,), children = experiment_runs(mlflow_uri, config.experiment)
    experiment_id = parent.info.experiment_id
    tags = open_client(mlflow_uri).get_experiment(experiment_id).tags
    view = json.loads(tags[VIEW_TAG])
    state = json.loads(view["state"])
    assert view["name"] == f"SW-EVAL {parent.info.run_name}"
    assert state["searchFilter"] == f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'"
    assert state["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "mlflow.runName"}]
    assert latest_comparison_url(mlflow_uri, "http://127.0.0.1:5000") == (
        f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?workflowType="
        "machine_learning&compareRunsMode=CHART&viewStateShareKey=sweval-latest"
    )

    # a later evaluation in another experiment becomes the latest
    other = EvalConfig.build(**(config.model_dump() | {
        "experiment": f"{config.experiment}-other", "output": str(tmp_path / "other"),
        "algorithms": ["pop"],
    }))
    execute(other, tracking=True)
    (later,), _ = experiment_runs(mlflow_uri, other.experiment)
    assert f"/#/experiments/{later.info.experiment_id}/runs?" in latest_comparison_url(
        mlflow_uri, "http://127.0.0.1:5000")


@pytest.mark.slow
def test_system_metrics_are_logged_only_when_asked(
    write_log, make_config, mlflow_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.1")
    path = write_log(8)
    plain = make_config(path)
    execute(plain, tracking=True)
    (parent,), _ = experiment_runs(mlflow_uri, plain.experiment)
    assert not [k for k in parent.data.metrics if k.startswith("system/")]
    assert parent.data.tags["sweval.config.system_metrics"] == "False"

    watched = make_config(path, system_metrics=True, output=str(tmp_path / "watched"),
                          experiment=f"{plain.experiment}-watched")
    execute(watched, tracking=True)
    (parent,), _ = experiment_runs(mlflow_uri, watched.experiment)
    cpu = open_client(mlflow_uri).get_metric_history(
        parent.info.run_id, "system/cpu_utilization_percentage")
    assert cpu and all(0 <= m.value <= 100 * 64 for m in cpu)
    assert "system/system_memory_usage_megabytes" in parent.data.metrics
    assert "system_metrics" not in parent.data.params  # not a result-relevant option
