"""Nested tuning on the timeline: the choice for fold f reads only windows before f."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sweval.algorithms as api
from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.run.results import results_frame
from sweval.evaluators.stats.tuning import optimism, tune, validation_folds
from sweval.evaluators.stats.tuning_candidates import TUNED

GRID = {"item-knn": {"n_neighbors": [5, 50]}}
A, B = "item-knn(n_neighbors=5)", "item-knn(n_neighbors=50)"


def config(tmp_path: Path, **overrides) -> EvalConfig:
    values = dict(
        data="movielens-latest-small", window="7D", folds=6, u_min=3, k=[5, 10],
        algorithms=["pop", "item-knn"], tune=GRID, output=str(tmp_path / "out"),
        progress=False, report=False, tracking=False,
    )
    return EvalConfig.build(**(values | overrides))


def hand_results(values: dict[str, list[float]], stratum: str = "all") -> pd.DataFrame:
    """Recall@10 per fold and candidate (NaN = skipped fold), the other metrics equal to it."""
    rows = []
    for algorithm, series in values.items():
        for fold, value in enumerate(series):
            skipped = bool(np.isnan(value))
            for metric, k in [("recall", 10), ("hit_rate", 10), ("ndcg", 10), ("r_precision", None)]:
                rows.append({
                    "fold": fold, "t_start": fold * 10, "t_end": fold * 10 + 10,
                    "algorithm": algorithm, "stratum": stratum, "metric": metric, "k": k,
                    "value": value, "n_users": 5, "n_eligible": 5, "skipped": skipped,
                    "skip_reason": "n_eligible=1 < u_min=3" if skipped else "",
                    "config_hash": "h",
                })
    return results_frame(rows, list(values))


def hand_config(**overrides) -> EvalConfig:
    return EvalConfig.build(**({"algorithms": ["item-knn"], "tune": GRID, "k": [10]} | overrides))


def test_the_tuned_series_follows_validation_and_the_oracle_follows_the_test_folds():
    # A wins the windows before folds 1-3 (folds 0-2), B wins the test folds 1-4 on average
    results = hand_results({A: [0.5, 0.4, 0.3, 0.2, 0.2], B: [0.1, 0.2, 0.9, 0.9, 0.9]})
    tuned, choices = tune(results, hand_config())
    recall = tuned[(tuned["metric"] == "recall")].set_index("fold")["value"]
    # fold 0: no window; fold f: the candidate best on fold f-1
    assert np.isnan(recall[0])
    assert list(recall[1:]) == [0.4, 0.3, 0.9, 0.9]  # A, A, B (0.9 > 0.3 on fold 2), B
    chosen = choices[choices["chosen"]].set_index("fold")["candidate"]
    assert list(chosen) == [A, A, B, B]
    table = optimism(pd.concat([results, tuned]), hand_config())
    row = table.iloc[0]
    assert row["oracle"] == B and row["n_folds"] == 4
    tuned_mean, oracle_mean = np.mean([0.4, 0.3, 0.9, 0.9]), np.mean([0.2, 0.9, 0.9, 0.9])
    assert row["tuned_mean"] == pytest.approx(tuned_mean)
    assert row["optimism"] == pytest.approx(oracle_mean / tuned_mean - 1)


def test_each_stratum_chooses_on_its_own_validation_windows():
    """--stratify-by: the tuned series of stratum "email" took the candidate chosen on all
    users; each stratum chooses on its own values (and skips its own skipped windows)."""
    everyone = hand_results({A: [0.5, 0.4, 0.3, 0.2], B: [0.1, 0.2, 0.9, 0.9]})
    email = hand_results({A: [0.1, np.nan, 0.6, 0.3], B: [0.2, np.nan, 0.1, 0.7]},
                         stratum="email")
    results = results_frame(pd.concat([everyone, email]).to_dict("records"), [A, B])
    tuned, choices = tune(results, hand_config())
    recall = tuned[tuned["metric"] == "recall"].set_index(["stratum", "fold"])["value"]
    assert list(recall["all"][1:]) == [0.4, 0.3, 0.9]  # A, A, B: as without strata
    # email: fold 1 skipped; fold 2's window (fold 1) skipped: no choice; fold 3: A (0.6)
    assert np.isnan(recall["email"][1]) and np.isnan(recall["email"][2])
    assert recall["email"][3] == 0.3
    chosen = choices[choices["chosen"]].set_index(["stratum", "fold"])["candidate"]
    assert chosen.to_dict() == {("all", 1): A, ("all", 2): A, ("all", 3): B,
                                ("email", 1): B, ("email", 3): A}
    assert set(choices["stratum"]) == {"all", "email"}


def test_ties_go_to_the_earlier_candidate_skipped_windows_are_ignored_and_once_chooses_once():
    results = hand_results({A: [0.2, np.nan, 0.7, 0.1], B: [0.2, np.nan, 0.1, 0.9]})
    tuned, choices = tune(results, hand_config(tune_windows=2))
    chosen = choices[choices["chosen"]].set_index("fold")["candidate"]
    # fold 2 reads folds 0 and 1 (1 skipped): the tie on fold 0 goes to A; fold 3 reads 1, 2
    assert dict(chosen) == {2: A, 3: A}
    recall = tuned[tuned["metric"] == "recall"].set_index("fold")
    assert recall.loc[1, "skipped"] and "u_min" in recall.loc[1, "skip_reason"]
    assert "no validation window" in recall.loc[0, "skip_reason"]
    _, once = tune(results, hand_config(tune_windows=1, tune_mode="once"))
    assert set(once[once["chosen"]]["candidate"]) == {A}
    assert set(once[once["chosen"]]["fold"]) == {1, 2, 3}


@settings(max_examples=200, deadline=None)
@given(
    n_folds=st.integers(1, 12), windows=st.integers(1, 4), mode=st.sampled_from(["rolling", "once"]),
    used=st.sets(st.integers(0, 11)),
)
def test_no_choice_reads_a_window_at_or_after_its_fold(n_folds, windows, mode, used):
    cfg = hand_config(tune_windows=windows, tune_mode=mode)
    folds = list(range(n_folds))
    for fold in folds:
        read = validation_folds(folds, used, fold, cfg)
        # folds are consecutive windows: w < f means w's window ends at or before t_f
        assert all(w < fold and w in used for w in read)
        assert len(read) <= windows


@pytest.mark.slow
def test_a_tuned_run_follows_the_plain_run_of_its_candidates_and_fits_nothing_more(
    tmp_path, count_units
):
    plain = evaluate_config(config(tmp_path, tune={}, algorithms=["pop", "item-knn", A, B],
                             output=str(tmp_path / "plain")))
    assert count_units
    count_units.clear()
    tuned = evaluate_config(config(tmp_path))  # another output, the one store
    assert count_units == []  # every unit it needs is one the plain run computed
    recall = plain.results[(plain.results["metric"] == "recall") & (plain.results["k"] == 10)]
    by = recall.pivot_table(index="fold", columns="algorithm", values="value")
    mine = tuned.results[(tuned.results["algorithm"] == "item-knn[tuned]")
                         & (tuned.results["metric"] == "recall") & (tuned.results["k"] == 10)]
    for fold, value in mine.set_index("fold")["value"].items():
        if fold == 0:
            assert np.isnan(value)
            continue
        previous = by.loc[fold - 1, [A, B]]
        best = A if previous[A] >= previous[B] else B
        assert value == by.loc[fold, best]
    assert (Path(tuned.directory) / "tuning.csv").exists()
    assert (Path(tuned.directory) / "optimism.csv").exists()
    from sweval.evaluators.report.page import write_report

    write_report(tuned.directory)
    page = (Path(tuned.directory) / "report.html").read_text()
    assert "Tuning on the timeline" in page and "item-knn[tuned]" in page
    # a rerun (after a kill, say) reuses every unit and writes the same table
    count_units.clear()
    again = evaluate_config(config(tmp_path))
    assert count_units == [] and again.results.equals(tuned.results)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"tune": {"item-knn": {"bogus": [1, 2]}}},
         r"--tune item-knn.bogus: item-knn has no parameter 'bogus' \(parameters: n_neighbors"),
        ({"tune": {"item-knn": {"n_neighbors": []}}}, "at least one value"),
        ({"tune": {"item-knn": {"n_neighbors": ["many"]}}}, "n_neighbors"),
        ({"tune": {"item-knn": {"n_neighbors": [50, -1]}}},  # QA: --tune was not named
         r"--tune item-knn.n_neighbors: the value -1 is refused: bad parameters for item-knn: "
         r"item-knn.n_neighbors: Input should be greater than"),
        ({"tune": {"als": {"factors": [8]}}}, "not in --algorithms"),
        ({"tune_metric": "recall@20"}, "k=20 is not computed"),
        ({"tune_metric": "precision@10"}, "precision is not measured; add it to --metrics"),
        ({"tune_metric": "gini@10", "metrics": ["recall", "gini"]}, "expected one of recall@K"),
        ({"tune_metric": "r_precision@10"}, "expected one of recall@K"),
        ({"tune_metric": "mrr"}, "expected one of recall@K"),
    ],
)
def test_bad_tuning_options_are_clear_errors(tmp_path, overrides, message):
    from sweval.evaluators.run.plan import make_plan

    with pytest.raises(SwevalError, match=message):
        make_plan(config(tmp_path, **overrides))


def test_the_command_line_reports_a_bad_grid_with_exit_code_2(tmp_path, monkeypatch, capsys):
    from sweval.flows.cli.app import main

    monkeypatch.setattr(sys, "argv", [
        "sweval", "run", "--no-prefect", "--no-tracking", "--data", "movielens-latest-small",
        "--algorithms", "pop", "--tune", "item-knn.n_neighbors=5,50", "--output", str(tmp_path),
    ])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    assert "not in --algorithms" in capsys.readouterr().err


def test_grids_take_lists_ranges_and_log_ranges_on_the_command_line_and_in_files(tmp_path):
    from sweval.evaluators.config.text import parse_grids

    assert parse_grids(["als.factors=range(8,40,8)", "item-knn.n_neighbors=log_range(10,1000,5)",
                        "pop-n.n_recent=100,1000"]) == {
        "als": {"factors": [8, 16, 24, 32]},
        "item-knn": {"n_neighbors": [10, 32, 100, 316, 1000]},
        "pop-n": {"n_recent": [100, 1000]},
    }
    # range's shorter forms read as Python's
    assert parse_grids(["als.factors=range(3)", "item-knn.n_neighbors=range(5,8)"]) == {
        "als": {"factors": [0, 1, 2]}, "item-knn": {"n_neighbors": [5, 6, 7]}}
    with pytest.raises(SwevalError, match="range needs numbers"):
        parse_grids(["item-knn.n_neighbors=range(5,8,0)"])
    # both ends are included: one point only where they are one value
    with pytest.raises(SwevalError, match=r"n >= 2\] \(both ends are included"):
        parse_grids(["item-knn.n_neighbors=log_range(10,1000,1)"])
    assert parse_grids(["item-knn.n_neighbors=log_range(10,10,1)"]) == {
        "item-knn": {"n_neighbors": [10]}}
    # a parameter's grid is given once (a second --tune replaced the first)
    with pytest.raises(SwevalError, match=r"--tune item-knn.n_neighbors is given twice"):
        parse_grids(["item-knn.n_neighbors=10,20", "item-knn.n_neighbors=30"])
    path = tmp_path / "eval.toml"
    path.write_text(
        'algorithms = ["item-knn", "als"]\n'
        '[tune.item-knn]\nn_neighbors = {log_range = [10, 1000, 3]}\n'
        '[tune.als]\nregularization = {range = [0.01, 0.04, 0.01]}\nfactors = [8, 16]\n'
    )
    cfg = EvalConfig.load(path)
    assert cfg.tune["item-knn"] == {"n_neighbors": [10, 100, 1000]}
    assert cfg.tune["als"]["factors"] == [8, 16]
    assert cfg.tune["als"]["regularization"] == [0.01, 0.02, 0.03]
    # float steps count in decimal, as written (QA: the label said days=0.30000000000000004)
    assert parse_grids(["x.y=range(0.1,0.35,0.1)", "x.z=range(0,1,0.25)"]) == {
        "x": {"y": [0.1, 0.2, 0.3], "z": [0.0, 0.25, 0.5, 0.75]}}
    assert parse_grids(["x.y=log_range(0.001,3.7,4)"])["x"]["y"][-1] == 3.7
    with pytest.raises(SwevalError, match="log_range needs"):
        EvalConfig.build(algorithms=["item-knn"], tune={"item-knn": {"n_neighbors": {
            "log_range": [0, 10, 3]}}})


@pytest.mark.slow
def test_compare_tunes_on_the_hold_out_protocols_and_evaluates_the_choice_on_the_timeline(
    tmp_path
):
    from sweval.flows.cli.compare import run_compare

    cfg = config(tmp_path, folds=5, tune={"item-knn": {"n_neighbors": [5, 50]}})
    holdout = ["loocv", "leave-last-one-out", "temporal-user", "random-split"]
    comparison = run_compare(cfg, ["sw-eval", *holdout], output=tmp_path / "cmp",
                             loocv_repeats=2)
    results = comparison.results
    sw = results[(results["protocol"] == "sw-eval") & (results["metric"] == "recall")
                 & (results["k"] == 10)].pivot_table(index="fold", columns="algorithm",
                                                      values="value")
    choices = pd.read_csv(tmp_path / "cmp" / "tuning_protocols.csv")
    assert set(choices["protocol"]) == set(holdout)  # every hold-out protocol that ran
    for protocol in holdout:
        mine = choices[choices["protocol"] == protocol]
        best = mine.sort_values("validation_value", ascending=False, kind="stable")
        chosen = mine[mine["chosen"]]["candidate"].item()
        assert chosen == best["candidate"].iloc[0]
        # the choice's SW-EVAL values, on the folds where the nested series has one
        series = sw[f"item-knn[tuned on {protocol}]"]
        nested = sw["item-knn[tuned]"]
        assert series.isna().equals(nested.isna())
        pd.testing.assert_series_equal(series.dropna(), sw[chosen][nested.notna()],
                                       check_names=False)
    assert (tmp_path / "cmp" / "tuning.csv").exists() and (tmp_path / "cmp" / "optimism.csv").exists()
    assert "tuning.csv, tuning_protocols.csv, optimism.csv" in (tmp_path / "cmp" / "compare.txt"
                                                                ).read_text()
    # the same directory compared again without --tune: no earlier choice is left to be read
    run_compare(config(tmp_path, folds=5, tune={}), ["sw-eval", "loocv"], output=tmp_path / "cmp",
                loocv_repeats=2)
    left = {"tuning.csv", "tuning_protocols.csv", "optimism.csv"} & {
        path.name for path in (tmp_path / "cmp").iterdir()}
    assert left == set()
    assert "tuning.csv" not in (tmp_path / "cmp" / "compare.txt").read_text()


def test_random_draws_are_seeded_distinct_grid_points_in_grid_order(tmp_path):
    from sweval.evaluators.stats.tuning_candidates import searches

    grid = {"item-knn": {"n_neighbors": [5, 10, 20, 40, 80, 160, 320, 640]}}
    draw = lambda seed: searches(config(  # noqa: E731
        tmp_path, tune=grid, tune_sampler="random", tune_trials=5, tune_seed=seed))[0]
    first = draw(0)
    assert first.candidates == draw(0).candidates  # seeded
    assert 1 <= len(first.candidates) <= 5
    values = [p["n_neighbors"] for p in first.params]
    assert values == sorted(values) and set(values) <= set(grid["item-knn"]["n_neighbors"])
    assert any(draw(seed).candidates != first.candidates for seed in range(1, 6))


@pytest.mark.slow
def test_tpe_steers_only_by_the_windows_before_the_first_test_fold(tmp_path, count_units):
    from sweval.evaluators.run.plan import make_plan
    from sweval.evaluators.stats.tuning_candidates import Search, sample

    cfg = config(tmp_path, tune={"item-knn": {"n_neighbors": [5, 20, 80, 320]}},
                 tune_sampler="tpe", tune_trials=4, tune_windows=2)
    plan = make_plan(cfg)
    # planning computed the candidates' units on folds 0 and 1 only, nothing of a test fold
    assert count_units and {fold for fold, _ in count_units} <= {0, 1}
    assert {name for _, name in count_units} == {"item-knn"}
    assert len(count_units) <= 2 * len(plan.searches[0].candidates)
    assert make_plan(cfg).searches == plan.searches  # deterministic
    count_units.clear()
    outputs = evaluate_config(cfg)
    assert outputs.n_reused >= 2 * len(plan.searches[0].candidates)  # the windows' units
    with pytest.raises(SwevalError, match="tpe needs"):
        sample(Search("item-knn", [], [], {"n_neighbors": [5]}), cfg, None)


def test_a_hand_built_log_where_validation_and_test_disagree(tmp_path):
    """Day 0: six users each with a private item, A three times, B last. Day d's test user
    consumes the day's answer; the day's last event (B, C, D) is what POP-N(1) recommends next.

    fold (test day)     last event before it   POP-N(1) recommends   POP-N(1000) recommends   truth
    0 (day 1)           B                      B                     A                        B
    1 (day 2)           C                      C                     A                        A
    2 (day 3)           D                      D                     A                        A

    Recall@1 per fold: n_recent=1 → 1, 0, 0; n_recent=1000 → 0, 1, 1. Nested (M = 1): fold 1
    takes n_recent=1 (best on fold 0) and scores 0, fold 2 takes n_recent=1000 and scores 1:
    tuned mean 0.5 over folds 1-2; the oracle (n_recent=1000) scores 1.0; optimism = 1.
    """
    from sweval.data.log import InteractionLog

    day, t0 = 86_400, 1_704_067_200
    events = [(f"u{i}", f"x{i}", t0 + i * 60) for i in range(1, 7)]
    events += [(f"w{i}", "A", t0 + 3_600 + i * 60) for i in range(1, 4)]
    events += [("w4", "B", t0 + day - 60)]
    events += [("u1", "B", t0 + day + 60), ("w5", "C", t0 + 2 * day - 60)]
    events += [("u2", "A", t0 + 2 * day + 60), ("w6", "D", t0 + 3 * day - 60)]
    events += [("u3", "A", t0 + 3 * day + 60)]
    log = InteractionLog.from_frame(pd.DataFrame(events, columns=["user", "item", "timestamp"]))
    cfg = EvalConfig.build(
        window="1D", folds=3, start=str(t0 + day), k=[1], u_min=1, algorithms=["pop-n"],
        tune={"pop-n": {"n_recent": [1, 1000]}}, tune_metric="recall@1",
        output=str(tmp_path / "hand"), progress=False, tracking=False,
    )
    outputs = evaluate_config(cfg, log=log)
    recall = outputs.results[outputs.results["metric"] == "recall"].pivot_table(
        index="fold", columns="algorithm", values="value")
    assert list(recall["pop-n(n_recent=1)"]) == [1.0, 0.0, 0.0]
    assert list(recall["pop-n(n_recent=1000)"]) == [0.0, 1.0, 1.0]
    assert list(recall["pop-n[tuned]"].dropna()) == [0.0, 1.0]
    chosen = outputs.tuning[outputs.tuning["chosen"]].set_index("fold")["candidate"]
    assert dict(chosen) == {1: "pop-n(n_recent=1)", 2: "pop-n(n_recent=1000)"}
    row = outputs.optimism.iloc[0]
    assert (row["tuned_mean"], row["oracle"], row["oracle_mean"], row["optimism"]) == (
        0.5, "pop-n(n_recent=1000)", 1.0, 1.0)


@pytest.mark.slow
def test_a_value_repeated_in_a_grid_is_one_candidate(tmp_path):
    from sweval.evaluators.stats.tuning_candidates import searches

    repeated = {"item-knn": {"n_neighbors": [50, 5, 50.0, 5]}}
    found = searches(config(tmp_path, tune=repeated))[0]
    assert found.candidates == [B, A] and found.params == [{"n_neighbors": 50},
                                                           {"n_neighbors": 5}]
    # the values as validated (50.0 → 50); the label as first written
    assert [type(p["n_neighbors"]) for p in found.params] == [int, int]
    spelled = searches(config(tmp_path, tune={"item-knn": {"n_neighbors": [50.0, 50]}}))[0]
    assert spelled.candidates == ["item-knn(n_neighbors=50.0)"]
    assert spelled.params == [{"n_neighbors": 50}]
    evaluate_config(config(tmp_path, tune=repeated, folds=4))
    out = tmp_path / "out"
    tuning = pd.read_csv(out / "tuning.csv")
    assert set(tuning["candidate"]) == {A, B}
    assert set(tuning["params"]) == {'{"n_neighbors": 50}', '{"n_neighbors": 5}'}
    assert (out / "optimism.csv").exists() and (out / "summary.csv").exists()


@pytest.mark.slow
def test_any_measured_metric_where_higher_is_better_can_be_tuned_for(tmp_path):
    """``--tune-metric precision@5`` with ``--metrics all``: every fold's choice is the candidate
    with the best mean Precision@5 on its validation window (the fold before), read here from
    results.csv."""
    from sweval.evaluators.run.evaluate import evaluate_config

    out = evaluate_config(config(tmp_path, metrics=["all"], tune_metric="precision@5"))
    results = pd.read_csv(Path(out.directory) / "results.csv")
    tuning = pd.read_csv(Path(out.directory) / "tuning.csv")
    precision = results[(results["metric"] == "precision") & (results["k"] == 5)]
    checked = 0
    for fold, rows in tuning[tuning["n_validation_windows"] > 0].groupby("fold"):
        values = {}
        for row in rows.itertuples():
            value = precision.loc[(precision["algorithm"] == row.candidate)
                                  & (precision["fold"] == fold - 1), "value"].iloc[0]
            assert row.validation_value == pytest.approx(value, abs=1e-9)
            values[row.candidate] = value
        chosen = rows.loc[rows["chosen"], "candidate"].tolist()
        assert chosen == [max(values, key=lambda name: (values[name], -list(values).index(name)))]
        checked += 1
    assert checked >= 4


def test_optimism_is_exactly_zero_when_the_tuned_mean_ties_the_oracles():
    """Fold 2 takes B, whose value there is A's plus float noise (1e-14, two paths to one number):
    the tuned mean ties the oracle A's to 12 decimals, which must not read as optimism."""
    a = [0.5, 0.2, 0.3, 0.4]
    b = [0.1, 0.25, 0.3 + 1e-14, 0.1]
    results = hand_results({A: a, B: b})
    tuned, choices = tune(results, hand_config())
    assert list(choices[choices["chosen"]]["candidate"]) == [A, B, A]  # fold 3: a tie, A first
    row = optimism(pd.concat([results, tuned]), hand_config()).iloc[0]
    assert row["oracle"] == A and row["tuned_mean"] != row["oracle_mean"]
    assert row["optimism"] == 0.0


C = "item-knn(n_neighbors=200)"


def without(results: pd.DataFrame, algorithm: str, folds: list[int]) -> pd.DataFrame:
    """The results with the rows of ``algorithm`` on ``folds`` left out, as a failed unit's."""
    failed = (results["algorithm"] == algorithm) & results["fold"].isin(folds)
    return results[~failed].reset_index(drop=True)


def test_a_candidate_that_failed_on_a_window_is_passed_over_and_a_failed_choice_says_so():
    """A, B, C on folds 0-4 (M = 1). B is best everywhere but failed on folds 1 and 3; C failed
    on every fold. Folds 1 and 3 read folds 0 and 2 and choose B, which failed there: no value,
    and the reason. Folds 2 and 4 read folds 1 and 3, where B has no value: A is chosen among
    those with one."""
    grid = {"item-knn": {"n_neighbors": [5, 50, 200]}}
    full = hand_results({A: [0.1, 0.2, 0.3, 0.4, 0.5], B: [0.9] * 5, C: [0.95] * 5})
    results = without(without(full, B, [1, 3]), C, [0, 1, 2, 3, 4])
    tuned, choices = tune(results, hand_config(tune=grid))
    chosen = choices[choices["chosen"]].set_index("fold")["candidate"]
    assert dict(chosen) == {1: B, 2: A, 3: B, 4: A}
    by_fold = choices.set_index(["fold", "candidate"])
    assert np.isnan(by_fold.loc[(2, B), "validation_value"])
    assert by_fold.loc[(2, B), "n_validation_windows"] == 0
    assert by_fold.loc[(2, A), "n_validation_windows"] == 1
    assert not by_fold["n_validation_windows"][:, C].any()
    recall = tuned[tuned["metric"] == "recall"].set_index("fold")
    assert list(recall["value"][[2, 4]]) == [0.3, 0.5]
    for fold in (1, 3):
        assert recall.loc[fold, "skipped"] and np.isnan(recall.loc[fold, "value"])
        assert recall.loc[fold, "skip_reason"] == f"the chosen candidate {B} failed on this fold"
    assert "no validation window" in recall.loc[0, "skip_reason"]
    assert len(tuned) == len(full[full["algorithm"] == A])  # every fold has its rows
    # the tuned folds are 2 and 4, where B has values: B is the oracle (C has none)
    row = optimism(pd.concat([results, tuned]), hand_config(tune=grid)).iloc[0]
    assert (row["oracle"], row["n_folds"]) == (B, 2)
    assert row["optimism"] == pytest.approx(0.9 / np.mean([0.3, 0.5]) - 1)


def test_the_oracle_is_a_candidate_with_a_value_on_every_tuned_fold():
    """B failed on fold 2: its mean over the tuned folds 1-2 does not exist (its fold-1 value
    alone, 0.9, must not make it the oracle)."""
    results = without(hand_results({A: [0.5, 0.4, 0.3], B: [0.1, 0.9, 0.9]}), B, [2])
    tuned = hand_results({TUNED.format("item-knn"): [np.nan, 0.4, 0.3]})
    row = optimism(pd.concat([results, tuned]), hand_config()).iloc[0]
    assert (row["oracle"], row["oracle_mean"], row["optimism"]) == (A, 0.35, 0.0)


def test_no_choice_when_every_candidate_failed_on_the_window():
    """Fold 1: both candidates failed (POP did not, so the fold was evaluated)."""
    results = hand_results({"pop": [0.1] * 3, A: [0.1, 0.2, 0.3], B: [0.3, 0.2, 0.1]})
    results = without(results, A, [1])
    results = without(results, B, [1])
    tuned, choices = tune(results, hand_config())
    assert not choices.loc[choices["fold"] == 2, "chosen"].any()
    recall = tuned[tuned["metric"] == "recall"].set_index("fold")
    assert recall.loc[2, "skip_reason"].startswith("every candidate failed on a validation window")
    # fold 1 itself: the choice (B, best on fold 0) failed there
    assert recall.loc[1, "skip_reason"] == f"the chosen candidate {B} failed on this fold"


class Fragile(api.Algorithm):
    """Popularity that raises on alternate weekly folds: those whose cut-off t0 + f·7 days has
    (cutoff // 7 days) mod 2 = ``fail_parity`` (-1: never)."""

    class Config(api.AlgorithmConfig):
        fail_parity: int = -1

    def _fit(self, train: api.TrainData) -> None:
        if (train.cutoff // (7 * 86_400)) % 2 == self.config.fail_parity:
            raise ValueError("fragile")
        self.counts_ = np.asarray(train.matrix.sum(axis=0)).ravel()

    def score(self, rows):
        return np.tile(self.counts_, (len(rows), 1)).astype(np.float64)


@pytest.mark.parametrize("sampler", ["grid", "tpe"])
def test_a_run_with_failing_candidates_tunes_on_the_sound_one(tmp_path, sampler, caplog):
    """Three equal popularity models, two of which fail on alternate folds (one of them on
    fold 0, the window TPE steers by). Every fold's window lacks one fragile candidate's value
    and the sound one comes first in the grid: the tuned series is the sound one on every fold
    after the first, and tuning.csv agrees with results.csv. Each failed unit is logged once
    (TPE's draw on fold 0 computes it first, silently)."""
    name = f"{__name__}:Fragile"
    sound, *fragile = [f"{name}(fail_parity={p})" for p in (-1, 0, 1)]
    with caplog.at_level("ERROR", logger="sweval.evaluators.units.unit"):
        out = evaluate_config(config(tmp_path, algorithms=[name],
                               tune={name: {"fail_parity": [-1, 0, 1]}},
                               tune_sampler=sampler, tune_trials=6, tune_seed=1))
    used = sorted(int(f) for f in out.folds.loc[~out.folds["skipped"], "fold"])
    assert set(out.tuning["candidate"]) == {sound, *fragile}  # TPE drew all three
    failed = sorted((f.fold, f.label) for f in out.failed)
    assert {label for _, label in failed} == set(fragile)
    assert {fold for fold, _ in failed} == set(used) and failed[0][0] == 0
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("unit failed")]
    assert len(logged) == len(failed), logged
    chosen = out.tuning[out.tuning["chosen"]].set_index("fold")["candidate"]
    assert set(chosen) == {sound} and list(chosen.index) == used[1:]
    recall = out.results[(out.results["metric"] == "recall") & (out.results["k"] == 10)
                         & (out.results["stratum"] == "all")]
    by = recall.pivot_table(index="fold", columns="algorithm", values="value", dropna=False)
    assert by.loc[used[1:], f"{name}[tuned]"].tolist() == by.loc[used[1:], sound].tolist()
    assert out.optimism["oracle"].eq(sound).all()


@pytest.mark.slow
def test_per_user_values_of_the_tuned_series_are_its_chosen_candidates(tmp_path):
    """per_user.parquet has ``item-knn[tuned]`` on every fold where it has a value: the chosen
    candidate's users and values, which average to its results.csv rows."""
    out = evaluate_config(config(tmp_path, per_user=True, folds=4))
    table = pd.read_parquet(Path(out.directory) / "per_user.parquet")
    tuned_label = TUNED.format("item-knn")
    mine = table[table["algorithm"] == tuned_label]
    scored = out.results[(out.results["algorithm"] == tuned_label) & ~out.results["skipped"]]
    assert set(mine["fold"]) == set(scored["fold"]) and len(set(mine["fold"])) >= 2
    chosen = out.tuning[out.tuning["chosen"]].set_index("fold")["candidate"]
    key = ["stratum", "user", "metric", "k"]
    for fold, rows in mine.groupby("fold"):
        source = table[(table["fold"] == fold) & (table["algorithm"] == chosen[fold])]
        pd.testing.assert_frame_equal(rows.sort_values(key)[[*key, "value"]].reset_index(drop=True),
                                      source.sort_values(key)[[*key, "value"]].reset_index(drop=True))
        recall = scored[(scored["fold"] == fold) & (scored["metric"] == "recall")
                        & (scored["k"] == 10)]["value"].iloc[0]
        users = rows[(rows["metric"] == "recall") & (rows["k"] == 10)]["value"]
        assert users.mean() == pytest.approx(recall, abs=1e-12)


@pytest.mark.slow
def test_per_user_values_of_a_stratums_tuned_series_are_its_own_choices(tmp_path):
    """With --stratify-by each stratum chooses its candidate: per_user.parquet copies, per
    (stratum, fold), that stratum's chosen candidate's users (it copied every stratum's rows of
    the candidate chosen on all users)."""
    out = evaluate_config(config(tmp_path, data=None, scale=0.05, folds=5, u_min=10, per_user=True,
                           stratify_by="policy", algorithms=["pop", "pop-n"],
                           tune={"pop-n": {"n_recent": [10, 100, 1000]}}))
    table = pd.read_parquet(Path(out.directory) / "per_user.parquet")
    tuned_label = TUNED.format("pop-n")
    chosen = out.tuning[out.tuning["chosen"]].set_index(["stratum", "fold"])["candidate"]
    mine = table[table["algorithm"] == tuned_label]
    key = ["user", "metric", "k"]
    pairs = list(mine.groupby(["stratum", "fold"]))
    assert {stratum for (stratum, _), _ in pairs} == {"all", "pop", "item-knn", "other"}
    differs = 0
    for (stratum, fold), rows in pairs:
        source = table[(table["stratum"] == stratum) & (table["fold"] == fold)
                       & (table["algorithm"] == chosen[(stratum, fold)])]
        pd.testing.assert_frame_equal(
            rows.sort_values(key)[[*key, "value"]].reset_index(drop=True),
            source.sort_values(key)[[*key, "value"]].reset_index(drop=True))
        differs += chosen[(stratum, fold)] != chosen[("all", fold)]
    assert differs  # this log: some stratum chooses otherwise than all users on some fold


def test_a_later_run_without_tuning_removes_the_earlier_runs_tuning_tables(tmp_path,
                                                                            own_unit_store):
    """One --output, a tuned run then a plain one: tuning.csv, optimism.csv and per_user.parquet
    of the first must not pass for the second's (its report, MLflow's artifacts)."""
    from sweval.evaluators.report.page import write_report

    out = Path(tmp_path / "out")
    evaluate_config(config(tmp_path, folds=3, per_user=True))
    assert (out / "tuning.csv").exists() and (out / "per_user.parquet").exists()
    evaluate_config(config(tmp_path, folds=3, tune={}))
    for name in ("tuning.csv", "optimism.csv", "per_user.parquet"):
        assert not (out / name).exists(), name
    assert any(own_unit_store.glob("*/*/unit.json"))  # units stay
    write_report(out)
    assert "oracle" not in (out / "report.html").read_text()


def test_the_candidates_keep_the_listed_variants_own_parameters(tmp_path):
    """`user-knn(weighting="cosine")` tuned over n_neighbors tunes cosine neighbours: the
    candidates were built from the defaults (count weighting) and the variant's own parameters
    were lost; listing the algorithm with two different fixed values is ambiguous."""
    from sweval.evaluators.run.specs import algorithm_specs
    from sweval.evaluators.stats.tuning_candidates import searches

    grid = {"user-knn": {"n_neighbors": [10, 50]}}
    listed = ["pop", 'user-knn(weighting="cosine")']
    for sampler in ("grid", "random"):
        cfg = config(tmp_path, algorithms=listed, tune=grid, tune_sampler=sampler, tune_trials=8)
        (search,) = searches(cfg)
        assert search.fixed == {"weighting": "cosine"}
        assert [p["weighting"] for p in search.params] == ["cosine", "cosine"]
        specs = {spec.label: spec for spec in algorithm_specs(cfg, [search])}
        for label in search.candidates:
            assert specs[label].params["weighting"] == "cosine", label
    # the variant's tuned parameter itself is the grid's to set; equal fixed parts are one
    same = ['user-knn(weighting="cosine", n_neighbors=5)', 'user-knn(weighting="cosine")']
    assert searches(config(tmp_path, algorithms=same, tune=grid))[0].fixed == {
        "weighting": "cosine"}
    with pytest.raises(SwevalError, match=r"--tune user-knn: --algorithms lists user-knn with "
                                          r"different fixed parameters"):
        searches(config(tmp_path, algorithms=["user-knn", 'user-knn(weighting="cosine")'],
                        tune=grid))


def test_tuning_options_without_tune_are_said_to_have_no_effect(tmp_path, caplog):
    """--tune-windows 2 without --tune ran untuned without a word."""
    from sweval.evaluators.run.plan import make_plan

    caplog.set_level("WARNING", logger="sweval.evaluators.run.plan")
    make_plan(config(tmp_path, tune={}, folds=2, tune_windows=2, tune_sampler="random"))
    assert ("--tune-windows, --tune-sampler have no effect without --tune."
            in caplog.messages)
    caplog.clear()
    make_plan(config(tmp_path, tune={}, folds=2))
    make_plan(config(tmp_path, folds=2, tune_windows=2))  # with --tune: they apply
    assert caplog.messages == []


def test_the_report_header_describes_a_tuned_algorithm_not_as_defaults(tmp_path):
    """Issue 46: the report's facts listed `item-knn[tuned]` as "defaults" (it has no
    parameters of its own: each fold takes a candidate's)."""
    from sweval.evaluators.report.data import load
    from sweval.evaluators.report.facts import run_facts

    evaluate_config(config(tmp_path, folds=3))
    facts = dict(run_facts(load(tmp_path / "out"), None))
    assert facts["item-knn[tuned]"] == ("tuned: per fold, the best of 2 candidates on the "
                                        "windows before it (tuning.csv)")
    assert "n_neighbors=5" in facts[A]
