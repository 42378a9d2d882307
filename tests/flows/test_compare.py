"""``sweval compare``: the files it writes, resume, MLflow layout and the command line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console
from sweval_testing import REPO, sweval_cli

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.protocols.holdout import PROTOCOLS
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.evaluators.units.ownership import STORE_TAG
from sweval.evaluators.units.store import RUNS_FOLDER
from sweval.flows.cli.compare import run_compare
from sweval.flows.cli.compare_tables import print_comparison


@pytest.fixture(scope="session")
def prefect_api():
    """``compare`` runs in-process: no Prefect API (overrides the flows conftest's harness)."""
    yield None


@pytest.fixture(scope="module")
def log():
    """A small generated log (3.7k interactions, 30 days): new items keep arriving, so the
    hold-out protocols do recommend future items. A user's transactions of one day form a
    basket (leave-last-basket)."""
    from sweval.data.log import InteractionLog
    from sweval.data.synthetic import generate_log

    frame = generate_log(scale=0.02, seed=1, days=30)
    frame["basket"] = frame["timestamp"] // 86_400  # the day
    return InteractionLog.from_frame(frame, policy_col="policy", basket_col="basket",
                                     source="generated-small")


def small_config(tmp_path: Path, **overrides) -> EvalConfig:
    values = dict(
        scale=0.02, seed=1, window="1D", folds=4, u_min=3, k=[5, 10],
        algorithms=["pop", "pop-n"], params={"pop-n": {"n_recent": 200}},
        output=str(tmp_path / "ignored"), progress=False, report=False, tracking=False,
    )
    values.update(overrides)
    return EvalConfig.build(**values)


@pytest.fixture(scope="module")
def comparison(tmp_path_factory, log):
    tmp_path = tmp_path_factory.mktemp("compare")
    return run_compare(small_config(tmp_path), list(PROTOCOLS), output=tmp_path / "out",
                       loocv_repeats=2, log=log)


def test_files_and_tables(comparison):
    out = comparison.directory
    for name in ("compare.csv", "compare_summary.csv", "table2.csv", "kendall.csv",
                 "leakage.csv", "leakage_per_split.csv", "compare.txt", "compare.json"):
        assert (out / name).exists(), name
    results = pd.read_csv(out / "compare.csv")
    assert list(results.columns[:2]) == ["protocol", "fold"]
    assert list(dict.fromkeys(results["protocol"])) == list(PROTOCOLS)
    # LOOCV: one split per seed; POP-N skipped there with its reason
    loocv = results[results["protocol"] == "loocv"]
    assert sorted(loocv["fold"].unique()) == [0, 1]
    assert loocv.loc[loocv["algorithm"] == "pop-n", "skipped"].all()
    kendall = pd.read_csv(out / "kendall.csv")
    assert len(kendall) == len(PROTOCOLS) * (len(PROTOCOLS) - 1) // 2 * 2  # pairs x k
    # 4 folds, 2 LOOCV repetitions, single hold-out splits: no test has power; LOOCV and
    # random-split evaluate POP alone (no POP-N without a timeline): no pair to test
    significance = pd.read_csv(out / "significance.csv")
    assert set(significance["protocol"]) == set(PROTOCOLS) - {"loocv", "random-split"}
    folds = significance[significance["unit"] == "folds"]
    assert folds["p_value"].isna().all() and folds["note"].str.contains("no power").all()
    # over the users, a single split is a test: leave-last-one-out has p-values
    users = significance[(significance["unit"] == "users")
                         & (significance["protocol"] == "leave-last-one-out")]
    assert len(users) and users["p_value"].notna().any()
    protocols = pd.read_csv(out / "significance_protocols.csv")
    assert len(protocols) and protocols["p_value"].isna().all()
    assert "no power" in (out / "compare.txt").read_text()
    assert kendall.loc[kendall["protocol_b"] == "loocv", "n_algorithms"].eq(1).all()
    leakage = pd.read_csv(out / "leakage.csv")
    timeline = leakage["protocol"].isin(["sw-eval", "temporal-global"])
    assert (leakage.loc[timeline, "n_future"] == 0).all()
    assert (leakage.loc[~timeline, "n_future"] > 0).any()  # the leak is real
    text = (out / "compare.txt").read_text()
    for expected in ("Mean Recall@k", "Kendall", "Leakage", "0 by construction", "not defined"):
        assert expected in text


def test_sw_eval_part_is_sweval_run(comparison, tmp_path, log):
    reference = evaluate_config(small_config(tmp_path, output=str(tmp_path / "run")), log=log).results
    ours = pd.read_csv(comparison.directory / "sw-eval" / "results.csv")
    pd.testing.assert_frame_equal(ours, pd.read_csv(tmp_path / "run" / "results.csv"))
    part = comparison.results[comparison.results["protocol"] == "sw-eval"].drop(columns="protocol")
    pd.testing.assert_frame_equal(part.reset_index(drop=True), reference)


@pytest.mark.slow
def test_resume_reuses_finished_units(comparison):
    units = sorted(comparison.unit_store.glob("*/*/unit.json"))
    assert units
    before = {path: path.stat().st_mtime_ns for path in units}
    again = run_compare(comparison.config, list(PROTOCOLS), output=comparison.directory,
                        loocv_repeats=2, log=comparison.log)
    assert all(path.stat().st_mtime_ns == mtime for path, mtime in before.items())
    pd.testing.assert_frame_equal(again.results, comparison.results)


def test_printed_output(comparison):
    console = Console(file=io.StringIO(), width=200)
    print_comparison(comparison, console)
    text = console.file.getvalue()
    assert "2-repetition LOOCV" in text and "leave-last-one-out" in text


def test_in_80_columns_labels_fold_and_no_cell_is_cut(comparison):
    """Protocol and algorithm labels (headers and cells) fold onto more lines in a narrow
    terminal instead of ending in "…" ("tempor…", "leave-…"), and every mean is printed whole."""
    console = Console(file=io.StringIO(), width=80)
    print_comparison(comparison, console)
    text = console.file.getvalue()
    assert "…" not in text
    summary = comparison.summary
    means = summary.loc[(summary["metric"] == "recall") & (summary["stratum"] == "all"), "mean"]
    assert all(f"{mean:.4f}" in text for mean in means.dropna())


@pytest.mark.slow
def test_compare_on_a_local_dask_cluster_runs_jobs_side_by_side_and_logs_to_mlflow(
    tmp_path, log, mlflow_uri, monkeypatch
) -> None:
    """``compare --task-runner dask --workers 2``: the protocols' jobs run in two worker
    processes at once, the tables equal a sequential run's (each computing its units in its own
    store), and the comparison is logged to MLflow."""
    pytest.importorskip("prefect_dask", reason="the dask extra is not installed")
    import sweval_testing
    from mlflow import MlflowClient

    import sweval.flows.executors

    noted = tmp_path / "jobs"
    noted.mkdir()
    monkeypatch.setenv(sweval_testing.JOBS_NOTED_ENV, str(noted))
    monkeypatch.setattr(sweval.flows.executors, "compute_remote",
                        sweval_testing.compute_remote_noting_process)
    dask = small_config(tmp_path, task_runner="dask", workers=2, cache=str(tmp_path / "units-d"),
                        tracking=True, tracking_uri=mlflow_uri, experiment="cmp-dask")
    result = run_compare(dask, ["sw-eval", "loocv"], output=tmp_path / "dask", loocv_repeats=2,
                         log=log)
    sequential = small_config(tmp_path, cache=str(tmp_path / "units-s"))
    run_compare(sequential, ["sw-eval", "loocv"], output=tmp_path / "seq", loocv_repeats=2,
                log=log)

    for name in ("compare.csv", "compare_summary.csv", "kendall.csv", "leakage.csv"):
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "seq" / name).read_bytes()
    jobs = [tuple(map(float, path.read_text().split())) for path in noted.iterdir()]
    assert len(jobs) == 4 + 2  # 4 windows of sw-eval, 2 LOOCV repetitions: one job each
    assert len({pid for pid, _, _ in jobs}) == 2
    assert any(a_pid != b_pid and a_start < b_end and b_start < a_end
               for a_pid, a_start, a_end in jobs for b_pid, b_start, b_end in jobs), \
        "no two jobs of different workers overlapped in time"

    client = MlflowClient(mlflow_uri)
    parent = client.get_run(result.mlflow_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.params["protocols"] == "sw-eval,loocv"
    assert "mean_recall_loocv_pop_at_5" in parent.data.metrics


@pytest.mark.slow
def test_mlflow_layout(tmp_path, log, mlflow_uri):
    from mlflow import MlflowClient

    uri = mlflow_uri  # the flows tests' shared store (a new one costs seconds of migrations)
    config = small_config(tmp_path, tracking=True, tracking_uri=uri, experiment="cmp-test",
                          folds=2)
    result = run_compare(config, ["sw-eval", "loocv"], output=tmp_path / "out", loocv_repeats=1,
                         log=log)
    client = MlflowClient(uri)
    parent = client.get_run(result.mlflow_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.params["protocols"] == "sw-eval,loocv"
    assert "kendall_tau_sw-eval_vs_loocv_at_10" not in parent.data.metrics  # 1 common algorithm
    assert parent.data.metrics["future_items_sw-eval_pop_at_10"] == 0
    assert "mean_recall_loocv_pop_at_5" in parent.data.metrics
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"compare.csv", "kendall.csv", "leakage.csv", "compare.txt"} <= artifacts
    experiment = client.get_experiment_by_name("cmp-test").experiment_id
    children = client.search_runs(
        [experiment], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    assert sorted(run.data.tags["sweval.protocol"] for run in children) == ["loocv", "sw-eval"]
    loocv = next(run for run in children if run.data.tags["sweval.protocol"] == "loocv")
    grandchildren = client.search_runs(
        [experiment], filter_string=f"tags.mlflow.parentRunId = '{loocv.info.run_id}'"
    )
    by_algorithm = {run.data.tags["sweval.algorithm"]: run for run in grandchildren}
    assert by_algorithm["pop"].data.metrics["future_share_at_10"] > 0
    assert "mean_recall_at_10" in by_algorithm["pop"].data.metrics


def test_errors():
    with pytest.raises(SwevalError, match="unknown protocol"):
        run_compare(EvalConfig.build(progress=False, tracking=False), ["sw-eval", "kfold"],
                    output="/nonexistent")
    with pytest.raises(SwevalError, match="between 1 and 10,000"):
        run_compare(EvalConfig.build(progress=False, tracking=False), ["loocv"],
                    output="/nonexistent", loocv_repeats=0)


@pytest.mark.slow
def test_command_line(tmp_path, capsys):
    rows = [(u, (u * 7 + j * 3) % 11, 1_600_000_000 + (u * 5 + j) * 21_600)
            for u in range(12) for j in range(5)]
    pd.DataFrame(rows, columns=["uid", "iid", "ts"]).to_csv(tmp_path / "log.csv", index=False)
    done = sweval_cli("compare", "--data", str(tmp_path / "log.csv"), "--user-col", "uid",
                  "--item-col", "iid", "--time-col", "ts", "--window", "1D", "--folds", "3",
                  "--u-min", "1", "--k", "2,3", "--algorithms", "pop,pop-n", "--protocols",
                  "sw-eval,loocv,temporal-global", "--loocv-repeats", "2", "--no-tracking",
                  "--no-progress", "--output", str(tmp_path / "out"))
    printed = capsys.readouterr()
    assert done == 0, printed.err
    for expected in ("3-fold SW-EVAL", "2-repetition LOOCV", "Kendall", "Leakage"):
        assert expected in printed.out
    assert pd.read_csv(tmp_path / "out" / "compare.csv")["protocol"].nunique() == 3
    assert sweval_cli("compare", "--protocols", "loocv,bogus", "--no-tracking") == 2
    assert "unknown protocol(s) 'bogus'" in capsys.readouterr().err


@pytest.mark.slow
def test_split_strategies_rank_shift_and_scatter(tmp_path, log):
    result = run_compare(small_config(tmp_path, algorithms=["pop", "pop-n", "item-knn"]),
                         ["sw-eval", "temporal-user", "random-split"], output=tmp_path / "out",
                         log=log, split_ratio=0.3, split_seed=4, rank_metric="ndcg")
    out = result.directory
    assert (out / "kendall_scatter.png").read_bytes()[:4] == b"\x89PNG"
    shift = pd.read_csv(out / "rank_shift.csv")
    assert set(shift["protocol"]) == {"sw-eval", "temporal-user", "random-split"}
    assert set(pd.read_csv(out / "kendall.csv")["metric"]) == {"ndcg"}
    assert (shift.loc[shift["protocol"] == "sw-eval", "shift"].dropna() == 0).all()
    record = json.loads((out / "compare.json").read_text())
    assert record["protocols"]["random-split"] == {"share": 0.3, "seed": 4}
    assert (record["split_ratio"], record["rank_metric"]) == (0.3, "ndcg")
    # random-split has no timeline: POP-N is not defined there
    rows = result.results[result.results["protocol"] == "random-split"]
    assert rows.loc[rows["algorithm"] == "pop-n", "skipped"].all()
    assert "Rank by mean NDCG@10 per protocol" in (out / "compare.txt").read_text()


def test_bad_rank_metric_and_ratio(tmp_path, log):
    with pytest.raises(SwevalError, match="--rank-metric"):
        run_compare(small_config(tmp_path), ["sw-eval"], output=tmp_path / "o", log=log,
                    rank_metric="r_precision")
    with pytest.raises(SwevalError, match="--split-ratio"):
        run_compare(small_config(tmp_path), ["temporal-user"], output=tmp_path / "o", log=log,
                    split_ratio=1.0)


@pytest.mark.slow
def test_stratified_hold_out_protocols_equal_their_runs_on_each_policys_log(tmp_path, log):
    """compare --stratify-by policy: each stratum's LOOCV and leave-last-one-out rows are the
    protocols run on that policy's sub-log; SW-EVAL's strata are those of sweval run."""
    from sweval.evaluators.experiments.protocol_runs import run_protocol
    from sweval.evaluators.protocols.holdout import LOOCV, LeaveLastOneOut

    config = small_config(tmp_path, stratify_by="policy", algorithms=["pop", "item-knn"],
                          params={})
    result = run_compare(config, ["sw-eval", "loocv", "leave-last-one-out"],
                         output=tmp_path / "out", loocv_repeats=2, log=log)
    rows = result.results
    labels = [str(label) for label in log.policy_ids]
    assert set(rows["stratum"]) == {"all", *labels}
    columns = ["fold", "algorithm", "metric", "k", "value", "n_eligible", "skipped"]
    for code, label in enumerate(labels):
        sub = log.restrict(log.policy == code)
        for protocol in (LOOCV(repeats=2, u_min=config.u_min),
                         LeaveLastOneOut(u_min=config.u_min)):
            expected = run_protocol(sub, protocol, ["pop", "item-knn"], ks=config.k).results
            got = rows[(rows["protocol"] == protocol.name) & (rows["stratum"] == label)]
            pd.testing.assert_frame_equal(got[columns].reset_index(drop=True),
                                          expected[columns].reset_index(drop=True))
    reference = evaluate_config(config.model_copy(update={"output": str(tmp_path / "run")}),
                          log=log).results
    for label in labels:
        got = rows[(rows["protocol"] == "sw-eval") & (rows["stratum"] == label)]
        want = reference[reference["stratum"] == label]
        assert sorted(got["value"].dropna().round(12)) == sorted(want["value"].dropna().round(12))
    assert "per protocol and policy stratum" in (result.directory / "compare.txt").read_text()


def test_stratify_mode_test_is_refused_with_a_reason(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sweval.flows.cli.app", "compare", "--stratify-by", "policy",
         "--stratify-mode", "test", "--scale", "0.02", "--no-tracking", "--output",
         str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 2
    assert "compare stratifies in mode subset" in result.stderr


def test_leave_last_basket_without_a_basket_column_fails_before_any_fit(tmp_path, own_unit_store):
    from sweval.data.log import InteractionLog
    from sweval.data.synthetic import generate_log

    plain = InteractionLog.from_frame(generate_log(scale=0.02, seed=1, days=30),
                                      policy_col="policy")
    with pytest.raises(SwevalError, match="needs the basket.*--basket-col"):
        run_compare(small_config(tmp_path), ["sw-eval", "leave-last-basket"],
                    output=tmp_path / "o", log=plain)
    units = own_unit_store  # nothing was computed (the comparison registered there)
    assert sorted(path.name for path in units.iterdir()) == [RUNS_FOLDER, STORE_TAG]
    assert list((units / RUNS_FOLDER).iterdir()) == []


class PlainTables(HTMLParser):
    """The rows of every ``table.plain`` of a page, after the heading that precedes it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[str, list[list[str]]]] = []
        self.heading = ""
        self._in: str | None = None
        self._rows: list[list[str]] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3"):
            self._in, self.heading = "heading", ""
        elif tag == "table" and dict(attrs).get("class") == "plain":
            self._rows = []
            self.tables.append((self.heading, self._rows))
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._rows[-1].append("")
            self._in = "cell"

    def handle_endtag(self, tag):
        if tag in ("h2", "h3", "td", "th"):
            self._in = None
        elif tag == "table":
            self._rows = None

    def handle_data(self, data):
        if self._in == "heading":
            self.heading += data
        elif self._in == "cell" and self._rows is not None:
            self._rows[-1][-1] += data


@pytest.mark.slow
def test_report_of_a_comparison_shows_ranks_tau_leakage_and_overlap(tmp_path, log):
    """The page says what ``compare.txt`` says, checked against the CSVs and against ranks
    recomputed here from ``compare_summary.csv``."""
    from sweval.evaluators.report.page import write_report

    protocols = ["sw-eval", "loocv", "leave-last-one-out"]
    config = small_config(tmp_path, algorithms=["pop", "pop-n", "item-knn"])
    run_compare(config, protocols, output=tmp_path / "out", loocv_repeats=2, log=log)
    out = tmp_path / "out"
    written = write_report(out)
    assert out / "report-protocols-recall-at-10.png" in written
    page = PlainTables()
    page.feed((out / "report.html").read_text())
    tables = {rows[0][0]: (heading, rows) for heading, rows in page.tables}

    heading, ranks = tables["algorithm"]
    assert heading == "Do the protocols agree? Recall@10"
    assert ranks[0] == ["algorithm", *protocols]
    summary = pd.read_csv(out / "compare_summary.csv")
    at10 = summary[(summary["metric"] == "recall") & (summary["k"] == 10)
                   & summary["mean"].notna()]
    expected = {}
    for protocol, part in at10.groupby("protocol"):
        order = sorted(zip(-part["mean"], part["algorithm"]))
        expected[protocol] = {name: rank for rank, (_, name) in enumerate(order, start=1)}
    for row in ranks[1:]:
        algorithm, cells = row[0], dict(zip(protocols, row[1:]))
        for protocol in protocols:
            rank = expected[protocol].get(algorithm)
            assert cells[protocol].split(" ")[0] == ("—" if rank is None else str(rank))

    kendall = pd.read_csv(out / "kendall.csv")
    tau_rows = tables["protocols"][1]
    assert tau_rows[0] == ["protocols", "n", "k=5", "k=10"]
    for row in tau_rows[1:]:
        first, second = row[0].split(" vs ")
        at = kendall[(kendall["protocol_a"] == first) & (kendall["protocol_b"] == second)]
        for k, cell in zip((5, 10), row[2:]):
            tau = at.loc[at["k"] == k, "tau"].iloc[0]
            assert cell == ("—" if pd.isna(tau) else
                            f"{tau:+.2f} (p={at.loc[at['k'] == k, 'p_value'].iloc[0]:.2f})")

    leakage = pd.read_csv(out / "leakage.csv")
    heading, shown = next(table for table in page.tables if table[0].startswith("Leakage"))
    assert heading == "Leakage: items from the future, top-10"
    assert len(shown) - 1 == (leakage["k"] == 10).sum()
    for row in shown[1:]:
        csv = leakage[(leakage["protocol"] == row[0]) & (leakage["algorithm"] == row[1])
                      & (leakage["k"] == 10)].iloc[0]
        assert row[4] == f"{csv['n_future']:,}"
        assert row[7] == ("0 by construction" if row[0] == "sw-eval" else "ignores the timeline")
    assert any(row[4] != "0" for row in shown[1:] if row[0] != "sw-eval")  # the leak shows

    overlap = next(rows for heading, rows in page.tables
                   if heading == "The lists against SW-EVAL's, top-10")
    assert [row[0] for row in overlap[1:]] == ["loocv", "leave-last-one-out"]

    write_report(out / "sw-eval")  # a run's report has no such part
    assert "Do the protocols agree" not in (out / "sw-eval" / "report.html").read_text()


def test_files_line_names_every_file_written(comparison):
    console = Console(file=io.StringIO(), width=80)
    print_comparison(comparison, console)
    line = [text for text in console.file.getvalue().splitlines() if text.startswith("files: ")]
    assert len(line) == 1  # one line however narrow the terminal: the paths stay copyable
    named = line[0].removeprefix(f"files: {comparison.directory}/").split(", ")
    on_disk = sorted(p.name for p in comparison.directory.iterdir()
                     if p.is_file() and not p.name.startswith(("report", ".")))
    assert sorted(named) == on_disk


def test_the_loocv_title_counts_the_repetitions_run_and_says_how_many_were_skipped():
    """Two repetitions, both skipped for u_min: "2-repetition LOOCV (seeds 0..1, 2 skipped)",
    not "0-repetition" next to two seeds."""
    from types import SimpleNamespace

    import pandas as pd

    from sweval.flows.cli.compare_tables import _protocol_title

    run = SimpleNamespace(splits=pd.DataFrame({"skipped": [True, True]}))
    comparison = SimpleNamespace(runs={"loocv": run}, loocv_repeats=2, split_ratio=0.2,
                                 split_seed=0, config=SimpleNamespace(window="7D"))
    assert _protocol_title(comparison, "loocv") == "2-repetition LOOCV (seeds 0..1, 2 skipped)"


def test_skip_notes_count_the_splits_in_words():
    """"1 split", "2 splits": not "split(s)"."""
    from types import SimpleNamespace

    from sweval.flows.cli.compare_tables import skip_notes

    results = pd.DataFrame({
        "fold": [0, 0, 1], "algorithm": ["pop-n", "als", "pop-n"], "skipped": True,
        "skip_reason": ["no timeline", "too few users", "no timeline"],
    })
    comparison = SimpleNamespace(runs={"loocv": SimpleNamespace(results=results)})
    assert skip_notes(comparison, "loocv") == ["skipped (pop-n; 2 splits): no timeline",
                                               "skipped (als; 1 split): too few users"]


def test_user_history_strata_group_every_protocols_users_by_their_training_history(tmp_path, log):
    """compare --stratify-by user-history: a hold-out split's user is binned by their
    transactions in its training data (LOOCV holds one out: n_u − 1); SW-EVAL's strata are
    sweval run's."""
    import numpy as np

    config = small_config(tmp_path, stratify_by="user-history", user_bins=[1, 10],
                          algorithms=["pop", "item-knn"], params={})
    result = run_compare(config, ["sw-eval", "loocv"], output=tmp_path / "out",
                         loocv_repeats=2, log=log)
    rows = result.results
    assert set(rows["stratum"]) == {"all", "1-9", "10+"}
    per_user = np.bincount(log.user, minlength=log.n_users)
    loocv = rows[(rows["protocol"] == "loocv") & (rows["metric"] == "recall") & (rows["k"] == 5)
                 & (rows["algorithm"] == "pop")]
    evaluated = per_user[per_user >= 2] - 1  # every user with ≥ 2 holds one out
    for stratum, expected in (("1-9", int((evaluated < 10).sum())),
                              ("10+", int((evaluated >= 10).sum()))):
        assert set(loocv[loocv["stratum"] == stratum]["n_eligible"]) == {expected}
    reference = evaluate_config(config.model_copy(update={"output": str(tmp_path / "run")}),
                                log=log).results
    columns = ["fold", "algorithm", "stratum", "metric", "k", "value", "n_eligible", "skipped"]
    sw_eval = rows[rows["protocol"] == "sw-eval"][columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(sw_eval, reference[columns].reset_index(drop=True))
    with pytest.raises(SwevalError, match="first-time"):
        run_compare(config.model_copy(update={"cold_users": True}), ["sw-eval", "loocv"],
                    output=tmp_path / "cold", loocv_repeats=2, log=log)


def test_rank_metric_ndcg_is_the_metric_of_every_printed_line(comparison):
    """QA: with --rank-metric ndcg, Table 2, the lead column and the protocol-effect lines
    still said Recall@k."""
    from dataclasses import replace

    from rich.console import Console

    from sweval.flows.cli.compare_tables import print_comparison

    ndcg = replace(comparison, options=replace(comparison.options, rank_metric="ndcg"))
    console = Console(width=200, record=True)
    print_comparison(ndcg, console)
    text = console.export_text()
    assert "Mean NDCG@k" in text and "Recall" not in text


def test_a_rerun_into_another_directory_reads_its_tests_and_figures(
        tmp_path, log, own_unit_store, monkeypatch):
    """A comparison of the same units again (another --output) reads its paired tests, its
    protocols' tests, Kendall's τ, the lists' overlap and its figures from the store: none is
    computed again (each would raise), and every table and figure is the same bytes."""
    import sweval.evaluators.experiments.compare as compare
    import sweval.evaluators.experiments.protocol_overlap as protocol_overlap
    import sweval.evaluators.report.compare_figures as compare_figures
    import sweval.evaluators.report.figures as figures
    import sweval.evaluators.run.outputs as outputs

    config = small_config(tmp_path, report=True)
    first = run_compare(config, ["sw-eval", "loocv"], output=tmp_path / "first",
                        loocv_repeats=2, log=log)

    def refuse(*args, **kwargs):
        raise AssertionError("computed again")

    for module, name in ((compare, "compare_algorithms"), (compare, "compare_protocols"),
                         (compare, "kendall_table"),
                         (outputs, "compare_algorithms"), (compare_figures, "protocol_scatter"),
                         (figures, "figure_vs_k"), (figures, "figure_over_time"),
                         (protocol_overlap, "protocol_overlap")):
        monkeypatch.setattr(module, name, refuse)
    second = run_compare(config, ["sw-eval", "loocv"], output=tmp_path / "second",
                         loocv_repeats=2, log=log)
    names = [path.name for path in first.directory.glob("*") if path.suffix in (".csv", ".png")]
    assert {"significance.csv", "significance_protocols.csv", "overlap_protocols.csv",
            "kendall_scatter.png"} <= set(names)
    for name in names:
        assert (second.directory / name).read_bytes() == (first.directory / name).read_bytes(), name
