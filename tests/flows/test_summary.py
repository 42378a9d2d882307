"""The summary table printed at the end of a run."""

from __future__ import annotations

import pandas as pd
from rich.console import Console

from sweval.flows.summary import summary_table


def render(summary: pd.DataFrame) -> str:
    console = Console(width=120, record=True)
    console.print(summary_table(summary, metric="recall", stratum="all", title="t"))
    return console.export_text()


def test_best_is_marked_and_others_show_their_gap():
    summary = pd.DataFrame({
        "algorithm": ["pop", "als"], "stratum": "all", "metric": "recall", "k": 10,
        "mean": [0.02, 0.04], "delta": [-0.5, 0.0], "n_folds": 6, "n_skipped": 0,
    })
    text = render(summary)
    assert "0.0200 -50%" in text and "0.0400" in text and "0.0400 +" not in text


def test_a_k_where_every_algorithm_scored_zero_shows_no_percentage():
    summary = pd.DataFrame({
        "algorithm": "als", "stratum": "all", "metric": "recall", "k": [5, 10],
        "mean": [0.0, 0.0024], "delta": [float("nan"), 0.0], "n_folds": 6, "n_skipped": 0,
    })
    text = render(summary)
    assert "nan" not in text and "0.0000" in text and "0.0024" in text


def test_overlap_table_is_the_symmetric_matrix_with_stability_on_the_diagonal():
    from sweval.flows.summary import MAX_OVERLAP_ALGORITHMS, overlap_table, shown_metric

    overlap = pd.DataFrame([
        ("algorithms", 0, 0, "pop", "als", 10, 0.25, 5),
        ("algorithms", 1, 1, "pop", "als", 10, 0.75, 5),
        ("folds", 0, 1, "pop", "pop", 10, 0.9, 4),
        ("algorithms", 0, 0, "pop", "als", 5, 0.1, 5),
    ], columns=["kind", "fold_a", "fold_b", "algorithm_a", "algorithm_b", "k", "jaccard",
                "n_users"])
    console = Console(width=120, record=True)
    console.print(overlap_table(overlap, 10))
    lines = console.export_text().splitlines()
    pop = next(line for line in lines if line.startswith("│ pop"))
    als = next(line for line in lines if line.startswith("│ als"))
    assert pop.split("│")[2:4] == [" 0.90 ", " 0.50 "]  # stability, mean of 0.25 and 0.75
    assert als.split("│")[2:4] == [" 0.50 ", "      "]  # als: one fold, no stability
    many = pd.concat([overlap.assign(algorithm_b=f"v{i}") for i in range(MAX_OVERLAP_ALGORITHMS)])
    assert overlap_table(many, 10) is None  # too many for the terminal: overlap.csv has them
    assert shown_metric(pd.DataFrame({"metric": ["r_precision", "mrr"], "k": [None, 5]})) == "mrr"
