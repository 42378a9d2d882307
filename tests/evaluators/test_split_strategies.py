"""papers/002's splitting strategies: random-split and temporal-user (hand-computed splits,
a slow reference, the hold-out invariants as properties), and the rank-shift table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import DAY, make_log, random_logs

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.experiments.compare_tables import rank_shift
from sweval.evaluators.protocols.holdout import RandomSplit, TemporalUser, parse_protocols
from sweval.evaluators.protocols.splits import held_out_count, share_positions

#: u: 5 transactions (days 0..4), v: 2 (days 0 and 3), w: 1 (never evaluated), x: 3 at one time
HAND = [("u", f"i{d}", d * DAY) for d in range(5)] + [
    ("v", "i0", 0), ("v", "i2", 3 * DAY), ("w", "i1", DAY),
    ("x", "i0", 2 * DAY), ("x", "i3", 2 * DAY), ("x", "i4", 2 * DAY),
]


@pytest.mark.parametrize(("share", "counts", "expected"), [
    (0.2, [2, 5, 8, 10], [1, 1, 2, 2]),   # ⌊0.4 + ½⌋ = 0 is raised to 1
    (0.25, [2, 4, 6], [1, 1, 2]),          # ⌊1.5 + ½⌋ = 2
    (0.9, [3, 10], [2, 9]),                # at most n_u − 1
    (0.3, [10], [3]),                      # exact: 0.3 · 10 is 3, not 2.9999...
])
def test_held_out_count_by_hand(share, counts, expected):
    assert held_out_count(np.array(counts), share).tolist() == expected


def test_temporal_user_holds_out_each_users_latest_share():
    log = make_log(HAND)
    split = next(TemporalUser(share=0.5).splits(log))
    rel = {log.user_ids[u]: sorted(log.item_ids[split.relevant.items[a:b]].tolist())
           for u, a, b in zip(split.relevant.users, split.relevant.indptr[:-1],
                              split.relevant.indptr[1:], strict=True)}
    # u: ⌊2.5 + ½⌋ = 3 latest; v: 1 (at most n − 1); x: 2 of 3, ties in t -> the later rows
    assert rel == {"u": ["i2", "i3", "i4"], "v": ["i2"], "x": ["i3", "i4"]}
    train = split.make_train()
    assert train.matrix.nnz == len(HAND) - 6
    times = dict(zip(log.user_ids[split.relevant.users], split.reference_time, strict=True))
    assert times == {"u": 2 * DAY, "v": 3 * DAY, "x": 2 * DAY}  # the earliest held-out one


def slow_random_positions(log, share: float, seed: int) -> list[int]:
    """The documented draw, one user at a time: keys in (user, time) order, smallest held."""
    keys = iter(np.random.default_rng(seed).random(len(log)).tolist())
    held = []
    for user in range(log.n_users):
        positions = [p for p in range(len(log)) if log.user[p] == user]
        user_keys = [next(keys) for _ in positions]
        if len(positions) < 2:
            continue
        n = held_out_count(np.array([len(positions)]), share)[0]
        ranked = sorted(zip(user_keys, range(len(positions)), strict=True))
        held += [positions[i] for _, i in ranked[:n]]
    return sorted(held)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_random_split_equals_a_slow_reference(seed):
    rng = np.random.default_rng(seed)
    log = make_log([(int(u), int(i), int(t)) for u, i, t in zip(
        rng.integers(0, 15, 120), rng.integers(0, 40, 120), rng.integers(0, 9 * DAY, 120),
        strict=True)])
    assert share_positions(log, 0.3, "random", seed=seed).tolist() == slow_random_positions(
        log, 0.3, seed)
    assert not np.array_equal(share_positions(log, 0.3, "random", seed=seed),
                              share_positions(log, 0.3, "random", seed=seed + 100))


@settings(max_examples=40, deadline=None)
@given(log=random_logs(sizes=(2, 60), users=8, items=12, days=5),
       share=st.sampled_from([0.1, 0.2, 0.5, 0.8]), how=st.sampled_from(["last", "random"]))
def test_share_splits_keep_the_hold_out_invariants(log, share, how):
    protocol = TemporalUser(share=share) if how == "last" else RandomSplit(share=share, seed=3)
    split = next(protocol.splits(log))
    held = share_positions(log, share, how, seed=3)
    counts = np.bincount(log.user, minlength=log.n_users)
    # evaluated: exactly the users with ≥ 2 transactions, each keeping ≥ 1 in training
    assert split.relevant.users.tolist() == np.flatnonzero(counts >= 2).tolist()
    per_user = np.bincount(log.user[held], minlength=log.n_users)
    assert (per_user[counts >= 2] == held_out_count(counts[counts >= 2], share)).all()
    assert (per_user <= np.maximum(counts - 1, 0)).all()
    # training: every transaction but the held-out ones
    keep = np.ones(len(log), dtype=bool)
    keep[held] = False
    train = split.make_train()
    pairs = {(int(u), int(i)) for u, i in zip(log.user[keep], log.item[keep], strict=True)}
    coo = train.matrix.tocoo()
    assert {(int(train.user_codes[r]), int(train.item_codes[c]))
            for r, c in zip(coo.row, coo.col, strict=True)} == pairs
    if how == "last":  # nothing held out is older than what the user keeps
        for user in split.relevant.users:
            mine = log.user == user
            assert log.timestamp[held][log.user[held] == user].min() >= \
                log.timestamp[keep & mine].max()


@pytest.mark.parametrize("share", [0.0, 1.0, -0.2, 1.5])
def test_a_ratio_outside_the_open_interval_is_refused(share):
    with pytest.raises(SwevalError, match="--split-ratio must be between 0 and 1"):
        RandomSplit(share=share)


def test_new_protocols_are_known():
    assert parse_protocols(["random-split", "temporal-user"]) == ["random-split",
                                                                  "temporal-user"]


def test_rank_shift_by_hand():
    rows = []
    for protocol, means in {"a": {"x": 0.3, "y": 0.2, "z": 0.1},
                            "b": {"x": 0.1, "y": 0.3, "z": 0.2},
                            "c": {"y": 0.5, "z": 0.4}}.items():
        rows += [{"protocol": protocol, "algorithm": name, "stratum": "all", "metric": "ndcg",
                  "k": 10, "mean": value} for name, value in means.items()]
    shift = rank_shift(pd.DataFrame(rows), ["a", "b", "c"], metric="ndcg")
    got = {(r.algorithm, r.protocol): (r.rank, r.shift) for r in shift.itertuples()}
    assert got["x", "a"] == (1, 0) and got["x", "b"] == (3, -2)
    assert got["y", "b"] == (1, 1) and got["z", "b"] == (2, 1)
    # c does not evaluate x: y is first there but was second only behind x; among y and z,
    # the algorithms both protocols rank, nothing moved (it read ↑1)
    assert pd.isna(got["x", "c"][0]) and pd.isna(got["x", "c"][1])
    assert got["y", "c"] == (1, 0) and got["z", "c"] == (2, 0)
    assert shift["algorithm"].drop_duplicates().tolist() == ["x", "y", "z"]  # a's order


def test_equal_means_share_a_rank_and_move_no_place():
    """Under b, x and y tie (0.2 and 0.2 plus float noise): both rank 1 and z ranks 3
    (competition ranking); under a, x is 1st and y 2nd, so y moves up one place, x none."""
    from sweval.flows.cli.compare_tables import _ranking_text

    rows = []
    for protocol, means in {"a": {"x": 0.3, "y": 0.2, "z": 0.1},
                            "b": {"x": 0.2, "y": 0.2 + 1e-15, "z": 0.1}}.items():
        rows += [{"protocol": protocol, "algorithm": name, "stratum": "all", "metric": "recall",
                  "k": 10, "mean": value} for name, value in means.items()]
    summary = pd.DataFrame(rows)
    shift = rank_shift(summary, ["a", "b"])
    got = {(r.algorithm, r.protocol): (r.rank, r.shift) for r in shift.itertuples()}
    assert got["x", "b"] == (1, 0) and got["y", "b"] == (1, 1) and got["z", "b"] == (3, 0)
    from sweval.evaluators.experiments.compare_tables import rankings, tied_ranks

    assert _ranking_text(rankings(summary, 10)["b"], tied_ranks(summary, 10)["b"]) == "x = y > z"


def test_leave_last_basket_by_hand():
    from sweval.evaluators.protocols.holdout import LeaveLastBasket

    rows = [("u", "a", 0, "o1"), ("u", "b", DAY, "o2"), ("u", "c", DAY, "o2"),
            ("u", "d", DAY + 5, "o1"),           # a late item of the first order: still o1
            ("v", "a", 0, "o1"), ("v", "e", 2 * DAY, "o1"),   # one basket: not evaluated
            ("w", "b", 0, "x"), ("w", "c", 3 * DAY, "y"), ("w", "e", 3 * DAY, "y")]
    log = InteractionLog.from_frame(
        pd.DataFrame(rows, columns=["user", "item", "timestamp", "order"]), basket_col="order")
    split = next(LeaveLastBasket().splits(log))
    rel = {log.user_ids[u]: sorted(log.item_ids[split.relevant.items[a:b]].tolist())
           for u, a, b in zip(split.relevant.users, split.relevant.indptr[:-1],
                              split.relevant.indptr[1:], strict=True)}
    # u's latest transaction (d) is in o1, so o1 = {a, d} is held out; w's last basket is y
    assert rel == {"u": ["a", "d"], "w": ["c", "e"]}
    assert split.make_train().matrix.nnz == len(rows) - 4


def test_leave_last_basket_needs_the_column():
    from sweval.evaluators.protocols.holdout import LeaveLastBasket

    with pytest.raises(SwevalError, match="--basket-col"):
        next(LeaveLastBasket().splits(make_log(HAND)))


def test_a_basket_column_that_does_not_exist_names_it():
    with pytest.raises(SwevalError, match="missing column.*'order'"):
        InteractionLog.from_frame(pd.DataFrame(HAND, columns=["user", "item", "timestamp"]),
                                  basket_col="order")


@st.composite
def basket_logs(draw) -> InteractionLog:
    """Random logs whose transactions carry an order id (a few orders per user)."""
    n = draw(st.integers(2, 50))
    frame = pd.DataFrame({
        "user": draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)),
        "item": draw(st.lists(st.integers(0, 10), min_size=n, max_size=n)),
        "timestamp": draw(st.lists(st.integers(0, 4 * DAY), min_size=n, max_size=n)),
        "order": draw(st.lists(st.sampled_from(["o1", "o2", "o3"]), min_size=n, max_size=n)),
    })
    return InteractionLog.from_frame(frame, basket_col="order",
                                     dedup=draw(st.sampled_from(["first", "none"])))


@settings(max_examples=40, deadline=None)
@given(log=basket_logs())
def test_leave_last_basket_keeps_the_hold_out_invariants(log):
    from sweval.evaluators.protocols.holdout import LeaveLastBasket
    from sweval.evaluators.protocols.splits import last_basket_positions

    split = next(LeaveLastBasket().splits(log))
    held = last_basket_positions(log)
    frame = log.to_frame().reset_index(drop=True)
    baskets = frame.groupby("user")["basket"].nunique()
    evaluated = sorted(baskets[baskets >= 2].index)
    assert sorted(log.user_ids[split.relevant.users].tolist()) == evaluated
    for user in evaluated:  # held out: every transaction of the basket of the latest one
        mine = frame[frame["user"] == user]
        last_basket = mine["basket"].iloc[-1]
        assert sorted(mine.index[mine["basket"] == last_basket]) == sorted(
            p for p in held.tolist() if frame.loc[p, "user"] == user)
    keep = np.ones(len(log), dtype=bool)
    keep[held] = False
    coo = split.make_train().matrix.tocoo()
    train = split.make_train()
    assert {(int(train.user_codes[r]), int(train.item_codes[c]))
            for r, c in zip(coo.row, coo.col, strict=True)} == {
        (int(u), int(i)) for u, i in zip(log.user[keep], log.item[keep], strict=True)}


def test_held_out_items_later_in_time_but_earlier_in_id_are_hits():
    """u holds out b (day 5) then a (day 6): in time order b, a; in item order a, b. POP's top-1
    for u is a (three other users took it), so Recall@1 = 1/2 and HitRate@1 = 1. Relevant
    items kept in time order made the binary search in hit_matrix miss a (Recall 0)."""
    from sweval.evaluators.experiments.protocol_runs import run_protocol

    rows = [("u", "x1", 0), ("u", "x2", DAY), ("u", "b", 5 * DAY), ("u", "a", 6 * DAY)]
    rows += [(f"v{i}", "a", 0) for i in range(3)]
    log = make_log(rows)
    results = run_protocol(log, TemporalUser(share=0.5), ["pop"], ks=[1]).results
    values = results.set_index("metric")["value"]
    assert (values["recall"], values["hit_rate"]) == (0.5, 1.0)


@settings(max_examples=60, deadline=None)
@given(log=random_logs(sizes=(2, 60), users=8, items=12, days=5),
       how=st.sampled_from(["random-split", "temporal-user", "basket"]))
def test_every_hold_out_protocol_scores_like_a_set_intersection(log, how):
    """Recall@k of POP under each multi-item hold-out protocol equals |top-k ∩ Rel_u| / |Rel_u|
    computed with Python sets from the split's lists (a slow, order-free reference)."""
    from sweval.evaluators.protocols.holdout import LeaveLastBasket, RandomSplit
    from sweval.evaluators.units.algorithm_spec import AlgorithmSpec
    from sweval.evaluators.units.engine import compute_lists, list_length, measure

    if how == "basket":
        frame = log.to_frame().reset_index(drop=True)
        frame["basket"] = frame["timestamp"] // DAY
        log = InteractionLog.from_frame(frame, basket_col="basket")
        protocol = LeaveLastBasket()
    else:
        protocol = RandomSplit(share=0.5, seed=1) if how == "random-split" else TemporalUser(
            share=0.5)
    split = next(protocol.splits(log))
    if not len(split.relevant.users):
        return
    model = AlgorithmSpec.of("pop", {}).build()
    depth = list_length([1, 3], split.relevant.sizes)
    lists = compute_lists(model, split.make_train(), split.relevant.users, depth)
    result = measure(lists, split.relevant, [1, 3], n_items=log.n_items, index=0, algorithm="pop")
    rel = split.relevant
    for j, user in enumerate(rel.users):
        relevant = set(rel.items[rel.indptr[j]:rel.indptr[j + 1]].tolist())
        top = [i for i in lists.items[j, :3].tolist() if i >= 0]
        assert result.values[("recall", 3)][j] == len(relevant & set(top)) / len(relevant)


def test_relevant_sets_refuse_items_out_of_order():
    from sweval.evaluators.metrics.ranking import RelevantSets

    ok = RelevantSets(users=np.array([0, 1]), indptr=np.array([0, 2, 3]),
                      items=np.array([1, 5, 0]))  # 5 then 0: a new user starts
    assert ok.sizes.tolist() == [2, 1]
    for items in ([5, 1, 0], [1, 1, 0]):
        with pytest.raises(ValueError, match="ascending and distinct"):
            RelevantSets(users=np.array([0, 1]), indptr=np.array([0, 2, 3]),
                         items=np.array(items))


def test_a_negative_seed_and_absurd_repetitions_are_refused_before_any_fit(tmp_path):
    """numpy refuses negative seeds and range() huge counts with tracebacks; compare checks
    both before it fits SW-EVAL's units."""
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.protocols.holdout import LOOCV
    from sweval.flows.cli.compare import run_compare

    with pytest.raises(SwevalError, match="--split-seed must be ≥ 0, got -1"):
        RandomSplit(seed=-1)
    with pytest.raises(SwevalError, match="--loocv-repeats must be between 1 and 10,000"):
        LOOCV(repeats=10**20)
    config = EvalConfig.build(algorithms=["pop"], tracking=False, progress=False,
                              output=str(tmp_path / "out"))
    for options, message in (({"split_seed": -1}, "--split-seed"),
                             ({"loocv_repeats": 10**20}, "--loocv-repeats")):
        with pytest.raises(SwevalError, match=message):
            run_compare(config, ["sw-eval", "loocv", "random-split"], output=tmp_path / "out",
                        **options)
        assert not (tmp_path / "out" / "sw-eval").exists()
