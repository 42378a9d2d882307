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
