"""Reading back what a flow run left in MLflow, for the flow tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow import MlflowClient

from sweval.flows.tracking import metric_key


def experiment_runs(uri: str, name: str) -> tuple[list[Any], dict[str, Any]]:
    """(parent runs, {child run name: child run}) of experiment ``name``."""
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    assert experiment is not None, f"no experiment {name}"
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    return parents, children


def check_mlflow_matches_results(uri: str, experiment: str, output: Path) -> dict[str, Any]:
    """One parent, one child per algorithm, each with exactly one step per non-skipped fold for
    every metric key, valued as in results.csv. Returns the parent run."""
    client = MlflowClient(uri)
    results = pd.read_csv(output / "results.csv")
    parents, children = experiment_runs(uri, experiment)
    assert len(parents) == 1, [p.info.run_name for p in parents]
    parent = parents[0]
    state = json.loads((output / "tracking.json").read_text())
    assert state["parent_run_id"] == parent.info.run_id
    algorithms = list(dict.fromkeys(results["algorithm"]))
    assert sorted(children) == sorted(algorithms)
    for algorithm, child in children.items():
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.status == "FINISHED"
        mine = results[(results["algorithm"] == algorithm) & (results["stratum"] == "all")]
        used = mine[~mine["skipped"]]
        for (metric, k), rows in used.groupby(["metric", "k"], dropna=False):
            key = metric_key(metric, None if pd.isna(k) else int(k))
            history = client.get_metric_history(child.info.run_id, key)
            steps = sorted(m.step for m in history)
            assert steps == sorted(rows["fold"].tolist()), (algorithm, key, steps)
            logged = {m.step: m.value for m in history}
            for fold, value in zip(rows["fold"], rows["value"], strict=True):
                assert logged[fold] == pytest_approx(value), (algorithm, key, fold)
        # n_eligible: one step per fold, skipped folds included
        eligible = client.get_metric_history(child.info.run_id, "n_eligible")
        assert sorted(m.step for m in eligible) == sorted(mine["fold"].unique().tolist())
        # summary metrics: the mean over the non-skipped folds
        recall = used[(used["metric"] == "recall") & (used["k"] == 10)]["value"].mean()
        assert child.data.metrics["mean_recall_at_10"] == pytest_approx(recall)
    assert parent.info.status == "FINISHED"
    return parent


def pytest_approx(value: float) -> Any:
    import pytest

    return pytest.approx(value, rel=1e-9, abs=1e-12)
