"""The MLflow UI can show a flow's results: `mlflow server` (loopback only) on the produced store,
read through its REST API (the endpoints the UI itself calls)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweval.flows.sliding_window import sliding_window_eval
from sweval.flows.tracking import server_command, server_env

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def mlflow_server(mlflow_uri: str, tmp_path: Path) -> Iterator[str]:
    """``mlflow server`` on 127.0.0.1 in its own process group, killed (group) at the end."""
    port = _free_port()
    log = open(tmp_path / "mlflow-server.log", "wb")
    process = subprocess.Popen(
        server_command(mlflow_uri, host="127.0.0.1", port=port, workers=1),
        env=server_env(mlflow_uri), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, (tmp_path / "mlflow-server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "mlflow server did not become healthy"
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass
        log.close()


def _get(url: str, endpoint: str, **query: Any) -> Any:
    address = f"{url}{endpoint}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(address, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body[:1] in (b"{", b"[") else body


def _post(url: str, path: str, payload: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{url}{path}", data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_mlflow_server_shows_the_runs_of_a_flow(
    write_log, make_config, mlflow_uri: str, mlflow_server: str
) -> None:
    config = make_config(write_log(8))
    sliding_window_eval(config=config)
    url = mlflow_server
    results = pd.read_csv(Path(config.output) / "results.csv")

    assert b"<html" in _get(url, "/").lower()  # the UI's page
    experiment = _get(url, "/api/2.0/mlflow/experiments/get-by-name",
                      experiment_name=config.experiment)["experiment"]
    runs = _post(url, "/api/2.0/mlflow/runs/search",
                 {"experiment_ids": [experiment["experiment_id"]], "max_results": 100})["runs"]
    tags = [{t["key"]: t["value"] for t in run["data"].get("tags", [])} for run in runs]
    parents = [run for run, t in zip(runs, tags, strict=True) if "mlflow.parentRunId" not in t]
    children = {t["mlflow.runName"]: run for run, t in zip(runs, tags, strict=True)
                if "mlflow.parentRunId" in t}
    assert len(parents) == 1 and sorted(children) == ["pop", "pop-n"]

    pop = children["pop"]["info"]["run_id"]
    history = _get(url, "/api/2.0/mlflow/metrics/get-history", run_id=pop,
                   metric_key="recall_at_10")["metrics"]
    expected = results[(results["algorithm"] == "pop") & (results["metric"] == "recall")
                       & (results["k"] == 10) & ~results["skipped"]]
    assert sorted(int(m["step"]) for m in history) == sorted(expected["fold"])
    assert {int(m["step"]): m["value"] for m in history} == pytest.approx(
        dict(zip(expected["fold"], expected["value"], strict=True)), rel=1e-9
    )
    # The results table, as the UI's artifact viewer fetches it.
    parent = parents[0]["info"]["run_id"]
    csv = _get(url, "/get-artifact", path="results.csv", run_uuid=parent)
    assert csv.decode().splitlines()[0].startswith("fold,t_start,t_end,algorithm")
