"""The validation-to-deployment gap (papers/003): the sets are the protocols they claim to be,
nothing at or after T reaches validation, and the drops are test / validation − 1."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.gap import (
    GapDesign,
    gap_table,
    validation_log,
    validation_protocols,
)
from sweval.evaluators.experiments.protocol_runs import run_protocol
from sweval.evaluators.protocols.holdout import RandomSplit, TemporalGlobal, TemporalUser
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.flows.cli.gap import run_gap


def random_frame(seed: int, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"user": rng.integers(0, 50, n), "item": rng.integers(0, 40, n),
                         "timestamp": rng.integers(0, 12 * DAY, n)})


def test_gap_table_by_hand():
    def frame(values: dict[str, float]) -> pd.DataFrame:
        return pd.DataFrame([{"algorithm": a, "metric": "recall", "k": 10, "value": v,
                              "stratum": "all", "skipped": False} for a, v in values.items()])

    table = gap_table({"traditional": frame({"x": 0.4, "y": 0.0}),
                       "cut-off": frame({"x": 0.25})}, frame({"x": 0.2, "y": 0.1}))
    got = {(r.validation, r.algorithm): r.drop_pct for r in table.itertuples()}
    assert got["traditional", "x"] == pytest.approx(-50.0)
    assert got["cut-off", "x"] == pytest.approx(-20.0)
    assert np.isnan(got["traditional", "y"])  # a validation value of 0 has no ratio


@pytest.mark.parametrize(("train_window", "relevance"), [(None, "all"), ("4D", "first")])
def test_the_sets_are_their_protocols_and_validation_never_sees_t(tmp_path, train_window,
                                                                   relevance):
    """Each validation set is its protocol on what it may see, and the test is `sweval run`'s
    fold, with the run's --train-window and --relevance (ignored once, silently)."""
    data = tmp_path / "log.csv"
    random_frame(0, n=1200).to_csv(data, index=False)
    config = EvalConfig(data=str(data), algorithms=["pop", "item-knn"], k=[5, 10], u_min=0,
                        tracking=False, progress=False, train_window=train_window,
                        relevance=relevance, dedup="none")
    window = None if train_window is None else 4 * DAY
    design = GapDesign(deploy_start=9 * DAY, width_s=2 * DAY, share=0.25, seed=3,
                       train_window_s=window, relevance=relevance)
    gap, results = run_gap(config, design, output=tmp_path / "out")
    log = InteractionLog.from_frame(random_frame(0, n=1200), dedup="none")
    earliest = 0 if window is None else 9 * DAY - window
    columns = ["fold", "algorithm", "metric", "k", "value"]
    for name, protocol in {"traditional": RandomSplit(share=0.25, seed=3),
                           "proportional": TemporalUser(share=0.25),
                           "cut-off": TemporalGlobal(start=7 * DAY, train_window_s=window,
                                                     relevance=relevance)}.items():
        seen = validation_log(log, design, name)
        assert seen.t_max < design.deploy_start
        if name != "cut-off":
            assert seen.t_min >= earliest
        by_hand = log.restrict((log.timestamp < 9 * DAY) & (log.timestamp >= earliest)
                               if name != "cut-off" else log.timestamp < 9 * DAY)
        want = run_protocol(by_hand, protocol, ["pop", "item-knn"], ks=[5, 10]).results
        got = results[results["set"] == name]
        pd.testing.assert_frame_equal(got[columns].reset_index(drop=True),
                                      want[columns].reset_index(drop=True))
    deployed = evaluate_config(config.model_copy(update={
        "window": "2D", "folds": 1, "start": str(9 * DAY), "output": str(tmp_path / "run")}),
        log=log).results
    got = results[results["set"] == "test"]
    assert got["value"].round(12).tolist() == deployed["value"].round(12).tolist()
    assert set(gap["validation"]) == {"traditional", "proportional", "cut-off"}
    assert (tmp_path / "out" / "gap.csv").is_file()


def test_the_command_passes_the_training_window_and_relevance(tmp_path):
    """`sweval gap --train-window 4D --relevance first` computes what its design says (it
    computed the whole-history numbers, and recorded the options in gap.json)."""
    import json
    import sys

    from sweval.flows.cli.app import main

    data = tmp_path / "log.csv"
    random_frame(0, n=1200).to_csv(data, index=False)
    sys.argv = ["sweval", "gap", "--data", str(data), "--window", "2D", "--start", str(9 * DAY),
                "--algorithms", "pop", "--k", "10", "--u-min", "0", "--train-window", "4D",
                "--relevance", "first", "--no-tracking", "--no-progress",
                "--output", str(tmp_path / "cli")]
    main()
    record = json.loads((tmp_path / "cli" / "gap.json").read_text())
    assert (record["train_window_s"], record["relevance"]) == (4 * DAY, "first")
    config = EvalConfig(data=str(data), algorithms=["pop"], k=[10], u_min=0, tracking=False,
                        progress=False)
    got = pd.read_csv(tmp_path / "cli" / "gap.csv")
    for window, relevance, same in ((4 * DAY, "first", True), (None, "all", False)):
        design = GapDesign(deploy_start=9 * DAY, width_s=2 * DAY, train_window_s=window,
                           relevance=relevance)
        want, _ = run_gap(config, design, output=tmp_path / f"o{window}")
        equal = np.allclose(got["test_value"], want["test_value"], rtol=0, atol=1e-9)
        assert equal == same, (window, got, want)


def test_validation_protocols_cut_at_t_minus_the_window():
    protocols = validation_protocols(GapDesign(deploy_start=9 * DAY, width_s=2 * DAY), u_min=0)
    assert protocols["cut-off"].cutoff(InteractionLog.from_frame(random_frame(1))) == 7 * DAY


@pytest.mark.parametrize(("design", "message"), [
    (GapDesign(deploy_start=40 * DAY, width_s=DAY), "holds no transaction"),
    (GapDesign(deploy_start=DAY, width_s=2 * DAY), "not after the first transaction"),
])
def test_windows_outside_the_log_are_clear_errors(design, message):
    with pytest.raises(SwevalError, match=message):
        design.check(InteractionLog.from_frame(random_frame(2)))


def test_a_skipped_set_is_said_and_a_skipped_deployment_is_an_error(tmp_path, capsys):
    """u_min between the cut-off window's users and the deployment window's: the cut-off
    columns are empty and a line says why; u_min above both: exit 2 naming the deployment."""
    import sys

    from sweval.flows.cli.app import main

    data = tmp_path / "log.csv"
    random_frame(0).to_csv(data, index=False)
    design = GapDesign(deploy_start=9 * DAY, width_s=2 * DAY, share=0.25, seed=3)
    config = EvalConfig(data=str(data), algorithms=["pop"], k=[5], u_min=0, tracking=False,
                        progress=False)
    _, results = run_gap(config, design, output=tmp_path / "probe")
    users = results[results["k"] == 5].groupby("set")["n_eligible"].max()
    cut_off, test = int(users["cut-off"]), int(users["test"])
    assert cut_off < test  # this log's windows

    def gap(u_min: int) -> int:
        sys.argv = ["sweval", "gap", "--data", str(data), "--window", "2D", "--start",
                    str(9 * DAY), "--algorithms", "pop", "--k", "5", "--u-min", str(u_min),
                    "--no-tracking", "--no-progress", "--output", str(tmp_path / f"o{u_min}")]
        try:
            main()
        except SystemExit as exit_:
            return int(exit_.code or 0)
        return 0

    assert gap(test) == 0
    assert f"val cut-off: skipped (n_eligible={cut_off} < u_min={test})" in capsys.readouterr().err
    assert gap(test + 1) == 2
    assert (f"the deployment window is skipped (n_eligible={test} < u_min={test + 1})"
            in capsys.readouterr().err)


def test_an_algorithm_a_validation_does_not_define_is_said_with_its_reason(tmp_path, capsys):
    """POP-N has no random-split value: its "—" cell gets a line saying why (it had none)."""
    import sys

    from sweval.flows.cli.app import main

    data = tmp_path / "log.csv"
    random_frame(0).to_csv(data, index=False)
    sys.argv = ["sweval", "gap", "--data", str(data), "--window", "2D", "--start", str(9 * DAY),
                "--algorithms", "pop,pop-n", "--k", "5", "--u-min", "0", "--no-tracking",
                "--no-progress", "--output", str(tmp_path / "o")]
    main()
    err = capsys.readouterr().err
    assert "pop-n under val traditional: pop-n needs the global timeline" in err
    assert "pop under" not in err


def test_a_typed_output_is_where_the_command_writes_even_run_s_default(tmp_path, monkeypatch):
    """`--output runs/latest` typed on the command line is honoured (it was taken for "left at
    sweval run's default" and replaced by runs/gap); without --output, runs/gap."""
    import sys

    from sweval.flows.cli.app import main

    monkeypatch.chdir(tmp_path)
    random_frame(0, n=1200).to_csv("log.csv", index=False)
    command = ["sweval", "gap", "--data", "log.csv", "--window", "2D", "--start", str(9 * DAY),
               "--algorithms", "pop", "--k", "10", "--u-min", "0", "--no-tracking",
               "--no-progress"]
    sys.argv = [*command, "--output", "runs/latest"]
    main()
    assert (tmp_path / "runs" / "latest" / "gap.csv").is_file()
    assert not (tmp_path / "runs" / "gap").exists()
    sys.argv = command
    main()
    assert (tmp_path / "runs" / "gap" / "gap.csv").is_file()
