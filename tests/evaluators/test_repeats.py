"""Repeat consumption (--repeats): seen items stay candidates and count when consumed again,
on a hand-built log (docs/protocol.md §3b)."""

from __future__ import annotations

import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.algorithms.popularity import Pop
from sweval.algorithms.registry import resolve
from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.evaluate import evaluate_config

# Day 0 is history: 10 ×2, 11 ×1, 12 ×1 (POP ranks 10, 11, 12); day 1 the test window.
#   user 1: history 10, 11   consumes 10 again and 12   Rel = {10, 12} (--dedup none)
#   user 2: history 10       consumes 11                Rel = {11}
#            lists without repeats   lists with --repeats
#   user 1:  [12]                    [10, 11, 12]
#   user 2:  [11, 12]                [10, 11, 12]
ROWS = [(1, 10, 0), (1, 11, 1), (2, 10, 2), (3, 12, 3),
        (1, 10, DAY + 1), (1, 12, DAY + 2), (2, 11, DAY + 3)]


def run(tmp_path, name="out", **options):
    path = tmp_path / "log.csv"
    pd.DataFrame(ROWS, columns=["user", "item", "timestamp"]).to_csv(path, index=False)
    base = dict(data=str(path), window="1D", folds=1, u_min=0, k=[1, 2, 3], dedup="none",
                algorithms=["pop"], metrics=["recall", "recall_reachable"], progress=False,
                tracking=False, report=False, output=str(tmp_path / name),
                cache=str(tmp_path / "units"))
    return evaluate_config(EvalConfig.build(**(base | options))).results


def values(results, metric, algorithm="pop"):
    part = results[(results["metric"] == metric) & (results["algorithm"] == algorithm)]
    return dict(zip(part["k"], part["value"], strict=True))


def test_repeat_mode_relevance_and_candidates_by_hand(tmp_path):
    plain = run(tmp_path, "plain")
    repeats = run(tmp_path, "repeats", repeats=True)
    # without: user 1 can only hit 12 (1/2 at every k), user 2 hits 11 at k=1
    assert values(plain, "recall") == pytest.approx({1: 0.75, 2: 0.75, 3: 0.75})
    # with: user 1 hits 10 at k=1 and 12 at k=3; user 2 hits 11 from k=2 on
    assert values(repeats, "recall") == pytest.approx({1: 0.25, 2: 0.75, 3: 1.0})
    # the re-consumed 10 is reachable only with --repeats: |Reach_1| is 1 without, 2 with
    assert values(plain, "recall_reachable") == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0})
    assert values(repeats, "recall_reachable") == pytest.approx({1: 0.25, 2: 0.75, 3: 1.0})


def test_repeats_leave_the_plain_units_alone(tmp_path):
    run(tmp_path, "plain")
    again = evaluate_config(EvalConfig.build(
        data=str(tmp_path / "log.csv"), window="1D", folds=1, u_min=0, k=[1, 2, 3],
        dedup="none", algorithms=["pop"], progress=False, tracking=False, report=False,
        repeats=True, output=str(tmp_path / "r"), cache=str(tmp_path / "units")))
    assert again.n_computed == 1 and again.n_reused == 0  # its own unit, keyed by repeats


def test_every_model_kind_ranks_seen_items_with_repeats(tmp_path):
    results = run(tmp_path, algorithms=["pop", "item-knn", "svd"], repeats=True,
                  metrics=["recall"], k=[3])
    assert not results["skipped"].any()
    assert set(results["algorithm"]) == {"pop", "item-knn", "svd"}


def test_repeats_need_dedup_none(tmp_path):
    with pytest.raises(SwevalError, match="--repeats needs --dedup none"):
        run(tmp_path, dedup="first", repeats=True)


def test_the_model_api_says_whether_a_model_scores_seen_items(monkeypatch):
    assert all(resolve(name)[0].scores_seen_items()
               for name in ("pop", "pop-n", "item-knn", "user-knn", "svd", "als"))

    class Forgetful(Pop):
        seen_items = False

    class OwnRanking(Pop):
        def recommend(self, rows, k):  # the signature before --repeats
            return super().recommend(rows, k)

    assert not Forgetful.scores_seen_items() and not OwnRanking.scores_seen_items()
    import sweval.evaluators.run.plan as plan

    monkeypatch.setattr(plan, "scores_seen", lambda spec: spec.name == "pop")
    with pytest.raises(SwevalError, match="--repeats: item-knn cannot score"):
        plan.make_plan(EvalConfig.build(algorithms=["pop", "item-knn"], dedup="none",
                                        repeats=True, progress=False, tracking=False))
