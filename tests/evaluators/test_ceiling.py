"""The window's ceiling (folds.csv's unreachable_share, the report's line) and
Recall_reachable@k, on a hand-built log (docs/protocol.md §4c)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.metrics.ranking import RelevantSets
from sweval.evaluators.metrics.reachable import (
    ceiling_words,
    in_catalogue,
    reachable_sizes,
    recall_reachable,
    unreachable_share,
)
from sweval.evaluators.run.evaluate import evaluate_config

# Day 0 is history, day 1 the test window. Training popularity: 10 ×3, 11 ×2, 12 ×1; 13 is new.
#   user 1: history 10          tests 11, 13   Reach = {11}   POP@1 = [11]: recall 1/2, reach 1/1
#   user 2: history 10, 11      tests 12       Reach = {12}   POP@1 = [12]: recall 1,   reach 1/1
#   user 3: history 10, 11, 12  tests 13       Reach = ∅      no candidate: recall 0,   undefined
# Relevant interactions 4, on the new item 13: 2  ->  unreachable_share = 0.5
ROWS = [
    (1, 10, 0), (2, 10, 1), (2, 11, 2), (3, 10, 3), (3, 11, 4), (3, 12, 5),
    (1, 11, DAY + 1), (1, 13, DAY + 2), (2, 12, DAY + 3), (3, 13, DAY + 4),
]


def run(tmp_path, name="out", rows=ROWS, **options):
    path = tmp_path / "log.csv"
    pd.DataFrame(rows, columns=["user", "item", "timestamp"]).to_csv(path, index=False)
    base = dict(data=str(path), window="1D", folds=1, u_min=0, k=[1],
                algorithms=["pop"], progress=False, tracking=False, report=False,
                output=str(tmp_path / name), cache=str(tmp_path / "units"))
    return evaluate_config(EvalConfig.build(**(base | options)))


def value(results, metric):
    row = results[(results["metric"] == metric) & (results["algorithm"] == "pop")].iloc[0]
    return row["value"], row["n_users"]


def test_unreachable_share_in_folds_csv_by_hand(tmp_path):
    out = run(tmp_path)
    assert out.folds["unreachable_share"].tolist() == [0.5]
    written = pd.read_csv(tmp_path / "out" / "folds.csv")
    assert written["unreachable_share"].tolist() == [0.5]


def test_recall_reachable_beside_recall_by_hand(tmp_path):
    results = run(tmp_path, metrics=["recall", "recall_reachable"]).results
    assert value(results, "recall") == (pytest.approx(0.5), 3)  # (1/2 + 1 + 0) / 3
    # user 3 has no reachable relevant item: left out of the mean, n_users says so
    assert value(results, "recall_reachable") == (pytest.approx(1.0), 2)


def test_default_metrics_leave_recall_reachable_out(tmp_path):
    assert "recall_reachable" not in set(run(tmp_path).results["metric"])


def test_no_reachable_item_for_anyone_is_a_skipped_row(tmp_path):
    only_3 = [row for row in ROWS if row[0] == 3]  # only user 3: nothing reachable
    results = run(tmp_path, rows=only_3, metrics=["recall_reachable"]).results
    row = results[results["metric"] == "recall_reachable"].iloc[0]
    assert row["skipped"] and row["n_users"] == 0 and np.isnan(row["value"])
    assert "undefined for every user" in row["skip_reason"]


def test_the_report_states_the_ceiling(tmp_path):
    run(tmp_path, report=True)
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Ceiling: 50.0% of the eligible users" in html


def test_ceiling_words_mean_and_range():
    folds = pd.DataFrame({"unreachable_share": [0.1, 0.3, np.nan]})
    words = ceiling_words(folds)
    assert words is not None and words.startswith("20.0%") and "10.0% to 30.0%" in words
    assert ceiling_words(pd.DataFrame({"fold": [0]})) is None


def test_reachable_sizes_drop_own_training_items_unless_repeats():
    # items 0..3; training positions [0, 3): user 0 saw item 1, user 1 saw item 2 and 0
    frame = pd.DataFrame({"user": [0, 1, 1, 0, 1], "item": [1, 2, 0, 3, 1],
                          "timestamp": [0, 1, 2, 3, 4]})
    log = InteractionLog.from_frame(frame, user_col="user", item_col="item",
                                    time_col="timestamp", dedup="none")
    catalogue = in_catalogue(log, 0, 3)
    assert catalogue.tolist() == [True, True, True, False]
    u0, u1 = (int(np.flatnonzero(log.user_ids == u)[0]) for u in (0, 1))
    i = {int(raw): code for code, raw in enumerate(log.item_ids)}
    # user 0 relevant {1, 3}: 3 is new, 1 is their own training item; user 1 relevant {1}
    relevant = RelevantSets(users=np.array([u0, u1]), indptr=np.array([0, 2, 3]),
                            items=np.array(sorted([i[1], i[3]]) + [i[1]]))
    assert unreachable_share(relevant, catalogue) == pytest.approx(1 / 3)
    assert reachable_sizes(relevant, catalogue, log, 0, 3, seen_reachable=False).tolist() == [0, 1]
    assert reachable_sizes(relevant, catalogue, log, 0, 3, seen_reachable=True).tolist() == [1, 1]
    hits = np.array([[False, False], [True, False]])
    got = recall_reachable(hits, np.array([0, 1]), [1, 2])
    assert np.isnan(got[("recall_reachable", 1)][0]) and got[("recall_reachable", 2)][1] == 1.0
