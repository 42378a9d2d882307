"""Reading back what a flow run left in MLflow, for the flow tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sweval_testing import check_child_metrics, experiment_runs


def check_mlflow_matches_results(uri: str, experiment: str, output: Path) -> Any:
    """One parent, one child per algorithm, each with exactly one step per non-skipped fold for
    every metric key, valued as in results.csv. Returns the parent run."""
    results = pd.read_csv(output / "results.csv")
    parents, children = experiment_runs(uri, experiment)
    assert len(parents) == 1, [p.info.run_name for p in parents]
    parent = parents[0]
    state = json.loads((output / "tracking.json").read_text())
    assert state["parent_run_id"] == parent.info.run_id
    algorithms = list(dict.fromkeys(results["algorithm"]))
    assert sorted(children) == sorted(algorithms)
    for child in children.values():
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        mine = check_child_metrics(uri, child, results)
        # summary metrics: the mean over the non-skipped folds
        used = mine[~mine["skipped"]]
        recall = used[(used["metric"] == "recall") & (used["k"] == 10)]["value"].mean()
        assert child.data.metrics["mean_recall_at_10"] == pytest.approx(recall, rel=1e-9, abs=1e-12)
        # its bootstrap interval, as summary.csv has it
        summary = pd.read_csv(output / "summary.csv")
        row = summary[(summary["algorithm"] == child.info.run_name) & (summary["stratum"] == "all")
                      & (summary["metric"] == "recall") & (summary["k"] == 10)].iloc[0]
        for stat in ("ci_low", "ci_high"):
            if pd.notna(row[stat]):
                assert child.data.metrics[f"{stat}_recall_at_10"] == pytest.approx(
                    row[stat], rel=1e-9, abs=1e-12)
    assert parent.info.status == "FINISHED"
    return parent


def marked_processes(name: str, marker: str, but: tuple[int, ...] = ()) -> list[str]:
    """Live processes (pid and command line) whose environment carries ``name=marker``, except
    the pids in ``but``: what a test's commands started and left running, in any session."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE or process.pid in but:
                continue
            if process.environ().get(name) == marker:
                found.append(f"{process.pid} {' '.join(process.cmdline())}")
        except psutil.Error:
            continue
    return found
