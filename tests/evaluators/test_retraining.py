"""Staleness (``--horizon``) and retraining cadence (``--cadence``): a fold's model on later
windows, read from served units with one fit per fold (evaluators/experiments/retraining.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sweval
from sweval.algorithms.popularity import Pop
from sweval.data.errors import SwevalError
from sweval.evaluators.protocols.retraining import (
    retrain_folds,
    served_pairs,
    serving_fold,
    staleness_pairs,
)

DAY = 86_400
T0 = 1_704_067_200  # 2024-01-01T00:00:00Z

#: (user, item, day, hour): the hand-built log of :func:`test_staleness_and_cadences_by_hand`.
ROWS = [
    ("u1", "a", 0, 1), ("u2", "a", 0, 2), ("u3", "a", 0, 3), ("u4", "b", 0, 4),
    ("u5", "b", 1, 1), ("u6", "c", 1, 2),
    # window 0 (day 2)
    ("u4", "a", 2, 1), ("u5", "c", 2, 2), ("u2", "c", 2, 3), ("u3", "c", 2, 4), ("u6", "a", 2, 5),
    # window 1 (day 3)
    ("u1", "c", 3, 1), ("u4", "c", 3, 2), ("u2", "b", 3, 3), ("u7", "a", 3, 4), ("u5", "a", 3, 5),
    # window 2 (day 4)
    ("u1", "b", 4, 1), ("u3", "b", 4, 2), ("u7", "c", 4, 3), ("u6", "d", 4, 4),
]
OPTIONS = dict(window="1D", folds=3, start=str(T0 + 2 * DAY), u_min=1, k=[1],
               metrics=["recall"], algorithms=["pop"])


def hand_log() -> pd.DataFrame:
    return pd.DataFrame([(u, i, T0 + d * DAY + h * 3600) for u, i, d, h in ROWS],
                        columns=["user", "item", "timestamp"])


def recall_at_1(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["metric"] == "recall") & (table["k"] == 1)]


@pytest.fixture
def store(tmp_path: Path) -> str:
    return str(tmp_path / "units")


def test_staleness_and_cadences_by_hand(store: str) -> None:
    """POP's staleness curve and each cadence's series on a hand-built log, Recall@1.

    Items a < b < c < d (ties by id). Daily windows 0, 1, 2 are days 2, 3, 4.

    Fit 0 (t_0 = day 2): u1{a} u2{a} u3{a} u4{b} u5{b} u6{c}: counts a3 b2 c1, order a, b, c.
    Window 0, U_0 = u2..u6, Rel: u2 c, u3 c, u4 a, u5 c, u6 a.
      fit 0, history t_0: u2→b 0, u3→b 0, u4→a 1, u5→a 0, u6→a 1: 2/5 = 0.4
    History at t_1 (after window 0): u1{a} u2{a,c} u3{a,c} u4{a,b} u5{b,c} u6{a,c}.
      Fit 1 counts a5 c4 b2, order a, c, b.
    Window 1, U_1 = u1, u2, u4, u5 (u7 has no history yet), Rel: u1 c, u4 c, u2 b, u5 a.
      fit 0 served the history at t_1 (a live system's): u1{a}→b 0, u2{a,c}→b 1,
        u4{a,b}→c 1, u5{b,c}→a 1: 3/4 = 0.75
        (with only the history up to the fit it would be u4{b}→a 0, u5{b}→a 1: 2/4 = 0.5)
      fit 1 (fresh): u1→c 1, u2→b 1, u4→c 1, u5→a 1: 1.0
    History at t_2: u1{a,c} u2{a,b,c} u3{a,c} u4{a,b,c} u5{a,b,c} u6{a,c} u7{a}.
      Fit 2 counts a7 c6 b3 (d first appears in window 2: nobody's candidate).
    Window 2, U_2 = u1, u3, u6, u7 (u7, new since fits 0 and 1, is scored), Rel: u1 b, u3 b,
      u6 d, u7 c.
      fit 0 (a, b, c): u1→b 1, u3→b 1, u6→b 0, u7→b 0: 0.5
      fit 1 (a, c, b): u1→b 1, u3→b 1, u6→b 0, u7→c 1: 0.75
      fit 2 (a, c, b): the same lists: 0.75

    Staleness (horizon 2): fit 0 → 0.4, 0.75, 0.5; fit 1 → 1.0, 0.75; fit 2 → 0.75.
      age 1: mean 0.75 over fits 0, 1; fresh on windows 1, 2: 1.0, 0.75; loss 1.5/1.75 − 1.
      age 2: 0.5 against fresh 0.75: loss −1/3. Loses 10 % at age 1, never 50 %.
    Cadence 1 = the plain run: 0.4, 1.0, 0.75 (fits 3). Cadence 2 (retrain 0, 2): 0.4, 0.75
      (fit 0, age 1), 0.75 (fits 2). Cadence 3 (retrain 0): 0.4, 0.75, 0.5 (fits 1).
    """
    run = sweval.evaluate(hand_log(), cache=store, horizon=2, cadence=[1, 2, 3], **OPTIONS)
    staleness = recall_at_1(run.retraining.staleness)
    curve = {(row.fit_fold, row.fold): row.value for row in staleness.itertuples()}
    assert curve == pytest.approx({(0, 0): 0.4, (0, 1): 0.75, (0, 2): 0.5, (1, 1): 1.0,
                                   (1, 2): 0.75, (2, 2): 0.75})
    assert list(staleness["age"]) == [0, 1, 2, 0, 1, 0]
    assert list(staleness["age_s"]) == [0, DAY, 2 * DAY, 0, DAY, 0]
    assert list(staleness["fresh"]) == pytest.approx([0.4, 1.0, 0.75, 1.0, 0.75, 0.75])
    assert list(staleness["n_users"]) == [5, 4, 4, 4, 4, 4]

    summary = recall_at_1(run.retraining.staleness_summary).set_index("age")
    assert summary["mean"].tolist() == pytest.approx([(0.4 + 1.0 + 0.75) / 3, 0.75, 0.5])
    assert summary["n_fits"].tolist() == [3, 2, 1]
    assert summary.loc[1, "loss"] == pytest.approx(1.5 / 1.75 - 1)
    assert summary.loc[2, "loss"] == pytest.approx(-1 / 3)
    assert summary["windows_to_lose_10pct"].tolist() == [1, 1, 1]
    assert summary["windows_to_lose_50pct"].isna().all()

    cadence = recall_at_1(run.retraining.cadence)
    series = {c: part["value"].tolist() for c, part in cadence.groupby("cadence")}
    assert series == {1: pytest.approx([0.4, 1.0, 0.75]), 2: pytest.approx([0.4, 0.75, 0.75]),
                      3: pytest.approx([0.4, 0.75, 0.5])}
    assert cadence[cadence["cadence"] == 2]["fit_fold"].tolist() == [0, 0, 2]
    costs = recall_at_1(run.retraining.cadence_summary).set_index("cadence")
    assert costs["fits"].tolist() == [3, 2, 1]
    assert costs["mean"].tolist() == pytest.approx([2.15 / 3, 1.9 / 3, 1.65 / 3])


def test_cadence_1_is_the_plain_run_value_for_value(store: str) -> None:
    """Every metric and k of cadence 1 is the plain run's results.csv value, fold by fold."""
    options = OPTIONS | dict(k=[1, 2], metrics=["recall", "ndcg", "hit_rate"])
    plain = sweval.evaluate(hand_log(), cache=store, **options)
    run = sweval.evaluate(hand_log(), cache=store, cadence=[1, 2], **options)
    pd.testing.assert_frame_equal(run.results, plain.results)  # results.csv unchanged
    one = run.retraining.cadence[run.retraining.cadence["cadence"] == 1]
    merged = one.merge(plain.results, on=["fold", "algorithm", "metric", "k"])
    assert len(merged) == len(one) == len(plain.results)
    assert (merged["value_x"] == merged["value_y"]).all()


def test_one_fit_per_fold_serves_every_window(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Horizon 2 over 3 folds: 6 units (3 plain, 3 served) from 3 fits; a rerun fits nothing;
    a run whose plain units are stored fits once per fold that serves a later window."""
    fits: list[int] = []
    original = Pop._fit

    def counted(self: Pop, train: object) -> None:
        fits.append(train.cutoff)  # type: ignore[attr-defined]
        original(self, train)  # type: ignore[arg-type]

    monkeypatch.setattr(Pop, "_fit", counted)
    run = sweval.evaluate(hand_log(), cache=store, horizon=2, **OPTIONS)
    assert sorted(fits) == [T0 + 2 * DAY, T0 + 3 * DAY, T0 + 4 * DAY]
    assert run.n_computed == 6
    fits.clear()
    again = sweval.evaluate(hand_log(), cache=store, horizon=2, cadence=[2, 3], **OPTIONS)
    assert fits == [] and again.n_reused == 6
    fits.clear()
    other = str(Path(store).with_name("other"))
    sweval.evaluate(hand_log(), cache=other, **OPTIONS)
    fits.clear()
    sweval.evaluate(hand_log(), cache=other, horizon=2, **OPTIONS)
    assert sorted(fits) == [T0 + 2 * DAY, T0 + 3 * DAY]


def test_a_model_that_cannot_serve_is_refused_before_any_fit(store: str) -> None:
    with pytest.raises(SwevalError, match="bpr cannot serve a later window"):
        sweval.evaluate(hand_log(), cache=store, horizon=1, **(OPTIONS | {"algorithms": ["bpr"]}))


def test_schedules() -> None:
    """Fold 2 skipped: staleness pairs skip it; cadence 2 retrains at 0 and 4 (2 is skipped,
    so fold 0's model serves 1 and 3), cadence 3 at 0 and 3."""
    evaluated = [0, 1, 3, 4, 5]
    assert staleness_pairs(evaluated, 2) == [(0, 1), (1, 3), (3, 4), (3, 5), (4, 5)]
    assert retrain_folds(evaluated, 2) == [0, 4]
    assert serving_fold(evaluated, 2) == {0: 0, 1: 0, 3: 0, 4: 4, 5: 4}
    assert serving_fold(evaluated, 3) == {0: 0, 1: 0, 3: 3, 4: 3, 5: 3}
    assert served_pairs(evaluated, 0, [1]) == []
    # horizon 1: (0, 1), (3, 4), (4, 5); cadence 3: (0, 1), (3, 4), (3, 5)
    assert served_pairs(evaluated, 1, [3]) == [(0, 1), (3, 4), (3, 5), (4, 5)]
    assert np.array_equal(retrain_folds([], 2), [])


def test_serving_history_is_the_later_data_in_the_fits_columns() -> None:
    """Against a dense reference on a random log: rows = the later fold's users, columns = the
    fit's items (a later item dropped, an item absent later kept empty), sequences filtered."""
    from sweval.algorithms.serving import serving_history
    from sweval.testing import folds_of, random_log

    log = random_log(3)
    first, _, last = folds_of(log)
    fit, later = first.train_data(log), last.train_data(log)
    history = serving_history(fit.item_codes, later)
    assert np.array_equal(history.user_codes, later.user_codes)
    assert np.array_equal(history.item_codes, fit.item_codes)
    dense = np.zeros((len(later.user_codes), log.n_items))
    dense[:, later.item_codes] = later.matrix.toarray()
    assert np.array_equal(history.matrix.toarray(), dense[:, fit.item_codes])
    assert set(later.item_codes) - set(fit.item_codes)  # the log has items new since the fit
    keep = np.isin(later.item_codes[later.item_sequence], fit.item_codes)
    assert np.array_equal(fit.item_codes[history.item_sequence],
                          later.item_codes[later.item_sequence][keep])
    assert np.array_equal(history.timestamps, later.timestamps[keep])
    assert history.timestamps.max() < history.cutoff == later.cutoff


def test_update_policy_of_an_exact_model_is_retraining_every_window(
        store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """--update on the hand-built log: POP fitted at the retrains and updated in between.

    Cadence 2 retrains at windows 0 and 2; window 1 is served by fit 0 updated by the
    interactions of window 0 (day 2), which gives POP the counts of fit 1 (a5 c4 b2): 1.0, the
    fresh value, where the served (not updated) fit 0 scores 0.75. Cadence 3 (retrain at 0)
    updates fit 0 to t_1 and to t_2: 0.4, 1.0, 0.75, cadence 1's series. So POP's update series
    equal cadence 1's value for value with 2 and 1 fits instead of 3; the fits are counted:
    one per fold, none for an update.
    """
    fits: list[int] = []
    original = Pop._fit

    def counted(self: Pop, train: object) -> None:
        fits.append(train.cutoff)  # type: ignore[attr-defined]
        original(self, train)  # type: ignore[arg-type]

    monkeypatch.setattr(Pop, "_fit", counted)
    run = sweval.evaluate(hand_log(), cache=store, cadence=[1, 2, 3], update=True, **OPTIONS)
    assert sorted(fits) == [T0 + 2 * DAY, T0 + 3 * DAY, T0 + 4 * DAY]
    cadence = recall_at_1(run.retraining.cadence)
    series = {(p, c): part["value"].tolist()
              for (p, c), part in cadence.groupby(["policy", "cadence"])}
    assert series == {("retrain", 1): pytest.approx([0.4, 1.0, 0.75]),
                      ("retrain", 2): pytest.approx([0.4, 0.75, 0.75]),
                      ("retrain", 3): pytest.approx([0.4, 0.75, 0.5]),
                      ("update", 2): pytest.approx([0.4, 1.0, 0.75]),
                      ("update", 3): pytest.approx([0.4, 1.0, 0.75])}
    updated = cadence[(cadence["policy"] == "update") & ~cadence["retrained"]]
    assert (updated["update_s"] > 0).all() and (updated["fit_s"] == 0).all()
    summary = recall_at_1(run.retraining.cadence_summary).set_index(["policy", "cadence"])
    assert summary.loc[("update", 2), "fits"] == 2 and summary.loc[("update", 3), "fits"] == 1
    assert summary.loc[("update", 3), "mean_diff"] == pytest.approx(0.0)
    pd.testing.assert_frame_equal(run.results, sweval.evaluate(hand_log(), cache=store,
                                                               **OPTIONS).results)


def test_update_needs_cadence_and_an_algorithm_that_updates(store: str) -> None:
    with pytest.raises(SwevalError, match="svd has no incremental update"):
        sweval.evaluate(hand_log(), cache=store, cadence=[2], update=True,
                        **(OPTIONS | {"algorithms": ["svd"]}))
    with pytest.raises(SwevalError, match="--update needs --cadence"):
        sweval.evaluate(hand_log(), cache=store, update=True, **OPTIONS)


@pytest.mark.parametrize("option", [{"cold_users": True},
                                    {"repeats": True, "dedup": "none"}])
def test_staleness_is_refused_with_modes_a_served_model_does_not_rank_in(
    store: str, option: dict
) -> None:
    """A served model ranks the plain way (users with history, seen items excluded): with
    --cold-users or --repeats its windows would be scored under other rules than the fit's."""
    with pytest.raises(SwevalError, match="cannot be combined with --repeats or --cold-users"):
        sweval.evaluate(hand_log(), cache=store, horizon=1, **(OPTIONS | option))


def test_the_report_section_reads_the_tables(store: str, tmp_path: Path) -> None:
    """The report's section: staleness by age, each cadence and policy with its relative
    cost, both figures."""
    from sweval.evaluators.report.retraining import retraining_section

    out = tmp_path / "run"
    sweval.evaluate(hand_log(), cache=store, output=str(out), horizon=2, cadence=[1, 2],
                    update=True, **OPTIONS)
    section = retraining_section(out, "recall", 1)
    assert section is not None and section.label == "Recall@1"
    assert section.staleness.rows == [["pop", "0.7167", "0.7500 (-14.3 %)", "0.5000 (-33.3 %)",
                                       "1", "> 2"]]
    cadences = [row[1] for row in section.cadence.rows]
    assert cadences == ["1", "2", "2, updated"]
    assert [row[2] for row in section.cadence.rows] == ["0.7167", "0.6333", "0.7167"]
    assert {f.file_name for f in section.figures} == {"report-staleness-recall-at-1.png",
                                                      "report-cadence-recall-at-1.png"}
    assert retraining_section(tmp_path, "recall", 1) is None


def test_strata_do_not_enter_the_staleness_tables(store: str) -> None:
    """With --stratify-by, the served units are the all-users models' only: the tables equal the
    unstratified run's."""
    log = hand_log()
    log["policy"] = ["A", "B"] * (len(log) // 2)
    plain = sweval.evaluate(log.drop(columns="policy"), cache=store, horizon=2, **OPTIONS)
    strata = sweval.evaluate(log, cache=store, horizon=2, stratify_by="policy", **OPTIONS)
    pd.testing.assert_frame_equal(strata.retraining.staleness.drop(columns="config_hash"),
                                  plain.retraining.staleness.drop(columns="config_hash"))


def test_history_sweep_pairs_training_window_lengths(store: str) -> None:
    """sweval.history_sweep on the hand-built log: per training window, the run's summary row,
    the mean training transactions and the loss against all history.

    1D: fold 0 trains on day 1 (2 rows), fold 1 on day 2 (5), fold 2 on day 3 (5): n_train 4.
    All history: 6, 11, 16 rows: n_train 11; POP's Recall@1 is 2.15 / 3 (the hand-built
    staleness test's cadence 1).
    """
    table = sweval.history_sweep(hand_log(), ["1D", None], cache=store, **OPTIONS)
    table = recall_at_1(table).set_index("train_window")
    assert list(table.index) == ["1D", "all"]
    assert table["n_train"].tolist() == [4.0, 11.0]
    assert table.loc["all", "mean"] == pytest.approx(2.15 / 3)
    assert table.loc["all", "loss"] == 0.0
    short = sweval.evaluate(hand_log(), cache=store, train_window="1D", **OPTIONS)
    expected = recall_at_1(short.summary)["mean"].item()
    assert table.loc["1D", "mean"] == pytest.approx(expected)
    assert table.loc["1D", "loss"] == pytest.approx(expected / (2.15 / 3) - 1)
    assert (table["fit_s"] >= 0).all() and table["n_folds"].tolist() == [3, 3]
