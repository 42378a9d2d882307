"""MLflow records of staleness and cadence (flows/tracking/retraining.py): stepped metrics per
algorithm, one series per policy, and the algorithm's rows of the tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweval.flows.tracking.retraining import retraining_metrics, retraining_rows


def _write(directory: Path) -> list[Path]:
    staleness = pd.DataFrame({"algorithm": ["pop", "pop", "als"], "metric": "recall", "k": 10,
                              "age": [0, 1, 0], "mean": [0.3, 0.25, 0.4],
                              "loss": [0.0, -0.1, 0.0]})
    cadence = pd.DataFrame({"algorithm": "pop", "metric": "recall", "k": 10,
                            "cadence": [1, 7, 7], "policy": ["retrain", "retrain", "update"],
                            "mean": [0.3, 0.28, 0.3], "fit_s": [2.0, 0.5, 0.5],
                            "update_s": [0.0, 0.0, 0.25]})
    rows = pd.DataFrame({"algorithm": ["pop", "als"], "value": [0.1, 0.2]})
    paths = [directory / name for name in ("staleness_summary.csv", "cadence_summary.csv",
                                           "staleness.csv", "cadence.csv")]
    for table, path in zip((staleness, cadence, rows, rows), paths, strict=True):
        table.to_csv(path, index=False)
    return paths


def test_curves_are_stepped_metrics_per_policy(tmp_path: Path) -> None:
    metrics = retraining_metrics(_write(tmp_path), "pop", now=1)
    got = {(m.key, m.step): m.value for m in metrics}
    assert got == {("stale_recall_at_10", 0): 0.3, ("stale_recall_at_10", 1): 0.25,
                   ("stale_loss_recall_at_10", 0): 0.0, ("stale_loss_recall_at_10", 1): -0.1,
                   ("cadence_recall_at_10", 1): 0.3, ("cadence_recall_at_10", 7): 0.28,
                   ("cadence_fit_s", 1): 2.0, ("cadence_fit_s", 7): 0.5,
                   ("cadence_update_recall_at_10", 7): 0.3, ("cadence_update_s", 7): 0.75}


def test_each_algorithm_gets_its_rows(tmp_path: Path) -> None:
    rows = retraining_rows(_write(tmp_path), "als")
    assert set(rows) == {"staleness.csv", "cadence.csv"}
    assert rows["staleness.csv"]["value"].tolist() == [0.2]
    assert retraining_rows([], "als") == {}
