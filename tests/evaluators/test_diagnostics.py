"""Dataset diagnostics (``sweval inspect``): hand-computed counts and SW-EVAL's own folds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.data.log import InteractionLog
from sweval.evaluators.experiments.inspect import (
    active_time,
    covering_windows,
    eligibility_by_width,
    top_item_popularity,
    window_activity,
)
from sweval.evaluators.protocols.folds import build_folds

HOUR = 3600


def log_of(rows: list[tuple]) -> InteractionLog:
    return InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]))


#: Three daily windows [0, 1D), [1D, 2D), [2D, 3D):
#:   a: x at 0D+10h, y at 2D+1h        b: x at 1D+5h, z at 2D+2h        c: z at 2D+3h
HAND = [("a", "x", 10 * HOUR), ("b", "x", DAY + 5 * HOUR), ("a", "y", 2 * DAY + HOUR),
        ("b", "z", 2 * DAY + 2 * HOUR), ("c", "z", 2 * DAY + 3 * HOUR)]


def test_window_counts_equal_a_hand_computation():
    frame = window_activity(log_of(HAND), DAY).frame
    assert frame["t_start"].tolist() == [0, DAY, 2 * DAY]
    assert frame["interactions"].tolist() == [1, 1, 3]
    assert frame["active_users"].tolist() == [1, 1, 3]
    assert frame["new_users"].tolist() == [1, 1, 1]          # a, b, c
    assert frame["new_items"].tolist() == [1, 0, 2]          # x; -; y and z
    assert frame["last_interactions"].tolist() == [0, 0, 3]  # every user leaves on day 2
    assert frame["eligible_users"].tolist() == [0, 0, 2]     # a and b have history before 2D


def test_active_time_equals_a_hand_computation():
    table = active_time(log_of(HAND)).set_index("entity")
    a_days, b_days = (2 * DAY + HOUR - 10 * HOUR) / DAY, (DAY - 3 * HOUR) / DAY
    users = [a_days, b_days, 0.0]
    assert table.loc["users", "n"] == 3
    assert table.loc["users", "single"] == pytest.approx(1 / 3)
    assert table.loc["users", "mean_days"] == pytest.approx(np.mean(users))
    assert table.loc["users", "median_days"] == pytest.approx(np.median(users))
    assert table.loc["users", "max_days"] == pytest.approx(a_days)
    items = [(DAY + 5 * HOUR - 10 * HOUR) / DAY, 0.0, HOUR / DAY]  # x, y, z
    assert table.loc["items", "mean_days"] == pytest.approx(np.mean(items))
    assert table.loc["items", "single"] == pytest.approx(1 / 3)


def test_eligibility_table_counts_usable_windows():
    table = eligibility_by_width(log_of(HAND), [("1D", DAY), ("3D", 3 * DAY)], u_min=1)
    one_day, three_days = table.to_dict("records")
    assert (one_day["windows"], one_day["usable"], one_day["median_eligible"]) == (3, 1, 0.0)
    # one window [0, 3D) holds everything: every user is first seen inside it
    assert (three_days["windows"], three_days["usable"]) == (1, 0)
    # u_min 0: a window without an eligible user is still skipped by sweval run
    at_zero = eligibility_by_width(log_of(HAND), [("1D", DAY)], u_min=0).iloc[0]
    assert (at_zero["usable"], at_zero["usable_share"]) == (1, pytest.approx(1 / 3))


def random_log(seed: int) -> InteractionLog:
    rng = np.random.default_rng(seed)
    n = 400
    return log_of(list(zip(rng.integers(0, 60, n), rng.integers(0, 30, n),
                           rng.integers(0, 20 * DAY, n), strict=True)))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("width", [HOUR * 7, DAY, 3 * DAY])
def test_eligible_users_are_the_folds_eligible_users(seed, width):
    """The diagnostics' eligible users per window are SW-EVAL's own (build_folds, SPEC §2)."""
    log = random_log(seed)
    spec = covering_windows(log, width)
    frame = window_activity(log, width).frame
    folds = build_folds(log, spec, u_min=0)
    assert frame["t_start"].tolist() == [f.t_start for f in folds]
    assert frame["eligible_users"].tolist() == [f.n_eligible for f in folds]
    assert frame["interactions"].tolist() == [f.n_test for f in folds]
    assert frame["active_users"].tolist() == [f.n_test_users for f in folds]
    assert spec.first_start(log.t_max) <= log.t_min  # the windows cover the whole log


@pytest.mark.parametrize("seed", [0, 1])
def test_new_and_last_counts_equal_pandas(seed):
    log = random_log(seed)
    frame = window_activity(log, DAY).frame
    raw = log.to_frame()
    t0 = int(frame["t_start"].iloc[0])

    def per_window(times: pd.Series) -> list[int]:
        counts = ((times - t0) // DAY).value_counts()
        return [int(counts.get(w, 0)) for w in range(len(frame))]

    assert frame["new_users"].tolist() == per_window(raw.groupby("user")["timestamp"].min())
    assert frame["new_items"].tolist() == per_window(raw.groupby("item")["timestamp"].min())
    assert frame["last_interactions"].tolist() == per_window(
        raw.groupby("user")["timestamp"].max())
    popularity = top_item_popularity(log, DAY, n_items=2)
    counts = raw["item"].value_counts()
    expected = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:2]  # ties by id
    assert list(popularity.columns[1:]) == [str(item) for item, _ in expected]
    for item, _ in expected:
        assert popularity[str(item)].tolist() == per_window(raw.loc[raw["item"] == item,
                                                                    "timestamp"])


def test_inspect_command_writes_the_page(tmp_path):
    from typer.testing import CliRunner

    from sweval.flows.cli.app import app

    data = tmp_path / "log.csv"
    log = random_log(0)
    log.to_frame().to_csv(data, index=False)
    result = CliRunner().invoke(app, ["inspect", str(data), "--windows", "1D,3D", "--window",
                                      "1D", "--u-min", "5", "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "usable" in result.stdout and "Active time" in result.stdout
    page = (tmp_path / "out" / "inspect.html").read_text()
    assert page.count("data:image/png;base64,") == 4
    windows = pd.read_csv(tmp_path / "out" / "inspect-windows.csv")
    assert windows["interactions"].sum() == len(log)  # every transaction lies in a window


def test_inspect_rejects_a_bad_width(tmp_path):
    import sys

    from sweval.flows.cli.app import main

    argv = sys.argv
    sys.argv = ["sweval", "inspect", "--windows", "1D,soon", "--output", str(tmp_path)]
    try:
        with pytest.raises(SystemExit) as exit_info:
            main()
    finally:
        sys.argv = argv
    assert exit_info.value.code == 2


# ---------------------------------------------------------------- inspect reads data as run does
#: inspect's options that are not data options (its positional DATA aside).
INSPECT_OWN = {"--windows", "--window", "--u-min", "--output", "--help"}


def _params(command: str) -> list:
    import typer

    from sweval.flows.cli.app import app

    return typer.main.get_command(app).commands[command].params


def _data_options(command: str) -> dict[str, tuple]:
    """{flag: (default, help, panel, type)} of a command's data options: run's Data panel,
    inspect's options other than its own."""
    options = {}
    for param in _params(command):
        if param.param_type_name != "option":
            continue
        flag = "/".join([*param.opts, *param.secondary_opts])
        if (param.rich_help_panel == "Data") if command == "run" else (flag not in INSPECT_OWN):
            parsed = repr(param.type_descriptor.annotation)
            options[flag] = (param.default, param.help, param.rich_help_panel, parsed)
    return options


def test_inspect_takes_the_data_options_of_run():
    """Same flags, defaults, help, panel and parsed type: generated from EvalConfig's Data group."""
    run, inspect = _data_options("run"), _data_options("inspect")
    assert {"--data", "--format", "--sep", "--user-col", "--policy-col", "--basket-col"} <= set(run)
    assert inspect == run
    (argument,) = [p for p in _params("inspect") if p.param_type_name == "argument"]
    assert argument.name == "data" and argument.default is None  # `sweval inspect DATA` stays
    assert argument.help == run["--data"][1]


@pytest.mark.parametrize("bad", [["--format", "xml"], ["--sep", "#"], ["--time-unit", "h"],
                                 ["--dedup", "last"], ["--on-invalid", "skip"], ["--scale", "0"]])
def test_inspect_validates_data_options_as_run_does(bad, tmp_path, monkeypatch, capsys):
    from sweval.flows.cli.app import main

    def error(*args: str) -> str:
        monkeypatch.setattr("sys.argv", ["sweval", *args, *bad, "--output", str(tmp_path)])
        with pytest.raises(SystemExit) as exit_info:
            main()
        assert exit_info.value.code == 2
        return capsys.readouterr().err

    assert error("inspect") == error("run", "--no-tracking", "--no-prefect")


def _inspect(*args: str):
    from typer.testing import CliRunner

    from sweval.flows.cli.app import app

    return CliRunner().invoke(app, ["inspect", *map(str, args), "--windows", "1D,3D",
                                    "--window", "1D", "--u-min", "5"])


def test_inspect_reads_sep_and_jsonl_files_as_the_csv(tmp_path):
    frame = random_log(0).to_frame()
    frame.to_csv(tmp_path / "log.csv", index=False)
    frame.to_csv(tmp_path / "semicolon.csv", sep=";", index=False)
    frame.to_json(tmp_path / "log.txt", orient="records", lines=True)  # not auto-detected
    runs = {
        "csv": [tmp_path / "log.csv"],
        "sep": [tmp_path / "semicolon.csv", "--sep", ";"],
        "jsonl": [tmp_path / "log.txt", "--format", "jsonl"],
    }
    seen = {}
    for name, args in runs.items():
        result = _inspect(*args, "--output", tmp_path / name)
        assert result.exit_code == 0, (result.output, result.exception)
        printed = result.stdout[result.stdout.index("transactions:"):]  # after the data's name
        seen[name] = (printed, pd.read_csv(tmp_path / name / "inspect-windows.csv"))
    assert seen["csv"][0].startswith(f"transactions: {len(frame):,}\n")
    for name in ("sep", "jsonl"):
        assert seen[name][0] == seen["csv"][0], name
        pd.testing.assert_frame_equal(seen[name][1], seen["csv"][1])


def test_inspect_missing_column_error_names_only_its_options(tmp_path):
    import re

    data = tmp_path / "interactions.csv"
    frame = random_log(0).to_frame()
    frame["channel"] = np.where(frame["user"] % 2 == 0, "email", "web")
    frame.rename(columns={"user": "customer", "item": "sku", "timestamp": "ts"}).to_csv(
        data, index=False)
    result = _inspect(data, "--output", tmp_path / "out")
    assert result.exit_code != 0
    message = str(result.exception)
    assert "missing column" in message
    named = set(re.findall(r"--[a-z][a-z-]*", message))
    flags = {flag for p in _params("inspect") for flag in [*p.opts, *p.secondary_opts]}
    assert named and named <= flags, named - flags
    # the README's first step, and a policy column as run reads it
    mapped = ["--user-col", "customer", "--item-col", "sku", "--time-col", "ts"]
    result = _inspect(data, *mapped, "--policy-col", "channel", "--output", tmp_path / "out")
    assert result.exit_code == 0, (result.output, result.exception)
    counts = frame["channel"].value_counts()  # most first, as inspect lists them
    assert "policies: " + "; ".join(f"{p} {n:,}" for p, n in counts.items()) in result.stdout
    result = _inspect(data, *mapped, "--policy-col", "policy", "--output", tmp_path / "out")
    assert "missing column(s) 'policy'" in str(result.exception)


def test_inspect_takes_data_as_argument_or_as_run_s_option(tmp_path):
    data = tmp_path / "log.csv"
    random_log(0).to_frame().to_csv(data, index=False)
    positional = _inspect(data, "--output", tmp_path / "a")
    option = _inspect("--data", data, "--output", tmp_path / "b")
    assert positional.exit_code == option.exit_code == 0, (option.output, option.exception)
    assert positional.stdout == option.stdout
    both = _inspect(data, "--data", data, "--output", tmp_path / "c")
    assert "not both" in str(both.exception)
