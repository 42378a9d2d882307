"""Leakage severity (papers/000 §3-4): a hand-computed log, the splits' invariants, bad input."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY, MANY_SERIES, assert_legend_inside, line_colours

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.leakage import (
    LeakageSeverity,
    SeverityDesign,
    held_out_positions,
    mean_jaccard,
)
from sweval.evaluators.report.leakage_figures import severity_figure
from sweval.flows.cli.leakage import run_leakage

HOUR = 3600
#: P = [2D, 3D). Test users: a (z), b (y), c (x); e has no transaction before P. Day 3 brings
#: item v (3 users), day 4 item u (4 users): future items for P's test instances.
HAND = [
    ("a", "x", 0), ("b", "x", HOUR), ("c", "y", 2 * HOUR),
    ("a", "y", DAY), ("d", "x", DAY + HOUR),
    ("a", "z", 2 * DAY + HOUR), ("b", "y", 2 * DAY + 2 * HOUR), ("c", "x", 2 * DAY + 3 * HOUR),
    ("e", "y", 2 * DAY + 4 * HOUR),
    ("f", "v", 3 * DAY), ("g", "v", 3 * DAY + HOUR), ("h", "v", 3 * DAY + 2 * HOUR),
    ("f", "u", 4 * DAY), ("g", "u", 4 * DAY + HOUR), ("h", "u", 4 * DAY + 2 * HOUR),
    ("i", "u", 4 * DAY + 3 * HOUR),
]
DESIGN = SeverityDesign(test_start=2 * DAY, period_s=DAY, periods=2)


def frame_of(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["user", "item", "timestamp"])


@pytest.fixture
def hand_run(tmp_path):
    data = tmp_path / "hand.csv"
    frame_of(HAND).to_csv(data, index=False)
    config = EvalConfig(data=str(data), algorithms=["pop"], k=[1, 2, 3], u_min=0,
                        tracking=False, progress=False, output=str(tmp_path / "out"))
    return run_leakage(config, DESIGN, output=tmp_path / "out"), tmp_path / "out"


def test_hand_computed_training_sizes_hit_rates_and_future_items(hand_run):
    severity, _ = hand_run
    # j=0: days 0-1 (5) + e's transaction in P (the 3 test instances are held out)
    assert severity.splits["n_train"].tolist() == [6, 9, 13]
    assert severity.splits["n_test"].tolist() == [3, 3, 3]
    hit = severity.results[severity.results["metric"] == "hit_rate"]
    value = {(int(r.fold), int(r.k)): r.value for r in hit.itertuples()}
    # j=0: POP x=3, y=3 -> a has seen both (empty list), b gets [y] (hit), c gets [x] (hit)
    assert value[0, 1] == pytest.approx(2 / 3)
    # j=1: v=3 joins and wins the tie by id: a [v], b [v, y], c [v, x]
    assert (value[1, 1], value[1, 2]) == (0.0, pytest.approx(2 / 3))
    # j=2: u=4 leads: a [u, v], b [u, v, y], c [u, v, x]
    assert (value[2, 2], value[2, 3]) == (0.0, pytest.approx(2 / 3))
    future = {(r.j, r.k): r.n_future for r in severity.future.itertuples()}
    assert [future[0, k] for k in (1, 2, 3)] == [0, 0, 0]  # by construction
    assert [future[1, k] for k in (1, 2, 3)] == [3, 3, 3]  # v in each list
    assert [future[2, k] for k in (1, 2, 3)] == [3, 6, 6]  # u, then u and v
    assert set(severity.future["n_future_instance"][severity.future["j"] == 0]) == {0}
    jaccard = {(r.j, r.k): r.jaccard_vs_j0 for r in severity.overlap.itertuples()}
    # k=2, j=1: a {} vs {v} -> 0; b {y} vs {v, y} -> 1/2; c {x} vs {v, x} -> 1/2
    assert jaccard[1, 2] == pytest.approx(1 / 3)
    assert jaccard[0, 3] == 1.0


def test_change_and_ranking_tables(hand_run):
    severity, directory = hand_run
    change = severity.change.set_index(["metric", "k"])
    row = change.loc[("hit_rate", 3)]  # j0 2/3 (b, c), j1 2/3 ([v, y] / [v, x]), j2 2/3
    assert row["value_j0"] == pytest.approx(2 / 3)
    assert (row["min_change_pct"], row["max_change_pct"]) == (pytest.approx(0.0),
                                                              pytest.approx(0.0))
    row = change.loc[("hit_rate", 1)]  # 2/3 -> 0 -> 0: -100 %
    assert row["min_change_pct"] == row["max_change_pct"] == pytest.approx(-100.0)
    assert set(severity.ranking["rank"].dropna()) == {1}  # one algorithm: always first
    for name in ("results.csv", "future_items.csv", "change.csv", "ranking.csv", "overlap.csv",
                 "leakage_splits.csv", "severity.png", "leakage.json"):
        assert (directory / name).is_file(), name


def random_frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 300
    return frame_of(list(zip(rng.integers(0, 40, n).tolist(), rng.integers(0, 25, n).tolist(),
                             rng.integers(0, 10 * DAY, n).tolist(), strict=True)))


@pytest.mark.parametrize("seed", range(4))
def test_splits_hold_out_each_users_last_transaction_in_p_and_train_on_the_prefix(seed):
    log = InteractionLog.from_frame(random_frame(seed))
    design = SeverityDesign(test_start=4 * DAY, period_s=2 * DAY, periods=2)
    raw = log.to_frame().reset_index(drop=True)  # log order: time, then input row
    in_p = raw[(raw["timestamp"] >= design.test_start) & (raw["timestamp"] < design.test_end)]
    last = in_p.groupby("user").tail(1)
    first_position = raw.reset_index().groupby("user")["index"].min()
    expected = sorted(int(p) for p in last.index if first_position[last.loc[p, "user"]] < p)
    assert sorted(held_out_positions(log, design.test_start, design.test_end).tolist()) == expected

    splits = list(LeakageSeverity(design).splits(log))
    assert [s.index for s in splits] == [0, 1, 2]
    for j, split in enumerate(splits):
        train = split.make_train()
        assert train.cutoff == design.train_end(j)  # decay-pop's "now": the period's end
        keep = (raw["timestamp"] < design.train_end(j)) & ~raw.index.isin(expected)
        pairs = raw[keep].drop_duplicates(["user", "item"])
        assert train.matrix.nnz == len(pairs)
        rows = log.user_ids[train.user_codes[train.matrix.tocoo().row]]
        cols = log.item_ids[train.item_codes[train.matrix.tocoo().col]]
        assert set(zip(rows.tolist(), cols.tolist(), strict=True)) == set(
            zip(pairs["user"].tolist(), pairs["item"].tolist(), strict=True))
        assert split.relevant.users.tolist() == sorted(log.user[expected].tolist())
        assert (split.reference_time < design.test_end).all()
        assert (split.reference_time >= design.test_start).all()


def test_mean_jaccard_equals_a_set_reference():
    rng = np.random.default_rng(0)
    a = rng.integers(-1, 8, (30, 5))
    b = rng.integers(-1, 8, (30, 5))
    expected = []
    for x, y in zip(a[:, :4], b[:, :4], strict=True):
        sx, sy = {v for v in x if v >= 0}, {v for v in y if v >= 0}
        expected.append(len(sx & sy) / len(sx | sy) if sx | sy else 1.0)
    assert mean_jaccard(a, b, 4) == pytest.approx(np.mean(expected))


@pytest.mark.parametrize(("design", "message"), [
    (SeverityDesign(test_start=30 * DAY, period_s=DAY, periods=0), "holds no transaction"),
    (SeverityDesign(test_start=2 * DAY, period_s=DAY, periods=3), "at most 2"),
    (SeverityDesign(test_start=2 * DAY, period_s=DAY, periods=-1), "must be ≥ 0"),
])
def test_bad_designs_are_clear_errors(design, message):
    log = InteractionLog.from_frame(frame_of(HAND))
    with pytest.raises(SwevalError, match=message):
        design.check(log)


def test_the_command_exits_2_on_a_period_outside_the_log(tmp_path, monkeypatch, capsys):
    from sweval.flows.cli.app import main

    data = tmp_path / "hand.csv"
    frame_of(HAND).to_csv(data, index=False)
    monkeypatch.setattr(sys, "argv", [
        "sweval", "leakage", "--data", str(data), "--window", "1D", "--leak-test-start",
        "2001-01-01", "--algorithms", "pop", "--no-tracking", "--output", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "holds no transaction" in capsys.readouterr().err


@pytest.mark.parametrize("option", [["--train-window", "30D"], ["--relevance", "first"]])
def test_options_that_do_not_apply_are_refused(tmp_path, monkeypatch, capsys, option):
    """They were accepted, recorded in leakage.json and ignored by the numbers; then listed by
    `sweval leakage --help` and refused once typed. They are no options of the command."""
    from sweval.flows.cli.app import main

    data = tmp_path / "hand.csv"
    frame_of(HAND).to_csv(data, index=False)
    monkeypatch.setattr(sys, "argv", [
        "sweval", "leakage", "--data", str(data), "--window", "1D", "--leak-test-start",
        "2001-01-01", "--algorithms", "pop", "--no-tracking", "--output", str(tmp_path / "o"),
        *option])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "No such option" in capsys.readouterr().err


def test_seeded_models_get_a_reseeded_entry():
    from sweval.evaluators.experiments.leakage import reseeded_entry

    assert reseeded_entry("pop", {}) is None
    assert reseeded_entry("item-knn(n_neighbors=5)", {}) is None
    assert reseeded_entry("als(factors=8)", {}) == "als(factors=8,seed=1)"
    assert reseeded_entry("svd", {"svd": {"seed": 4}}) == "svd(seed=5)"


def test_intrinsic_overlap_is_the_jaccard_between_seeds(tmp_path):
    data = tmp_path / "log.csv"
    random_frame(0).to_csv(data, index=False)
    config = EvalConfig(data=str(data), algorithms=["pop", "als(factors=4,iterations=3)"],
                        k=[3], u_min=0, tracking=False, progress=False)
    design = SeverityDesign(test_start=4 * DAY, period_s=2 * DAY, periods=1)
    overlap = run_leakage(config, design, output=tmp_path / "out").overlap
    assert overlap.loc[overlap["algorithm"] == "pop", "intrinsic"].isna().all()
    als = overlap[overlap["algorithm"] == "als(factors=4,iterations=3)"]
    assert len(set(als["intrinsic"])) == 1 and 0.0 <= als["intrinsic"].iloc[0] <= 1.0
    # the reference: the two seeds' j = 0 lists, fitted here directly
    from sweval.data.loaders import load_log
    from sweval.evaluators.experiments.leakage import LeakageSeverity, mean_jaccard
    from sweval.evaluators.units.algorithm_spec import AlgorithmSpec
    from sweval.evaluators.units.store import UnitStore
    from sweval.evaluators.units.unit import compute_unit, plan_units

    log = load_log(data)
    split = next(LeakageSeverity(design).splits(log))
    store = UnitStore(tmp_path / "ref").prepare()
    lists = []
    for entry in ("als(factors=4,iterations=3)", "als(factors=4,iterations=3,seed=1)"):
        (unit,) = plan_units([split], [AlgorithmSpec.from_entry(entry, {})], [3], previous={})
        lists.append(compute_unit(unit, store).items)
    assert als["intrinsic"].iloc[0] == pytest.approx(mean_jaccard(lists[0], lists[1], 3))


def test_too_few_test_users_for_u_min_is_an_error_not_a_traceback(tmp_path):
    """P = day 2 has 3 test users (a, b, c; e has no history): u_min = 4 skips every j (the users
    are the same for every j), which leaves nothing to tabulate."""
    data = tmp_path / "hand.csv"
    frame_of(HAND).to_csv(data, index=False)
    config = EvalConfig(data=str(data), algorithms=["pop"], k=[1], u_min=4, tracking=False,
                        progress=False, output=str(tmp_path / "out"))
    with pytest.raises(SwevalError, match=r"every j is skipped \(n_eligible=3 < u_min=4\)"):
        run_leakage(config, DESIGN, output=tmp_path / "out")


def test_severity_figure_gives_every_algorithm_its_own_colour_and_a_legend_that_fits():
    """More algorithms than tab10 has colours, decay-pop's leak-free line among them."""
    results = pd.DataFrame([
        {"fold": j, "algorithm": algorithm, "stratum": "all", "metric": metric, "k": 10,
         "value": 0.1 + 0.01 * i + 0.02 * j, "skipped": False}
        for j in range(3) for i, algorithm in enumerate(MANY_SERIES)
        for metric in ("hit_rate", "ndcg")
    ])
    fig = severity_figure(results, MANY_SERIES, 10)
    colours = line_colours(fig, MANY_SERIES)
    assert set(colours) == set(MANY_SERIES) and len(set(colours.values())) == len(MANY_SERIES)
    assert_legend_inside(fig)
