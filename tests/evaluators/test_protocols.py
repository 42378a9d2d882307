"""Comparison protocols (SPEC §7): hand-computed splits, the future-item leakage count, the
zero-leakage property of SW-EVAL, Kendall's τ against scipy, and SW-EVAL = the engine."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import DAY, make_log, random_logs

from sweval.algorithms.registry import ALGORITHMS
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.compare_tables import (
    compare_summary,
    kendall_table,
    kendall_tau,
    leakage_summary,
    rankings,
)
from sweval.evaluators.experiments.protocol_runs import run_protocol
from sweval.evaluators.protocols.holdout import (
    LOOCV,
    LeaveLastOneOut,
    SlidingWindow,
    TemporalGlobal,
    default_cutoff,
    parse_protocols,
)
from sweval.evaluators.protocols.splits import holdout_positions, item_first_seen
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.run.plan import make_plan

KS = [1, 2]


def split_of(log: InteractionLog, protocol, index: int = 0):
    return [s for s in protocol.splits(log)][index]


def decoded(log: InteractionLog, split) -> dict:
    """A split in raw ids: {user: [relevant items]}, reference times, training (u, i) pairs."""
    indptr, items = split.relevant.indptr, split.relevant.items
    rel = {
        log.user_ids[u].item(): [log.item_ids[i].item() for i in items[indptr[j]:indptr[j + 1]]]
        for j, u in enumerate(split.relevant.users)
    }
    ref = {log.user_ids[u].item(): int(t) for u, t in zip(split.users, split.reference_time)}
    train = split.train
    rows, cols = train.matrix.nonzero()
    pairs = sorted(
        (log.user_ids[train.user_codes[r]].item(), log.item_ids[train.item_codes[c]].item())
        for r, c in zip(rows, cols)
    )
    return {"rel": rel, "ref": ref, "train": pairs}


# ---------------------------------------------------------------------- a tiny hand-built log
#   user 1: 10@d0 11@d1 12@d5          3 transactions
#   user 2: 11@d2 13@d6                2 transactions
#   user 3: 14@d3                      1 transaction: never evaluated, stays in training
#   user 4: 10@d4 12@d4 (same second)  ties in t: the later row is "the last"
TINY = [
    (1, 10, 0 * DAY), (1, 11, 1 * DAY), (2, 11, 2 * DAY), (3, 14, 3 * DAY),
    (4, 10, 4 * DAY), (4, 12, 4 * DAY), (1, 12, 5 * DAY), (2, 13, 6 * DAY),
]


@pytest.fixture
def tiny() -> InteractionLog:
    return make_log(TINY)


def test_leave_last_one_out_split_by_hand(tiny):
    split = split_of(tiny, LeaveLastOneOut())
    got = decoded(tiny, split)
    assert got["rel"] == {1: [12], 2: [13], 4: [12]}
    assert got["ref"] == {1: 5 * DAY, 2: 6 * DAY, 4: 4 * DAY}
    assert got["train"] == [(1, 10), (1, 11), (2, 11), (3, 14), (4, 10)]
    assert (split.index, split.skip_reason) == (0, None)


def test_loocv_split_by_hand(tiny):
    # users with ≥ 2 transactions, in code order: 1 (3), 2 (2), 4 (2); the draw of seed 0:
    picks = np.random.default_rng(0).integers(0, [3, 2, 2])
    history = {1: [(10, 0), (11, 1), (12, 5)], 2: [(11, 2), (13, 6)], 4: [(10, 4), (12, 4)]}
    held = {u: history[u][p] for u, p in zip((1, 2, 4), picks)}
    expected_train = sorted(
        (u, i) for u, i, t in TINY if u not in held or (i, t // DAY) != held[u]
    )
    split = split_of(tiny, LOOCV(repeats=3), 0)
    got = decoded(tiny, split)
    assert got["rel"] == {u: [held[u][0]] for u in (1, 2, 4)}
    assert got["ref"] == {u: held[u][1] * DAY for u in (1, 2, 4)}
    assert got["train"] == expected_train
    assert [s.index for s in LOOCV(repeats=3).splits(tiny)] == [0, 1, 2]  # seeds recorded


def test_loocv_draws_are_uniform_and_seeded(tiny):
    counts = np.zeros(len(tiny), dtype=int)
    for seed in range(600):
        held = holdout_positions(tiny, "random", seed=seed)
        counts[held] += 1
        assert sorted(tiny.user_ids[tiny.user[held]]) == [1, 2, 4]  # one per user, never user 3
    user_1 = np.flatnonzero(tiny.user_ids[tiny.user] == 1)
    assert np.allclose(counts[user_1] / 600, 1 / 3, atol=0.06)
    np.testing.assert_array_equal(holdout_positions(tiny, "random", seed=5),
                                  holdout_positions(tiny, "random", seed=5))


def test_temporal_global_split_by_hand(tiny):
    # span 6 days: t_c = d0 + ceil(0.8 · 6 d) = 4.8 days
    assert default_cutoff(tiny) == int(4.8 * DAY)
    split = split_of(tiny, TemporalGlobal())
    got = decoded(tiny, split)
    assert got["rel"] == {1: [12], 2: [13]}
    assert got["ref"] == {1: 5 * DAY, 2: 6 * DAY}
    assert got["train"] == [(1, 10), (1, 11), (2, 11), (3, 14), (4, 10), (4, 12)]
    # an explicit cut-off: only user 1 has history before d2; Rel_1 = {12}
    got = decoded(tiny, split_of(tiny, TemporalGlobal(start=2 * DAY)))
    assert got["rel"] == {1: [12]} and got["train"] == [(1, 10), (1, 11)]
    with pytest.raises(SwevalError, match="after the last event"):
        split_of(tiny, TemporalGlobal(start=7 * DAY))


def test_sliding_window_split_by_hand(tiny):
    protocol = SlidingWindow.from_spec(tiny, WindowSpec(width_s=DAY, n_folds=2, start=5 * DAY),
                                       u_min=0)
    first, second = list(protocol.splits(tiny))
    assert decoded(tiny, first)["rel"] == {1: [12]}
    assert decoded(tiny, first)["ref"] == {1: 5 * DAY}
    assert decoded(tiny, second)["rel"] == {2: [13]}
    assert decoded(tiny, second)["train"] == [
        (1, 10), (1, 11), (1, 12), (2, 11), (3, 14), (4, 10), (4, 12)
    ]


def test_u_min_skips_holdout_splits(tiny):
    run = run_protocol(tiny, LeaveLastOneOut(u_min=4), ["pop"], ks=KS)
    assert run.results["skipped"].all()
    assert run.results["skip_reason"].iloc[0] == "n_eligible=3 < u_min=4"
    assert run.leakage.empty


# ---------------------------------------------------------------------- leakage, by hand
#   user 1: A@1 B@2                  held out B@2  (leave-last-one-out)
#   user 2: A@3 C@4 D@5 B@6          held out B@6
#   user 3: C@7 D@8 E@9              held out E@9
#   user 4: A@10 C@11                held out C@11
# training: A×3 (users 1, 2, 4), C×2 (2, 3), D×2 (2, 3); B and E are not in training.
# first appearance: A 1, B 2, C 4, D 5, E 9.
# POP lists (seen items dropped, ties by id): u1 [C, D]  u2 []  u3 [A]  u4 [C, D]
# future items (first appearance > held-out time): u1: C (4 > 2), D (5 > 2) → 2; others 0.
LEAK = [
    (1, "A", 1), (1, "B", 2), (2, "A", 3), (2, "C", 4), (2, "D", 5), (2, "B", 6),
    (3, "C", 7), (3, "D", 8), (3, "E", 9), (4, "A", 10), (4, "C", 11),
]


def test_leakage_count_by_hand():
    log = make_log(LEAK)
    first = item_first_seen(log)
    assert dict(zip(log.item_ids, first)) == {"A": 1, "B": 2, "C": 4, "D": 5, "E": 9}
    run = run_protocol(log, LeaveLastOneOut(), ["pop"], ks=KS)
    leak = run.leakage.set_index("k")
    assert leak.loc[2, ["n_lists", "n_recommended", "n_future", "n_lists_with_future"]].tolist() \
        == [4, 5, 2, 1]
    assert leak.loc[2, "share_future"] == pytest.approx(2 / 5)
    assert leak.loc[1, ["n_recommended", "n_future"]].tolist() == [3, 1]  # u1 [C], u3 [A], u4 [C]
    recall = run.results.query("metric == 'recall'").set_index("k")["value"]
    assert recall[1] == pytest.approx(1 / 4) and recall[2] == pytest.approx(1 / 4)  # only u4 hits
    pooled = leakage_summary(run.leakage).set_index("k")
    assert pooled.loc[2, "n_future"] == 2 and pooled.loc[2, "n_splits"] == 1


def test_pop_n_is_skipped_under_loocv_and_evaluated_under_llo():
    log = make_log(LEAK)
    loocv = run_protocol(log, LOOCV(repeats=2), ["pop", "pop-n"], ks=KS)
    skipped = loocv.results[loocv.results["algorithm"] == "pop-n"]
    assert skipped["skipped"].all() and skipped["value"].isna().all()
    assert "not defined under loocv" in skipped["skip_reason"].iloc[0]
    assert set(loocv.results["fold"]) == {0, 1}
    assert not loocv.results.loc[loocv.results["algorithm"] == "pop", "skipped"].any()
    llo = run_protocol(log, LeaveLastOneOut(), ["pop-n"], ks=KS)
    assert not llo.results["skipped"].any()
    summary = compare_summary(loocv.results)
    assert summary.loc[summary["algorithm"] == "pop-n", "n_folds"].eq(0).all()


# ---------------------------------------------------------------------- properties on random logs
#: Small random logs; the properties below hold on every one.
LOGS = random_logs(sizes=(2, 80), users=8, items=12, days=6)


PROPERTY_ALGORITHMS = [name for name in ("pop", "pop-n", "item-knn") if name in ALGORITHMS]


@settings(max_examples=40, deadline=None)
@given(
    log=LOGS,
    width=st.sampled_from([6 * 3600, DAY, 2 * DAY]),
    n_folds=st.integers(1, 5),
    train_window=st.sampled_from([None, DAY]),
    relevance=st.sampled_from(["all", "first"]),
)
@pytest.mark.slow
def test_sw_eval_recommends_no_future_item(log, width, n_folds, train_window, relevance):
    protocols = [
        SlidingWindow.from_spec(
            log, WindowSpec(width_s=width, n_folds=n_folds, train_window_s=train_window),
            u_min=0, relevance=relevance,
        ),
        TemporalGlobal(train_window_s=train_window, relevance=relevance),
    ]
    for protocol in protocols:
        run = run_protocol(log, protocol, PROPERTY_ALGORITHMS, ks=[1, 3, 10])
        assert (run.leakage["n_future"] == 0).all()
        per_fold = run.leakage.groupby("fold")["n_lists"].transform("max")
        assert (run.leakage["n_lists"] == per_fold).all()  # every algorithm, every user


def naive_future_count(log: InteractionLog, run, k: int) -> int:
    """The leakage count by brute force, from the kept lists (a reference implementation)."""
    first = {}
    for item, t in zip(log.item, log.timestamp):
        first.setdefault(int(item), int(t))
    return sum(
        sum(1 for item in lst[:k] if item >= 0 and first[int(item)] > ref)
        for lst, ref in zip(run["lists"], run["ref"])
    )


@settings(max_examples=40, deadline=None)
@given(log=LOGS, seed=st.integers(0, 50))
def test_holdout_leakage_matches_brute_force(log, seed):
    from sweval.algorithms.registry import build_algorithm
    from sweval.evaluators.experiments.compare_tables import future_items
    from sweval.evaluators.units.engine import compute_lists, list_length

    for protocol in (LeaveLastOneOut(), LOOCV(repeats=1)):
        for split in protocol.splits(log):
            if split.n_eligible == 0:
                continue
            # train ∪ held out = D, one held-out transaction per user with ≥ 2 transactions
            counts = np.bincount(log.user, minlength=log.n_users)
            assert list(split.users) == list(np.flatnonzero(counts >= 2))
            assert split.train.matrix.sum() <= len(log) - split.n_eligible
            depth = list_length([5], split.relevant.sizes)
            recommended = compute_lists(build_algorithm("pop"), split.train, split.users,
                                        depth).items
            future = future_items(recommended, split.reference_time, item_first_seen(log))
            expected = naive_future_count(
                log, {"lists": recommended, "ref": split.reference_time}, 5
            )
            assert int(future.sum()) == expected


# ---------------------------------------------------------------------- Kendall's τ, rankings
@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([4, 3, 2, 1], [4, 3, 2, 1], 1.0),          # same ranking
        ([4, 3, 2, 1], [1, 2, 3, 4], -1.0),         # reversed
        ([4, 3, 2, 1], [4, 3, 1, 2], 2 / 3),        # one adjacent swap: (5 − 1) / 6 pairs
        ([5, 4, 3, 2, 1], [5, 3, 4, 1, 2], 0.6),    # two swaps: (8 − 2) / 10
    ],
)
def test_kendall_tau_matches_hand_values_and_scipy(a, b, expected):
    tau, p_value = kendall_tau(a, b)
    assert tau == pytest.approx(expected)
    reference = scipy.stats.kendalltau(a, b)
    assert tau == pytest.approx(reference.statistic) and p_value == pytest.approx(reference.pvalue)


def test_kendall_table_ranks_common_algorithms_only():
    rows = []
    means = {
        "sw-eval": {"pop": 0.10, "pop-n": 0.12, "item-knn": 0.20, "svd": 0.15},
        "loocv": {"pop": 0.05, "item-knn": 0.40, "svd": 0.30},     # pop-n not defined
        "leave-last-one-out": {"pop": 0.30, "pop-n": 0.01, "item-knn": 0.20, "svd": 0.25},
    }
    for protocol, values in means.items():
        for algorithm, value in values.items():
            rows.append({"protocol": protocol, "algorithm": algorithm, "stratum": "all",
                         "metric": "recall", "k": 10, "mean": value})
    rows.append({"protocol": "loocv", "algorithm": "pop-n", "stratum": "all", "metric": "recall",
                 "k": 10, "mean": np.nan})
    summary = pd.DataFrame(rows)
    table = kendall_table(summary, list(means)).set_index(["protocol_a", "protocol_b"])
    assert table.loc[("sw-eval", "loocv"), "n_algorithms"] == 3
    assert table.loc[("sw-eval", "loocv"), "tau"] == pytest.approx(1.0)
    order = ["pop", "pop-n", "item-knn", "svd"]
    expected = scipy.stats.kendalltau([means["sw-eval"][a] for a in order],
                                      [means["leave-last-one-out"][a] for a in order]).statistic
    assert table.loc[("sw-eval", "leave-last-one-out"), "tau"] == pytest.approx(expected)
    assert rankings(summary, 10)["loocv"] == ["item-knn", "svd", "pop"]


def test_parse_protocols_errors():
    assert parse_protocols(["sw-eval", " loocv "]) == ["sw-eval", "loocv"]
    with pytest.raises(SwevalError, match="unknown protocol"):
        parse_protocols(["sw-eval", "k-fold"])
    with pytest.raises(SwevalError, match="twice"):
        parse_protocols(["loocv", "loocv"])
    with pytest.raises(SwevalError, match="at least one"):
        parse_protocols([])
    with pytest.raises(SwevalError, match="between 1 and 10,000"):
        LOOCV(repeats=0)


# ---------------------------------------------------------------------- SW-EVAL is the engine
def test_sw_eval_rows_equal_sweval_run(tmp_path):
    config = EvalConfig.build(
        data="movielens-latest-small", window="7D", folds=4, u_min=3, k=[5, 10],
        algorithms=["pop", "pop-n"], params={"pop-n": {"n_recent": 500}},
        output=str(tmp_path / "run"), progress=False, tracking=False,
    )
    reference = evaluate_config(config).results
    plan = make_plan(config)
    run = run_protocol(plan.log, SlidingWindow(plan.folds, config.relevance), config.algorithms,
                       ks=config.k, params=config.params, config_hash=plan.key)
    pd.testing.assert_frame_equal(run.results.drop(columns="protocol"), reference)
    assert (run.leakage["n_future"] == 0).all()
