"""Stratification by logging policy (SPEC §6) on hand-built logs."""

from __future__ import annotations

import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.stratify import build_strata, groups_by_test_policy
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.run.evaluate import evaluate_config

# Day 0 is history, day 1 is the test window.
#   user 1: history A, tests A          -> stratum A (both modes)
#   user 2: history A, tests B          -> mode test: B; mode subset: no B history -> not eligible in B,
#                                          no A test -> not eligible in A
#   user 3: history B, tests A and B    -> mode test: A and B; mode subset: B only (no A history)
#   user 4: history A+B, tests B        -> both modes: B
#   user 5: no history, tests A         -> never eligible
ROWS = [
    (1, 10, 0, "A"), (2, 11, 1, "A"), (3, 12, 2, "B"), (4, 10, 3, "A"), (4, 13, 4, "B"),
    (1, 11, DAY + 1, "A"), (2, 12, DAY + 2, "B"), (3, 10, DAY + 3, "A"), (3, 11, DAY + 4, "B"),
    (4, 12, DAY + 5, "B"), (5, 10, DAY + 6, "A"),
]


def make() -> InteractionLog:
    return InteractionLog.from_frame(
        pd.DataFrame(ROWS, columns=["user", "item", "timestamp", "policy"]), policy_col="policy"
    )


def eligible(log, fold):
    return sorted(log.user_ids[fold.eligible_users].tolist())


def test_subset_mode_restricts_training_and_test_to_the_policy():
    log = make()
    spec = WindowSpec(width_s=DAY, n_folds=1)
    strata = build_strata(log, spec, u_min=0, mode="subset", column="policy")
    assert strata.labels == ["A", "B"]
    assert eligible(strata.logs["A"], strata.folds["A"][0]) == [1]
    assert eligible(strata.logs["B"], strata.folds["B"][0]) == [3, 4]
    assert eligible(log, build_folds(log, spec, u_min=0)[0]) == [1, 2, 3, 4]


def test_test_mode_groups_users_by_their_test_policies():
    log = make()
    (fold,) = build_folds(log, WindowSpec(width_s=DAY, n_folds=1), u_min=0)
    groups = groups_by_test_policy(log, fold, fold.eligible_users, ["A", "B"])
    users = log.user_ids[fold.eligible_users]
    assert users[groups["A"]].tolist() == [1, 3]
    assert users[groups["B"]].tolist() == [2, 3, 4]  # user 3 counts in both


@pytest.mark.parametrize("mode", ["subset", "test"])
def test_u_min_applies_per_stratum_and_all_equals_unstratified(tmp_path, mode):
    path = tmp_path / "log.csv"
    pd.DataFrame(ROWS, columns=["user", "item", "timestamp", "policy"]).to_csv(path, index=False)
    base = dict(data=str(path), window="1D", folds=1, u_min=2, algorithms=["pop", "pop-n"],
                progress=False)
    plain = evaluate_config(EvalConfig.build(**base, output=str(tmp_path / "plain"))).results
    stratified = evaluate_config(
        EvalConfig.build(**base, stratify_by="policy", stratify_mode=mode, output=str(tmp_path / mode))
    ).results
    every = stratified[stratified["stratum"] == "all"].drop(columns="config_hash").reset_index(drop=True)
    pd.testing.assert_frame_equal(every, plain.drop(columns="config_hash"))
    by = stratified.groupby("stratum")
    # A: 1 user in subset mode (users 1), 2 in test mode (1, 3) -> skipped only in subset mode
    a = by.get_group("A")
    assert a["skipped"].all() == (mode == "subset")
    assert set(a["n_eligible"]) == ({1} if mode == "subset" else {2})
    b = by.get_group("B")
    assert not b["skipped"].any()
    assert set(b["n_eligible"]) == ({2} if mode == "subset" else {3})
    if mode == "subset":
        assert a["skip_reason"].str.contains("u_min=2").all()


@pytest.mark.parametrize("mode", ["subset", "test"])
def test_a_stratified_run_reuses_the_plain_runs_units_and_the_reverse(tmp_path, mode):
    """The whole log's units read no policy: with one store, a stratified run after a plain one
    computes only its strata's units (none in test mode, which regroups the whole log's lists),
    and a plain run after a stratified one computes nothing."""
    path = tmp_path / "log.csv"
    pd.DataFrame(ROWS, columns=["user", "item", "timestamp", "policy"]).to_csv(path, index=False)
    base = dict(data=str(path), window="1D", folds=1, u_min=1, algorithms=["pop", "pop-n"],
                progress=False, cache=str(tmp_path / "store"))
    plain = evaluate_config(EvalConfig.build(**base, output=str(tmp_path / "plain")))
    assert (plain.n_reused, plain.n_computed) == (0, 2)
    stratified = evaluate_config(EvalConfig.build(
        **base, stratify_by="policy", stratify_mode=mode, output=str(tmp_path / mode)))
    strata_units = 4 if mode == "subset" else 0  # A and B, each pop and pop-n
    assert (stratified.n_reused, stratified.n_computed) == (2, strata_units)
    again = evaluate_config(EvalConfig.build(**base, output=str(tmp_path / "again")))
    assert (again.n_reused, again.n_computed) == (2, 0)
    every = stratified.results[stratified.results["stratum"] == "all"].reset_index(drop=True)
    pd.testing.assert_frame_equal(every.drop(columns="config_hash"),
                                  plain.results.drop(columns="config_hash"))


def test_missing_policy_column_is_a_clear_error(tmp_path):
    path = tmp_path / "log.csv"
    pd.DataFrame([(1, 1, 0)], columns=["user", "item", "timestamp"]).to_csv(path, index=False)
    with pytest.raises(SwevalError, match="policy"):
        evaluate_config(EvalConfig.build(data=str(path), stratify_by="policy", algorithms=["pop"],
                                   output=str(tmp_path / "o"), progress=False))


def test_policy_column_with_missing_values_is_rejected_by_default(tmp_path):
    path = tmp_path / "log.csv"
    pd.DataFrame([(1, 1, 0, "A"), (2, 1, 1, None)], columns=["user", "item", "timestamp", "policy"]).to_csv(path, index=False)
    with pytest.raises(SwevalError, match="'policy'"):
        evaluate_config(EvalConfig.build(data=str(path), stratify_by="policy", algorithms=["pop"],
                                   output=str(tmp_path / "o"), progress=False))


def test_the_strata_shown_are_the_largest_by_eligible_users_over_the_folds() -> None:
    """With more strata than are shown, the report, the terminal and the pairwise tests keep
    the n with the most eligible users summed over the folds (each fold once, whatever its rows
    per metric), in the table's order; with n or fewer, all (None)."""
    from sweval.evaluators.run.results import largest_strata

    sizes = {"s0": (5, 5), "s1": (1, 1), "s2": (9, 0), "s3": (2, 2), "s4": (3, 3)}
    rows = [{"fold": fold, "stratum": stratum, "metric": metric, "n_eligible": counts[fold]}
            for stratum, counts in [("all", (99, 99)), *sizes.items()]
            for fold in (0, 1) for metric in ("recall", "ndcg")]
    results = pd.DataFrame(rows)
    # sums over the folds: s0 10, s1 2, s2 9, s3 4, s4 6
    assert largest_strata(results, n=3) == ["s0", "s2", "s4"]
    assert largest_strata(results, n=1) == ["s0"]
    assert largest_strata(results, n=5) is None


@pytest.mark.parametrize(("metrics", "label"), [("recall,ndcg", "Recall@10"), ("ndcg", "NDCG@10")])
def test_the_policy_effect_line_names_the_metric_of_the_tables(
        tmp_path, capsys, metrics: str, label: str) -> None:
    """The terminal's policy-effect line counted Recall's strata pairs whatever the run's
    metrics: a run without Recall printed none. It reads the metric the tables show."""
    from sweval_testing import log_frame, sweval_cli

    frame = log_frame(12)
    frame["policy"] = ["A" if int(user[1:]) % 2 else "B" for user in frame["user"]]
    frame.to_csv(tmp_path / "log.csv", index=False)
    assert sweval_cli("run", "--no-prefect", "--no-tracking", "--no-progress", "--data",
                      tmp_path / "log.csv", "--window", "1D", "--folds", "8", "--u-min", "1",
                      "--k", "10", "--metrics", metrics, "--algorithms", "pop,pop-n",
                      "--stratify-by", "policy", "--output", tmp_path / "out") == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"policy effect at {label}: " in printed
    strata = pd.read_csv(tmp_path / "out" / "significance_strata.csv")
    at = strata[(strata["metric"] == label.split("@")[0].lower()) & (strata["k"] == 10)
                & (strata["test"] == "wilcoxon")]
    assert f"of {int(at['p_holm'].notna().sum())} tested" in printed
