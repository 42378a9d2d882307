"""Secrets are never recorded: the password of every URI a command takes appears in no file,
MLflow record, Prefect record, log line or process argument list.

The end-to-end test plants a secret in each URI (MLflow's ``--tracking-uri`` in a
configuration file, ``PREFECT_API_URL``), runs every command that records something against
``sweval up``'s servers (which ignore the credentials), and greps for the secrets: every file
of the outputs, the MLflow store and its artifacts, Prefect's database, the servers' logs, the
commands' output (with ``-v``: every log line) and the argument list of every process seen
while they ran.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from prefect_database import prefect_home
from sweval_testing import DAY, REPO, T0

SECRET_TRACKING = "tr4ck1ng-s3cr3t"
SECRET_PREFECT = "pr3f3ct-s3cr3t"
SECRET_DATABASE = "d4t4b4s3-s3cr3t"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ArgumentLists(threading.Thread):
    """Every process's argument list, sampled every 0.1 s until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: set[str] = set()
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.done.is_set():
            for process in psutil.process_iter(["cmdline"]):
                self.seen.add(" ".join(process.info["cmdline"] or []))
            self.done.wait(0.1)


def _files_holding(roots: list[Path], secrets: tuple[str, ...]) -> list[str]:
    found = []
    for root in roots:
        for path in [root] if root.is_file() else root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                found += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return found


@pytest.mark.slow
def test_no_password_of_any_uri_is_recorded_anywhere(tmp_path: Path, write_log: Any) -> None:
    home = tmp_path / "home"
    prefect_port, mlflow_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL",
                                                             "MLFLOW_TRACKING_URI")}
    env |= {"SWEVAL_HOME": str(home), "PREFECT_HOME": str(prefect_home(home / "prefect")),
            "COLUMNS": "200"}

    def sweval(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "sweval.flows.cli.app", *args], cwd=REPO,
                              env=env | extra, capture_output=True, text=True, timeout=600)
        outputs.append(done.stdout + done.stderr)
        return done

    outputs: list[str] = []
    watcher = ArgumentLists()
    watcher.start()
    try:
        started = sweval("up", "--prefect-port", str(prefect_port),
                         "--mlflow-port", str(mlflow_port))
        assert started.returncode == 0, started.stderr
        data = write_log(8)
        config = tmp_path / "eval.toml"
        config.write_text(
            f'data = "{data}"\nwindow = "1D"\nk = [5, 10]\nu_min = 5\n'
            f'algorithms = ["pop", "pop-n"]\nexperiment = "test/secrets"\n'
            f'tracking_uri = "http://sweval:{SECRET_TRACKING}@127.0.0.1:{mlflow_port}"\n')
        prefect = {"PREFECT_API_URL": f"http://sweval:{SECRET_PREFECT}@127.0.0.1:"
                                      f"{prefect_port}/api"}
        out = tmp_path / "out"
        common = ["--config", str(config), "--no-progress", "-v"]
        commands = [
            ["run", *common, "--folds", "3", "--start", str(T0 + DAY), "--output",
             str(out / "run")],
            ["run", *common, "--folds", "3", "--rolling", "--task-runner", "dask",
             "--workers", "1", "--output", str(out / "rolling")],
            ["compare", *common, "--folds", "2", "--output", str(out / "compare")],
            ["leakage", *common, "--leak-test-start", str(T0 + 5 * DAY), "--output",
             str(out / "leakage")],
            ["gap", *common, "--output", str(out / "gap")],
        ]
        for command in commands:
            done = sweval(*command, **prefect)
            assert done.returncode == 0, f"{command}:\n{done.stderr[-12000:]}"  # whole, not a repr
        records = [out / "run" / "config.json", out / "run" / "tracking.json",
                   out / "rolling" / "rolling.json", out / "compare" / "compare.json",
                   out / "leakage" / "leakage.json", out / "gap" / "gap.json"]
        assert all(path.exists() for path in records), [p for p in records if not p.exists()]
        assert f"http://sweval:***@127.0.0.1:{mlflow_port}" in (
            out / "run" / "config.json").read_text()  # recorded, masked
    finally:
        sweval("down", "--force")
        watcher.done.set()
        watcher.join()
    secrets = (SECRET_TRACKING, SECRET_PREFECT)
    assert _files_holding([out, home], secrets) == []  # outputs, MLflow, Prefect, server logs
    assert list((home / "prefect").glob("prefect.db*")) and list(home.glob("mlflow.db*"))
    assert [text for text in outputs if any(s in text for s in secrets)] == []
    assert [line for line in watcher.seen if any(s in line for s in secrets)] == []


def test_sweval_up_gives_the_store_s_password_to_mlflow_through_its_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`sweval up` put a database password on `mlflow server`'s command line (`ps` shows it to
    every local user) and in servers.json."""
    from sweval.flows import servers

    store = f"postgresql://sweval:{SECRET_DATABASE}@db.example.org/mlflow"
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    started: list[tuple[list[str], dict[str, str]]] = []

    class Popen:
        pid = os.getpid()  # a live process, for the record's start time

        def __init__(self, argv: list[str], *, env: dict[str, str], **_: Any) -> None:
            started.append((argv, env))

    monkeypatch.setattr(servers.subprocess, "Popen", Popen)
    monkeypatch.setattr("sweval.flows.process_tree.detach", lambda pid: None)
    servers._start_mlflow(_free_port(), tmp_path / "mlflow.log")
    [(argv, server_env)] = started
    assert argv[:4] == [sys.executable, "-m", "mlflow", "server"]
    assert not any(SECRET_DATABASE in part for part in argv)
    assert server_env["MLFLOW_BACKEND_STORE_URI"] == store
    assert SECRET_DATABASE not in (tmp_path / "servers.json").read_text()
    assert servers.SERVERS.read(tmp_path)["mlflow_store"] == (
        "postgresql://sweval:***@db.example.org/mlflow")


def test_log_records_and_served_parameters_hold_no_password(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Any log line (Prefect's "View at http://user:password@..." under -v, an exception's
    text) is masked as it is made; `sweval serve` moves a --tracking-uri with a password into
    its environment instead of the deployment's parameters, which the Prefect API serves."""
    import logging

    from sweval.evaluators.config.model import EvalConfig
    from sweval.flows import serve
    from sweval.flows.settings import mask_passwords_in_logs

    mask_passwords_in_logs()
    logger = logging.getLogger("sweval.test.secrets")
    with caplog.at_level(logging.INFO, logger="sweval.test.secrets"):
        logger.info("View at %s", f"http://u:{SECRET_PREFECT}@127.0.0.1:4200/runs")
        try:
            raise RuntimeError(f"cannot reach postgresql://u:{SECRET_DATABASE}@db/x")
        except RuntimeError:
            logger.exception("failed")
    text = "\n".join(logging.Formatter().format(record) for record in caplog.records)
    assert "http://u:***@127.0.0.1:4200/runs" in text and "postgresql://u:***@db/x" in text
    assert SECRET_PREFECT not in text and SECRET_DATABASE not in text

    uri = f"http://u:{SECRET_TRACKING}@127.0.0.1:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = serve._secret_to_environment(EvalConfig(tracking_uri=uri))
    assert config.tracking_uri is None and os.environ["MLFLOW_TRACKING_URI"] == uri
    parameters = serve.build_deployment(config).parameters
    assert SECRET_TRACKING not in repr(parameters)
