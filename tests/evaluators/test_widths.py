"""Window widths compared (``sweval run --window 1D,3D,7D``, :func:`sweval.widths`) and the
training-window sweep from the command line (``sweval run --train-window 30D,90D,all``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau
from sweval_testing import DAY, T0, sweval_cli
from test_retraining import ROWS  # its hand-built log: (user, item, day, hour)

import sweval
from sweval.data.errors import SwevalError
from sweval.evaluators.experiments.widths import kendall_table, widths_table


def hand_log() -> pd.DataFrame:
    return pd.DataFrame([(u, i, T0 + d * DAY + h * 3600) for u, i, d, h in ROWS],
                        columns=["user", "item", "timestamp"])

#: Both algorithms on the hand-built log of test_retraining, every width from its day 2.
OPTIONS = dict(folds=1, start=str(T0 + 2 * DAY), u_min=1, k=[1], metrics=["recall"],
               algorithms=["pop", "pop-n(n_recent=2)"])


class _Run:
    """A run's summary table (what the widths' tables read of a run)."""

    def __init__(self, means: dict[str, float]) -> None:
        self.summary = pd.DataFrame({
            "stratum": "all", "algorithm": list(means), "metric": "recall", "k": 10,
            "mean": list(means.values()), "ci_low": np.nan, "ci_high": np.nan, "n_folds": 3})


def test_ranks_and_kendall_by_hand() -> None:
    """Three algorithms at three widths, τ_b by hand and against scipy.

    1D: a .3, b .2, c .1      ranks 1, 2, 3
    3D: a .25, b .3, c .2     ranks 2, 1, 3: pairs ab discordant, ac and bc concordant with
                              1D: τ = (2 − 1) / 3 = 1/3
    7D: a .1, b .1, c .3      ranks 2.5, 2.5, 1: with 1D, ab tied in 7D, ac and bc discordant:
                              τ_b = (0 − 2) / √(3 · (3 − 1)) = −2/√6
                              with 3D: ab tied, ac and bc discordant: also −2/√6
    """
    runs = {"1D": _Run({"a": .3, "b": .2, "c": .1}), "3D": _Run({"a": .25, "b": .3, "c": .2}),
            "7D": _Run({"a": .1, "b": .1, "c": .3})}
    table = widths_table(runs)
    assert table["rank"].tolist() == [1, 2, 3, 2, 1, 3, 2.5, 2.5, 1]
    assert table["width_s"].tolist() == [DAY] * 3 + [3 * DAY] * 3 + [7 * DAY] * 3
    kendall = kendall_table(table).set_index(["window_a", "window_b"])
    assert kendall.loc[("1D", "3D"), "tau"] == pytest.approx(1 / 3)
    assert kendall.loc[("1D", "7D"), "tau"] == pytest.approx(-2 / np.sqrt(6))
    assert kendall.loc[("3D", "7D"), "tau"] == pytest.approx(-2 / np.sqrt(6))
    for (a, b), row in kendall.iterrows():
        expected = kendalltau(table[table["window"] == a]["mean"],
                              table[table["window"] == b]["mean"])
        assert row["tau"] == pytest.approx(expected.statistic)
        assert row["p_value"] == pytest.approx(expected.pvalue)
        assert row["n_algorithms"] == 3


def test_widths_on_a_hand_built_log(tmp_path: Path) -> None:
    """POP and POP-2 at 1D, 2D and 3D from day 2 (one window each), Recall@1.

    Training (before day 2) in time order: u1 a, u2 a, u3 a, u4 b, u5 b, u6 c. POP counts a3
    b2 c1, list a, b, c; POP-2 counts the last two (b, c): list b, c, a (ties by id).
    1D (day 2): users u2..u6, Rel u2 c, u3 c, u4 a, u5 c, u6 a.
      POP u2→b u3→b u4→a u5→a u6→a: 2/5 = .4; POP-2 u2→b u3→b u4→c u5→c u6→b: 1/5 = .2
    2D (days 2-3): users u1..u6 (u7 has no history), Rel u1{c} u2{c,b} u3{c} u4{a,c} u5{c,a}
      u6{a}. POP u1→b 0, u2→b ½, u3→b 0, u4→a ½, u5→a ½, u6→a 1: 2.5/6;
      POP-2 u1→b 0, u2→b ½, u3→b 0, u4→c ½, u5→c ½, u6→b 0: 1.5/6
    3D (days 2-4): Rel u1{c,b} u2{c,b} u3{c,b} u4{a,c} u5{c,a} u6{a,d}.
      POP: every user ½: .5; POP-2 u1..u5 ½, u6→b 0: 2.5/6
    POP ranks first at every width: τ = 1 between every pair.
    """
    found = sweval.widths(hand_log(), ["1D", "2D", "3D"], output=tmp_path / "out", **OPTIONS)
    table = found.table.set_index(["window", "algorithm"])
    assert table["mean"].to_dict() == pytest.approx({
        ("1D", "pop"): .4, ("1D", "pop-n(n_recent=2)"): .2,
        ("2D", "pop"): 2.5 / 6, ("2D", "pop-n(n_recent=2)"): 1.5 / 6,
        ("3D", "pop"): .5, ("3D", "pop-n(n_recent=2)"): 2.5 / 6})
    assert table["rank"].tolist() == [1, 2] * 3
    assert found.kendall["tau"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    written = pd.read_csv(tmp_path / "out" / "widths.csv")
    assert written["mean"].tolist() == pytest.approx(found.table["mean"].tolist())
    for width in ("1D", "2D", "3D"):  # each width's own run, as `sweval run --window W`
        alone = sweval.load(tmp_path / "out" / f"window-{width}")
        assert json.loads((alone.directory / "config.json").read_text())["config"][
            "window"] == width
    assert {"report.html", "report-widths.png", "widths_kendall.csv"} <= {
        p.name for p in (tmp_path / "out").iterdir()}


def test_coinciding_windows_cost_nothing_extra() -> None:
    """1D and 24h lay out the same windows: the second width computes no unit; a rerun computes
    nothing; 2D computes its own (its windows end elsewhere)."""
    options = OPTIONS | dict(folds=3)
    first = sweval.widths(hand_log(), ["1D", "24h"], **options)
    assert [(run.n_computed, run.n_reused) for run in first.runs.values()] == [(6, 0), (0, 6)]
    assert first.runs["1D"].results["value"].tolist() == first.runs["24h"].results[
        "value"].tolist()
    again = sweval.widths(hand_log(), ["24h", "1D", "2D"], **(options | {"folds": 1}))
    assert [(run.n_computed, run.n_reused) for run in again.runs.values()] == [
        (0, 2), (0, 2), (2, 0)]
    assert (again.n_computed, again.n_reused) == (2, 4)


@pytest.mark.parametrize(("settings", "words"), [
    ({"window": "1D,1D"}, "1D is listed twice"),
    ({"window": "1D,3D", "horizon": 2}, "--horizon"),
    ({"window": "1D,3D", "cadence": [1, 2]}, "--cadence"),
    ({"window": "1D,3D", "train_window": "1D,all"}, "--train-window with several lengths"),
    ({"window": "1D,x"}, "--window"),
])
def test_what_a_list_of_widths_refuses(settings: dict, words: str) -> None:
    with pytest.raises(SwevalError, match=words.replace("-", r"\-")):
        sweval.widths(hand_log(), settings.pop("window"), **(OPTIONS | settings))


def test_a_list_is_refused_where_one_value_is_taken() -> None:
    with pytest.raises(SwevalError, match="sweval.widths"):
        sweval.evaluate(hand_log(), **(OPTIONS | {"window": "1D,3D"}))
    with pytest.raises(SwevalError, match="--train-window 1D,all"):
        sweval.evaluate(hand_log(), **(OPTIONS | {"train_window": "1D,all"}))


def test_cli_widths_equal_the_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``sweval run --window 1D,2D`` writes what :func:`sweval.widths` returns; with
    ``--rolling`` it is refused."""
    args = ["run", "--no-prefect", "--no-tracking", "--no-report", "--start", str(T0 + 2 * DAY),
            "--folds", "1", "--u-min", "1", "--k", "1", "--metrics", "recall",
            "--algorithms", "pop,pop-n(n_recent=2)"]
    data = tmp_path / "log.csv"
    hand_log().to_csv(data, index=False)
    assert sweval_cli(*args, "--data", data, "--window", "1D,2D",
                      "--output", tmp_path / "cli") == 0
    printed = capsys.readouterr().out
    assert "Kendall's tau" in printed and "window-2D: computed 2 unit(s), reused 0" in printed
    expected = sweval.widths(hand_log(), ["1D", "2D"], **OPTIONS).table
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "cli" / "widths.csv"), expected,
                                  check_dtype=False)
    assert sweval_cli(*args, "--data", data, "--window", "1D,2D", "--rolling",
                      "--output", tmp_path / "rolling") != 0
    assert "--rolling" in capsys.readouterr().err


def test_cli_train_windows_equal_history_sweep(tmp_path: Path) -> None:
    """``sweval run --train-window 1D,all`` writes ``history.csv``: the table of
    :func:`sweval.history_sweep` on the same log and options, value for value (fit seconds
    aside: they are each computation's own)."""
    data = tmp_path / "log.csv"
    hand_log().to_csv(data, index=False)
    options = OPTIONS | dict(folds=3, window="1D", algorithms=["pop", "pop-n"],
                             tune_metric="recall@1")
    assert sweval_cli("run", "--no-prefect", "--no-tracking", "--no-report", "--data", data,
                      "--window", "1D", "--start", str(T0 + 2 * DAY), "--folds", "3",
                      "--u-min", "1", "--k", "1", "--metrics", "recall",
                      "--algorithms", "pop,pop-n", "--tune-metric", "recall@1",
                      "--train-window", "1D,all", "--output", tmp_path / "cli") == 0
    written = pd.read_csv(tmp_path / "cli" / "history.csv", keep_default_na=False,
                          na_values=[""])
    expected = sweval.history_sweep(hand_log(), ["1D", None], **options)
    assert list(written.columns) == list(expected.columns)
    columns = ["train_window", "algorithm", "metric", "k", "n_folds"]
    pd.testing.assert_frame_equal(written[columns], expected[columns], check_dtype=False)
    for column in ("mean", "ci_low", "ci_high", "n_train", "loss"):
        np.testing.assert_allclose(written[column], expected[column], equal_nan=True)
    assert written.loc[written["algorithm"] == "pop", "mean"].nunique() >= 2  # 1D differs
    assert written["train_window"].drop_duplicates().tolist() == ["1D", "all", "tuned"]
    choices = pd.read_csv(tmp_path / "cli" / "history_tuning.csv")
    assert choices.groupby(["fold", "algorithm", "stratum"])["chosen"].sum().max() == 1
    assert sorted(p.name for p in (tmp_path / "cli").glob("train-*")) == [
        "train-1D", "train-all"]


def test_each_widths_mlflow_run_gets_the_comparison(tmp_path: Path) -> None:
    """With tracking, each width's parent run is tagged with the sweep, holds the comparison's
    tables and Kendall's τ against the other width."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    found = sweval.widths(hand_log(), ["1D", "2D"], output=tmp_path / "out", tracking=True,
                          tracking_uri=uri, **OPTIONS)
    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    parents = [run for run in client.search_runs(experiments)
               if "mlflow.parentRunId" not in run.data.tags]
    assert sorted(run.data.tags["sweval.sweep_value"] for run in parents) == ["1D", "2D"]
    tau = found.kendall.loc[found.kendall["metric"] == "recall", "tau"].item()
    for run in parents:
        other = "2D" if run.data.tags["sweval.sweep_value"] == "1D" else "1D"
        assert run.data.tags["sweval.sweep_values"] == "1D,2D"
        assert run.data.metrics[f"kendall_tau_recall_at_1_vs_{other}"] == pytest.approx(tau)
        assert {a.path for a in client.list_artifacts(run.info.run_id, "sweep")} == {
            "sweep/widths.csv", "sweep/widths_kendall.csv"}


def test_the_tuned_training_window_is_the_length_best_on_the_fold_before() -> None:
    """With two or more lengths, history.csv gains ``train_window = tuned``: on each fold f ≥ 1
    the length whose Recall@5 was best on fold f − 1 (``--tune-windows 1``, rolling; ties to
    the length listed first), recomputed here from each length's own results; its fit seconds
    are every length's, and history_tuning.csv names the choices."""
    from sweval_testing import log_frame

    lengths = ["1D", "3D", None]
    options = dict(window="1D", folds=6, u_min=1, k=[1, 5], metrics=["recall"],
                   algorithms=["pop", "pop-n(n_recent=5)"], tune_metric="recall@5")
    table = sweval.history_sweep(log_frame(12), lengths, **options)
    runs = {length or "all": sweval.evaluate(log_frame(12), train_window=length, **options)
            for length in lengths}
    tuned = table[table["train_window"] == "tuned"].set_index(["algorithm", "k"])
    assert len(tuned) == 4
    switched = []
    for algorithm in ("pop", "pop-n(n_recent=5)"):
        values = {length: run.results[(run.results["algorithm"] == algorithm)
                                      & (run.results["stratum"] == "all")
                                      & (run.results["k"] == 5)].set_index("fold")["value"]
                  for length, run in runs.items()}
        folds = sorted(values["all"].index)
        chosen = {fold: max(runs, key=lambda length, f=fold: (values[length][f - 1],
                                                              -list(runs).index(length)))
                  for fold in folds[1:]}
        for k in (1, 5):
            at_k = {length: run.results[(run.results["algorithm"] == algorithm)
                                        & (run.results["stratum"] == "all")
                                        & (run.results["k"] == k)].set_index("fold")["value"]
                    for length, run in runs.items()}
            expected = [at_k[chosen[fold]][fold] for fold in folds[1:]]
            row = tuned.loc[(algorithm, k)]
            assert row["mean"] == pytest.approx(np.mean(expected))
            assert row["n_folds"] == len(expected)
            assert row["fit_s"] == pytest.approx(sum(  # reused units keep their fit's seconds
                run.units.loc[run.units["algorithm"] == algorithm, "fit_s"].sum()
                for run in runs.values()))
            last = runs["all"].summary
            assert row["loss"] == pytest.approx(row["mean"] / last[
                (last["algorithm"] == algorithm) & (last["stratum"] == "all")
                & (last["k"] == k)]["mean"].item() - 1)
        switched.append(len(set(chosen.values())) > 1)
    assert any(switched)  # the choice changes from fold to fold somewhere


def test_a_tune_metric_the_sweep_does_not_compute_leaves_the_tuned_rows_out(caplog) -> None:
    from sweval_testing import log_frame

    table = sweval.history_sweep(log_frame(6), ["1D", None], window="1D", folds=3, u_min=1,
                                 k=[1], algorithms=["pop"])  # --tune-metric recall@10
    assert "tuned" not in set(table["train_window"])
    assert "no tuned training window in history.csv" in caplog.text


def test_the_history_sweep_has_a_report_with_its_figure(tmp_path: Path) -> None:
    """``report.html`` of ``--train-window 1D,all``: the table of history.csv at Recall@1 (each
    cell its mean, interval, loss and fit seconds), the tuned column, the figure inline and a
    link to each length's report."""
    import base64
    import re

    data = tmp_path / "log.csv"
    hand_log().to_csv(data, index=False)
    assert sweval_cli("run", "--no-prefect", "--no-tracking", "--data", data, "--window", "1D",
                      "--start", str(T0 + 2 * DAY), "--folds", "3", "--u-min", "1", "--k", "1",
                      "--metrics", "recall", "--algorithms", "pop,pop-n", "--tune-metric",
                      "recall@1", "--train-window", "1D,all", "--output", tmp_path / "out") == 0
    page = (tmp_path / "out" / "report.html").read_text()
    table = pd.read_csv(tmp_path / "out" / "history.csv")
    for row in table.itertuples():
        assert f"{row.mean:.4f}" in page and f"{row.loss:+.1%}" in page
    assert "<th>tuned</th>" in page and "history_tuning.csv" in page
    for length in ("1D", "all"):
        assert f'href="train-{length}/report.html"' in page
        assert (tmp_path / "out" / f"train-{length}" / "report.html").exists()
    (inline,) = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert base64.b64decode(inline) == (tmp_path / "out" / "report-history.png").read_bytes()
