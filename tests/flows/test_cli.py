"""`sweval run` / `sweval serve` through the console-script entry point (errors: exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sweval_testing import sweval_cli

import sweval.flows.serve
from sweval.flows.cli.app import main


@pytest.mark.slow
def test_run_executes_the_flow_prints_the_summary_and_the_mlflow_run(
    write_log, tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = write_log(8)
    code = sweval_cli("run", "--data", data, "--window", "1D", "--folds", "7", "--k", "5,10",
        "--u-min", "5", "--algorithms", "pop,pop-n", "--output", tmp_path / "out",
        "--tracking-uri", mlflow_uri, "--experiment", "test/cli-run", "--no-progress",
        "--task-runner", "threads", "--workers", "2",
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Recall@k on log" in out and "pop-n" in out
    assert "MLflow: experiment" in out
    record = json.loads((tmp_path / "out" / "config.json").read_text())
    assert record["config"]["task_runner"] == "threads"
    assert (tmp_path / "out" / "tracking.json").exists()


def test_run_reads_a_config_file_and_explicit_options_win(
    write_log, make_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = make_config(write_log(8))
    path = tmp_path / "eval.toml"
    path.write_text(
        f'data = "{config.data}"\nwindow = "1D"\nfolds = 7\nk = [5, 10]\nu_min = 5\n'
        f'algorithms = ["pop"]\noutput = "{tmp_path / "ignored"}"\n'
    )
    code = sweval_cli("run", "--config", path, "--output", tmp_path / "chosen",
                   "--no-tracking", "--no-progress", "--no-prefect")
    assert code == 0
    record = json.loads((tmp_path / "chosen" / "config.json").read_text())
    assert record["config"]["algorithms"] == ["pop"] and record["config"]["tracking"] is False
    assert not (tmp_path / "ignored").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "no/such/log.csv"], "no such file"),
        (["--task-runner", "spark"], "task_runner"),
        (["--rolling", "--window", "0D"], "--window"),
        (["--data", "{log}", "--time-col", "when"], "missing column"),  # inside the flow
    ],
)
def test_run_user_errors_exit_2_with_one_line(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], write_log,
) -> None:
    args = [str(write_log(8)) if arg == "{log}" else arg for arg in args]
    code = sweval_cli("run", *args, "--output", tmp_path / "out", "--no-tracking",
                   "--no-progress")
    err = capsys.readouterr().err
    assert code == 2
    assert "error:" in err and message in err and "Traceback" not in err


def test_serve_needs_a_prefect_server(
    write_log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sweval.flows.serve, "api_url", lambda: None)
    code = sweval_cli("serve", "--data", write_log(8), "--start", "2024-01-02",
                   "--output", tmp_path / "out")
    assert code == 2
    assert "prefect server start" in capsys.readouterr().err


def test_serve_says_it_serves_only_once_the_deployment_is_valid(
    write_log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sweval.flows.serve, "api_url", lambda: "http://127.0.0.1:9/api")
    code = sweval_cli("serve", "--data", write_log(8), "--cron", "every night",
                   "--output", tmp_path / "out")  # no --start: a rolling series fixes its own
    err = capsys.readouterr().err
    assert code == 2 and "--cron 'every night'" in err and "serving" not in err


def test_version_prints_the_installed_distribution_version(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib
    from importlib.metadata import version

    from sweval_testing import REPO, sweval_cli

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version("sweval") == declared  # the checkout is what is installed
    assert sweval_cli("--version") == 0
    assert capsys.readouterr().out == f"sweval {declared}\n"


def test_unknown_option_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sweval_cli("run", "--no-such-option") == 2


def test_the_console_script_freezes_the_collector_before_the_interpreter_exits(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`sweval` is flows.cli.app:entry_point, which runs main() and then gc.freeze(), errors
    included, and exits with main's status."""
    import gc
    import tomllib

    from sweval.flows.cli import app as cli
    from sweval.flows.cli.app import entry_point

    def exits(status: int) -> None:  # the test's own process must not end
        raise SystemExit(status)

    monkeypatch.setattr(cli, "exit_without_teardown", exits)

    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["sweval"] == "sweval.flows.cli.app:entry_point"
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    monkeypatch.setattr(sys, "argv", ["sweval", "run", "--folds", "many"])
    with pytest.raises(SystemExit) as exited:
        entry_point()
    assert exited.value.code == 2 and frozen == [True]
    assert "Invalid value for '--folds'" in capsys.readouterr().err


@pytest.mark.parametrize(("reason", "said"), [
    (None, "device=auto (als, bpr) runs on the GPU; defaults: als.device=auto, bpr.device=cpu"),
    ("rmm is not installed", ("device=auto (als, bpr) runs on the CPU here: rmm is not installed; "
                              "defaults: als.device=auto, bpr.device=cpu")),
])
def test_algorithms_says_where_device_auto_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], reason: str | None,
    said: str,
) -> None:
    import sweval.algorithms.implicit_device as device

    monkeypatch.setattr(device, "cuda_unavailable_reason", lambda: reason)
    monkeypatch.setenv("COLUMNS", "200")
    assert sweval_cli("algorithms") == 0
    assert said in capsys.readouterr().out


def _commands(group: object, prefix: str = "") -> list[tuple[str, object]]:
    """(name, click command) of every command and sub-command of a click group."""
    found = []
    for name, command in getattr(group, "commands", {}).items():
        found.append((prefix + name, command))
        found += _commands(command, prefix + name + " ")
    return found


def test_each_command_shows_its_own_default_output() -> None:
    """compare, leakage and gap write to runs/<command> by default; their help said
    runs/latest, sweval run's."""
    import typer.main

    from sweval.flows.cli.app import app

    commands = dict(_commands(typer.main.get_command(app)))
    for name, default in {"run": "runs/latest", "compare": "runs/compare",
                          "leakage": "runs/leakage", "gap": "runs/gap"}.items():
        (output,) = [p for p in commands[name].params if p.name == "output"]
        assert output.default == default, name


def test_every_command_help_is_made_of_paragraphs_that_rich_can_reflow() -> None:
    """With rich markup typer keeps a help text's line breaks as they stand in the docstring
    (in ``sweval --help``'s command panel and in the command's own page), so a paragraph spread
    over two source lines breaks in the middle of a sentence: each paragraph is one line."""
    import inspect

    import typer.main

    from sweval.flows.cli.app import app

    commands = _commands(typer.main.get_command(app))
    assert {"run", "serve", "algorithms", "ui", "cache prune"} <= {name for name, _ in commands}
    for name, command in commands:
        paragraphs = inspect.cleandoc(command.help or "").split("\n\n")
        assert paragraphs[0], f"sweval {name}: no help"
        assert "``" not in paragraphs[0], f"sweval {name}: reST quotes in {paragraphs[0]!r}"
        for paragraph in paragraphs:
            assert "\n" not in paragraph, f"sweval {name}: {paragraph!r}"


@pytest.mark.parametrize(("args", "said"), [
    (["--data", "{tmp}/[old]/log:boom:.csv"], "{tmp}/[old]/log:boom:.csv"),
    (["--algorithms", "item-knn", "--tune", "item-knn.n_neighbors=log_range(10,1000,0)"],
     "log_range needs [low > 0, high >= low, n >= 2]"),
])
def test_error_text_prints_as_written_not_as_markup_or_emoji(
    args: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    code = sweval_cli("run", *args, "--output", tmp_path / "out", "--no-prefect",
                   "--no-tracking", "--no-progress")
    err = " ".join(capsys.readouterr().err.split())  # the line may wrap
    assert code == 2
    assert said.replace("{tmp}", str(tmp_path)) in err


def test_tables_off_a_terminal_are_not_squeezed_to_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rich.table import Table

    from sweval.flows.cli.terminal import PRINT_WIDTH, table_console

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr("os.isatty", lambda fd: False)
    console = table_console(record=True, file=__import__("io").StringIO())
    table = Table()
    for name in ("algorithm", "Recall@5", "Recall@10", "Recall@15", "Recall@20", "folds"):
        table.add_column(name, no_wrap=True)
    table.add_row("my_models:Boom:[v2]", *["0.1234 [dim]-12%[/]"] * 4, "30/0")
    console.print(table)
    text = console.export_text()
    assert console.width == PRINT_WIDTH
    assert "my_models:Boom:" in text and "…" not in text
    monkeypatch.setenv("COLUMNS", "90")
    assert table_console().width == 90


@pytest.mark.parametrize(("name", "text", "kind"), [
    ("list.json", "[1, 2]", "list"), ("word.yaml", "hello\n", "str"),
])
def test_a_configuration_file_that_is_not_a_table_is_a_user_error(
    name: str, text: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert sweval_cli("run", "--config", path, "--no-prefect", "--no-tracking") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{path}: the configuration must be a table of options" in err and f"not a {kind}" in err


def test_configuration_files_take_lists_as_the_command_line_writes_them(tmp_path: Path) -> None:
    from sweval.data.errors import SwevalError
    from sweval.evaluators.config.model import EvalConfig

    toml = tmp_path / "run.toml"
    toml.write_text('k = "5,10"\nalgorithms = "pop,user-knn(n_neighbors=5,weighting=cosine),pop-n"\n'
                    "seeds = 3\n")
    config = EvalConfig.load(toml)
    assert config.k == [5, 10] and config.seeds == [3]
    assert [entry.split("(")[0] for entry in config.algorithms] == ["pop", "user-knn", "pop-n"]
    yaml = tmp_path / "run.yaml"
    yaml.write_text("algorithms: pop\nk: [5, 20]\n")
    assert EvalConfig.load(yaml).algorithms == ["pop"] and EvalConfig.load(yaml).k == [5, 20]
    toml.write_text('k = "5,ten"\n')
    with pytest.raises(SwevalError, match=r"run.toml: k: 'ten' is not an integer"):
        EvalConfig.load(toml)


def test_invalid_options_are_named_as_the_command_line_spells_them() -> None:
    from sweval.data.errors import SwevalError
    from sweval.evaluators.config.model import EvalConfig

    with pytest.raises(SwevalError) as error:
        EvalConfig.build(ci_method="xyz", tune_windows=0)
    message = str(error.value)
    assert "--ci-method (ci_method): Input should be" in message
    assert "--tune-windows (tune_windows): " in message
    assert ".." not in message and "Value error" not in message


@pytest.mark.slow
def test_ui_points_at_the_up_server_that_serves_the_store_instead_of_starting_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sweval.flows import processes, servers

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)  # so the servers' own is not set for good
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    servers.SERVERS.write(tmp_path, {"mlflow": {"url": "http://127.0.0.1:5999", "pid": 0,
                                                "create_time": 0.0}, "mlflow_store": store})
    monkeypatch.setattr(servers, "answers", lambda url, health, timeout=3.0: True)
    monkeypatch.setattr(processes, "run_server", lambda *a, **k: pytest.fail("a second server"))
    assert sweval_cli("ui", "--tracking-uri", store, "--no-browser") == 0
    out = " ".join(capsys.readouterr().err.split())
    assert f"the MLflow server of `sweval up` serves {store}: open http://127.0.0.1:5999" in out


@pytest.mark.parametrize(("command", "remedy"), [
    (["run", "--no-tracking", "--no-progress"],
     "Start it (`sweval up`, or `prefect server start`), unset PREFECT_API_URL to use a "
     "temporary local one, or run with --no-prefect."),
    (["serve", "--start", "2024-01-02"], "Start it (`sweval up`, or `prefect server start`)"),
])
@pytest.mark.slow
def test_a_prefect_api_that_does_not_answer_is_one_clear_error(
    command: list[str], remedy: str, tmp_path: Path
) -> None:
    """Prefect says "Failed to reach API at ..." in a RuntimeError (run), httpx raises
    ConnectError (serve, registering its deployment): one line and exit 2, not a traceback
    (orchestration.md, troubleshooting), and nothing left running. `sweval serve` printed a
    389-line traceback and exited 1."""
    import os
    import socket
    import subprocess
    import uuid

    from flow_helpers import marked_processes

    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    marker = uuid.uuid4().hex
    env = os.environ | {"PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
                        "SWEVAL_PREFECT_API_TEST_ID": marker}
    done = subprocess.run(
        [sys.executable, "-m", "sweval.flows.cli.app", *command, "--scale", "0.01", "--folds", "2",
         "--u-min", "3", "--algorithms", "pop", "--output", str(tmp_path / "out")],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    lines = output.strip().splitlines()
    if lines[0].startswith("evaluating "):  # run's first line, before it reaches the API
        lines = lines[1:]
    message = " ".join(" ".join(lines).split())
    assert message.startswith(f"error: cannot reach the Prefect API at http://127.0.0.1:{port}/api")
    assert remedy in message and len(lines) <= 3  # one wrapped line
    assert "Traceback" not in output and "serving" not in output
    assert marked_processes("SWEVAL_PREFECT_API_TEST_ID", marker) == []


def test_ui_on_a_taken_port_is_an_error_naming_its_holder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without the check the MLflow child failed to bind (exit 0), or the announcement pointed at
    another server already listening there."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setattr(sys, "argv", [
            "sweval", "ui", "--no-browser", "--port", str(port),
            "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}"])
        with pytest.raises(SystemExit) as exit_:
            main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is taken" in err and "--port" in err


@pytest.mark.parametrize("command", ["run", "compare"])
@pytest.mark.slow
def test_a_run_where_every_fold_is_skipped_writes_its_files_and_exits_2(
    write_log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], command: str,
) -> None:
    """Every fold below u_min: the tables are written (they say why), but the command does not
    end as a success with no number in them; a rolling run's quiet window is not an error."""
    data = write_log(8)
    options = ["--data", data, "--window", "1D", "--folds", "3", "--u-min", "100000",
               "--algorithms", "pop", "--no-tracking", "--no-progress"]
    if command == "compare":
        options += ["--protocols", "sw-eval,leave-last-one-out"]
    else:
        options += ["--no-prefect"]
    code = sweval_cli(command, *options, "--output", tmp_path / "out")
    err = capsys.readouterr().err
    what = "fold" if command == "run" else "split"
    assert code == 2, err
    assert f"no {what} was scored: every {what} was skipped (n_eligible=" in err
    assert "< u_min=100000" in err and "Lower --u-min (now 100000)" in err
    assert (tmp_path / "out" / ("results.csv" if command == "run" else "compare.csv")).exists()
    if command == "run":
        assert sweval_cli("run", *options, "--rolling", "--start", "2024-01-01",
                       "--output", tmp_path / "rolling") == 0


def test_the_ui_servers_output_goes_to_its_log_and_a_failure_quotes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """QA: `sweval ui` printed MLflow's start-up banner, a deprecation warning and every
    health-check access line among its own two lines; they go to $SWEVAL_HOME/logs now, and
    a server that exits by itself is an error quoting the log's last lines."""
    import sys

    from sweval.flows import tracking

    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path / "home"))
    script = "import sys; print('banner'); print('deprecated thing', file=sys.stderr); sys.exit(3)"
    monkeypatch.setattr(tracking, "server_command", lambda uri, port: [sys.executable, "-c", script])
    monkeypatch.setattr(tracking, "announce_when_ready", lambda *a, **k: None)
    code = sweval_cli("ui", "--tracking-uri", f"sqlite:///{tmp_path}/m.db",
                   "--no-browser", "--port", "5987")
    captured = capsys.readouterr()
    log = tmp_path / "home" / "logs" / "mlflow-ui.log"
    assert (captured.out + captured.err).count("banner") == 1  # in the error's quote only
    assert log.read_text().splitlines() == ["banner", "deprecated thing"]
    assert code == 2
    err = " ".join(captured.err.split())
    assert "the MLflow server exited with status 3; its last lines" in err
    assert "banner | deprecated thing" in err


def test_passwords_in_printed_store_uris_are_masked() -> None:
    """QA: `sweval ui --tracking-uri postgresql://u:p@...` printed the password in its banner."""
    from sweval.flows.tracking import shown_uri

    assert shown_uri("MLflow UI for postgresql+psycopg://sweval:s3cr%40t@db:5432/mlflow on") \
        == "MLflow UI for postgresql+psycopg://sweval:***@db:5432/mlflow on"
    assert shown_uri("postgresql://u:p@127.0.0.1:1/db") == "postgresql://u:***@127.0.0.1:1/db"
    # QA: an @ or / in the password, no user name, libpq's query-string password
    for given, shown in [("postgresql://u:se@cret@h:1/db x", "postgresql://u:***@h:1/db x"),
                         ("postgresql://u:se/cret@h/db", "postgresql://u:***@h/db"),
                         ("postgresql://:secret4@h/db", "postgresql://:***@h/db"),
                         ("postgresql://u@h/db?sslmode=require&password=secret3&x=1",
                          "postgresql://u@h/db?sslmode=require&password=***&x=1")]:
        assert shown_uri(given) == shown
    for kept in ("sqlite:////tmp/m.db", "http://127.0.0.1:5000/#/experiments/1"):
        assert shown_uri(kept) == kept


def test_the_exit_without_teardown_keeps_what_the_interpreter_exit_does(tmp_path: Path) -> None:
    """The console script's exit: the status, a waiting non-daemon thread's work, a thread
    pool left open (its idle worker would otherwise be waited for forever), the atexit
    handlers (in their order: last registered first) and buffered output to a pipe all arrive,
    as with the interpreter's own exit; an object finalised only at teardown is not."""
    script = textwrap.dedent(f"""
        import atexit, threading, time
        from pathlib import Path
        from sweval.flows.cli.app import exit_without_teardown

        out = Path({str(tmp_path)!r})
        def late():
            time.sleep(0.3)
            (out / "thread").write_text("done")
        threading.Thread(target=late).start()
        from concurrent.futures import ThreadPoolExecutor
        pool = ThreadPoolExecutor(1)  # its idle worker is told to stop by threading's hooks
        pool.submit(print, end="")
        def note(text):
            with (out / "order").open("a") as handle:
                handle.write(text + "\\n")
        atexit.register(note, "first registered")
        atexit.register(note, "last registered")
        class AtTeardown:
            def __del__(self):
                (out / "teardown").write_text("ran")
        kept = AtTeardown()
        print("buffered", end="")
        exit_without_teardown(3)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "buffered", "")
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "order").read_text() == "last registered\nfirst registered\n"
    assert not (tmp_path / "teardown").exists()


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def unreachable_store(monkeypatch: pytest.MonkeyPatch) -> str:
    """A PostgreSQL store URI with a password on a closed port; MLflow tries it once."""
    import mlflow.store.db.utils

    monkeypatch.setattr(mlflow.store.db.utils, "MAX_RETRY_COUNT", 1)
    return f"postgresql://user:secret@127.0.0.1:{_closed_port()}/db"


def test_the_ui_announcement_masks_the_stores_password(
    unreachable_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sweval ui`'s lines about the latest evaluation named the store with its password."""
    from sweval.flows.tracking import server

    monkeypatch.setattr(server, "wait_until_healthy", lambda base: False)
    said: list[str] = []
    server.announce_when_ready(unreachable_store, "http://127.0.0.1:1", browser=False,
                               say=said.append).join(60)
    assert len(said) == 2, said
    assert "could not find the latest evaluation in postgresql://user:***@127.0.0.1" in said[0]
    assert said[1].startswith("no finished evaluation in postgresql://user:***@127.0.0.1")
    assert not any("secret" in line for line in said)


def test_an_unreachable_tracking_store_is_named_without_its_password(
    unreachable_store: str, write_log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The error of a tracking store that does not answer named it with its password."""
    code = sweval_cli("run", "--data", write_log(8), "--window", "1D", "--folds", "2",
                   "--u-min", "5", "--algorithms", "pop", "--output", tmp_path / "out",
                   "--tracking-uri", unreachable_store, "--no-progress", "--no-prefect")
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert "MLflow tracking at postgresql://user:***@127.0.0.1" in captured.err
    assert "secret" not in captured.out + captured.err


def test_report_of_a_run_in_an_unreachable_store_is_one_error_line(
    unreachable_store: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """QA: `sweval report RUN_ID --tracking-uri <store that does not answer>` ended in a
    690-line traceback (exit 1); `run` and `compare` give one line and exit 2."""
    code = sweval_cli("report", "0123456789abcdef0123456789abcdef",
                   "--tracking-uri", unreachable_store)
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert "error: MLflow tracking at postgresql://user:***@127.0.0.1" in captured.out + captured.err
    assert "secret" not in captured.out + captured.err and "Traceback" not in captured.err


def test_a_tracking_store_lost_mid_run_is_named_without_its_password(tmp_path: Path) -> None:
    """The error of a store gone during the run named it with its password."""
    from types import SimpleNamespace

    from sweval.flows.tracking import Tracker

    uri = "postgresql://user:secret@127.0.0.1:1/db"
    tracker = SimpleNamespace(uri=uri, config=SimpleNamespace(output=str(tmp_path)), broken=None)
    message = str(Tracker._error(tracker, OSError(f"cannot connect to {uri}")))
    assert message.startswith("MLflow tracking at postgresql://user:***@127.0.0.1:1/db")
    assert "secret" not in message


def test_an_unreachable_prefect_api_is_named_without_its_password(
    write_log, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The error of a Prefect API that does not answer named PREFECT_API_URL with its
    password."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: f"http://user:secret@127.0.0.1:{_closed_port()}/api"}):
        code = sweval_cli("run", "--data", write_log(8), "--window", "1D",
                       "--folds", "2", "--u-min", "5", "--algorithms", "pop",
                       "--output", tmp_path / "out", "--no-tracking", "--no-progress")
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert "cannot reach the Prefect API at http://user:***@127.0.0.1" in captured.err
    assert "secret" not in captured.out + captured.err
