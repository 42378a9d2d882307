"""Strata derived from the users' history (--stratify-by user-history | returning) and the
first-time users of --cold-users, on hand-built logs (docs/protocol.md §6b)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sweval_testing import DAY, random_logs

from sweval.algorithms.registry import resolve
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.splits import cold_users
from sweval.evaluators.protocols.user_strata import UserStrata, bin_labels, history_edges
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.run.evaluate import evaluate_config

# Day 0 is history, day 1 the test window. Training popularity: 10 ×3, 11 ×2, 12 ×1 (13 unseen).
#   user 1: history 10          (n_u = 1) tests 11      POP@1 = [11]: hit
#   user 2: history 10, 11      (n_u = 2) tests 12      POP@1 = [12]: hit
#   user 3: history 10, 11, 12  (n_u = 3) tests 13      no candidate left: miss
#   user 4: no history                    tests 10      first-time, POP@1 = [10]: hit
#   user 5: no history                    tests 13, 11  first-time, POP@1 = [10]: miss
ROWS = [
    (1, 10, 0), (2, 10, 1), (2, 11, 2), (3, 10, 3), (3, 11, 4), (3, 12, 5),
    (1, 11, DAY + 1), (2, 12, DAY + 2), (3, 13, DAY + 3), (4, 10, DAY + 4), (5, 13, DAY + 5),
    (5, 11, DAY + 6),
]


def run(tmp_path, name="out", **options):
    path = tmp_path / "log.csv"
    pd.DataFrame(ROWS, columns=["user", "item", "timestamp"]).to_csv(path, index=False)
    base = dict(data=str(path), window="1D", folds=1, u_min=0, k=[1],
                algorithms=["pop", "item-knn"], progress=False, tracking=False, report=False,
                output=str(tmp_path / name), cache=str(tmp_path / "units"))
    return evaluate_config(EvalConfig.build(**(base | options)))


def recall(results, algorithm, stratum):
    row = results[(results["algorithm"] == algorithm) & (results["stratum"] == stratum)
                  & (results["metric"] == "recall")].iloc[0]
    return row


def test_bins_and_their_labels():
    assert history_edges([1, 5, 20]) == history_edges([5, 20]) == [1, 5, 20]
    assert bin_labels([1, 5, 20]) == ["1-4", "5-19", "20+"]
    assert bin_labels([1, 2, 3]) == ["1", "2", "3+"]
    for bad in ([0, 5], [5, 5], [20, 5]):
        with pytest.raises(SwevalError, match="--user-bins"):
            history_edges(bad)


def test_user_history_strata_by_hand(tmp_path):
    results = run(tmp_path, stratify_by="user-history", user_bins=[1, 3]).results
    assert recall(results, "pop", "all")["value"] == pytest.approx(2 / 3)
    light, heavy = recall(results, "pop", "1-2"), recall(results, "pop", "3+")
    assert (light["value"], light["n_users"], light["n_eligible"]) == (1.0, 2, 2)
    assert (heavy["value"], heavy["n_users"]) == (0.0, 1)
    assert list(dict.fromkeys(results["stratum"])) == ["all", "1-2", "3+"]
    assert "fallback" not in results  # no --cold-users: the table's columns are unchanged


def test_strata_regroup_the_all_units_computing_none(tmp_path):
    plain = run(tmp_path, "plain")
    stratified = run(tmp_path, "strata", stratify_by="user-history", user_bins=[1, 3])
    assert stratified.n_computed == 0 and stratified.n_reused == plain.n_computed
    every = stratified.results[stratified.results["stratum"] == "all"]
    pd.testing.assert_frame_equal(every.drop(columns="config_hash").reset_index(drop=True),
                                  plain.results.drop(columns="config_hash"))


def test_cold_users_with_pop_fallback_by_hand(tmp_path):
    out = run(tmp_path, stratify_by="user-history", user_bins=[1, 3], cold_users=True)
    results = out.results
    pop, knn = recall(results, "pop", "first-time"), recall(results, "item-knn", "first-time")
    # POP scores users without history itself: [10] for both, user 4 hits, user 5 does not
    assert (pop["value"], pop["n_users"], pop["fallback"]) == (0.5, 2, "")
    # item-kNN cannot: its first-time row measures POP's lists and says so
    assert (knn["value"], knn["n_users"], knn["fallback"]) == (0.5, 2, "pop")
    summary = out.summary
    said = summary[(summary["stratum"] == "first-time") & (summary["metric"] == "recall")]
    assert dict(zip(said["algorithm"], said["fallback"].fillna(""), strict=True)) == {
        "pop": "", "item-knn": "pop"}
    # the other strata are unchanged by --cold-users
    assert recall(results, "pop", "1-2")["value"] == 1.0
    assert pd.isna(recall(results, "pop", "all")["fallback"])


def test_fallback_none_leaves_the_models_that_cannot_score_them_out(tmp_path):
    results = run(tmp_path, cold_users=True, fallback="none").results
    knn = recall(results, "item-knn", "first-time")
    assert knn["skipped"] and "cannot score users without history" in knn["skip_reason"]
    assert recall(results, "pop", "first-time")["value"] == 0.5


def test_returning_counts_first_time_users_without_evaluating_them(tmp_path):
    results = run(tmp_path, stratify_by="returning").results
    returning, first = recall(results, "pop", "returning"), recall(results, "pop", "first-time")
    assert returning["value"] == recall(results, "pop", "all")["value"]
    assert first["skipped"] and first["n_users"] == 2
    assert first["skip_reason"] == "2 first-time user(s): evaluated with --cold-users"
    with_cold = run(tmp_path, "cold", stratify_by="returning", cold_users=True).results
    assert recall(with_cold, "pop", "first-time")["value"] == 0.5


def test_u_min_applies_to_each_stratum(tmp_path):
    results = run(tmp_path, stratify_by="user-history", user_bins=[1, 3], cold_users=True,
                  u_min=2).results
    assert recall(results, "pop", "3+")["skipped"]  # one user
    assert not recall(results, "pop", "1-2")["skipped"]
    assert not recall(results, "pop", "first-time")["skipped"]


def test_the_model_api_says_who_can_score_users_without_history():
    able = {name: resolve(name)[0].scores_cold_users()
            for name in ("pop", "pop-n", "decay-pop", "item-knn", "user-knn", "svd", "als")}
    assert able == {"pop": True, "pop-n": True, "decay-pop": True, "item-knn": False,
                    "user-knn": False, "svd": False, "als": False}


@settings(max_examples=60, deadline=None)
@given(random_logs(sizes=(5, 60), users=12, items=8, days=4),
       st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True).map(sorted),
       st.integers(0, 2 * DAY))
def test_user_strata_partition_the_evaluated_users_from_data_before_the_cutoff(log, bins, late):
    """Every eligible user is in exactly one history bin; appending transactions at and after
    t_f (new users and items among them) changes no user's stratum."""
    strata = UserStrata.of("user-history", bins)
    spec = WindowSpec(width_s=DAY, n_folds=2, start=2 * DAY)
    frame = log.to_frame()
    extra = pd.DataFrame({"user": [0, 3, 99], "item": [1, 77, 2],
                          "timestamp": [2 * DAY, 2 * DAY + late, 3 * DAY + late]})
    grown = InteractionLog.from_frame(pd.concat([frame, extra], ignore_index=True),
                                      dedup="none")
    plain = InteractionLog.from_frame(frame, dedup="none")
    assume(plain.t_max >= 2 * DAY)  # a window with data
    first = build_folds(plain, spec, u_min=0)[0]
    later = build_folds(grown, spec, u_min=0)[0]
    groups = strata.groups(_Split(plain, first), first.eligible_users)
    stacked = np.vstack(list(groups.values())) if groups else np.zeros((0, 0), dtype=bool)
    assert (stacked.sum(axis=0) == 1).all()  # a partition of U_f
    counts = np.bincount(plain.user[: first.train_hi], minlength=plain.n_users)
    for label, mask in groups.items():
        lower = int(label.rstrip("+").split("-")[0])
        assert (counts[first.eligible_users[mask]] >= lower).all()
    # the same users, by raw id, land in the same strata on the grown log
    def labels(log, fold):
        found = strata.groups(_Split(log, fold), fold.eligible_users)
        return {log.user_ids[user]: label for label, mask in found.items()
                for user in fold.eligible_users[mask]}

    before, after = labels(plain, first), labels(grown, later)
    assert {user: after[user] for user in before} == before
    # first-time users are the window's others: never eligible, never in a bin
    cold = cold_users(plain, first)
    assert not np.isin(cold, first.eligible_users).any()
    window = np.unique(plain.user[first.test_lo:first.test_hi])
    assert np.array_equal(np.union1d(cold, first.eligible_users), window)


class _Split:
    """What :meth:`UserStrata.groups` reads of a window split: its log and fold."""

    def __init__(self, log, fold):
        self.log, self.fold = log, fold
