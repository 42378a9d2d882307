"""``sweval ui`` in a real headless browser: the page it opens shows the latest evaluation's runs
and their charts (not MLflow's GenAI overview), the runs table's Dataset column shows the log
with its fingerprint, and the parent run's page shows the summary table.

Real processes only: ``sweval generate`` and ``sweval run`` write a small evaluation into a
temporary SQLite store, ``sweval ui`` serves it on a free loopback port (``$BROWSER`` is a script
that records the address it is asked to open), and Debian's Chromium renders each page headless
(``--dump-dom``); the charts' x axis reads the folds' dates. Every process is started in a session of its own and its whole group is
stopped at the end; the test checks that none is left.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop_group(process: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM to the process group, SIGKILL after ``grace`` s; then no member may be left."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.killpg(process.pid, signal.SIGKILL)
        time.sleep(0.5)
    process.wait(timeout=10)
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # the group is empty


def _sweval(*args: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "sweval.flows.cli.app", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _page_text(url: str, profile: Path) -> tuple[str, str]:
    """(the DOM, its visible text in one line) of ``url`` rendered by headless Chromium."""
    process = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1600,1000",
         "--virtual-time-budget=20000", "--dump-dom", url],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )
    try:
        dom, _ = process.communicate(timeout=180)
    finally:
        _stop_group(process, grace=5)
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return dom, re.sub(r"\s+", " ", text)


def _screenshot(url: str, profile: Path, path: Path) -> None:
    """A 1600 × 1000 screenshot of ``url`` rendered by headless Chromium."""
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1600,1000",
         "--virtual-time-budget=20000", "--hide-scrollbars", f"--screenshot={path}", url],
        capture_output=True, timeout=180, check=False, start_new_session=True)
    assert path.exists()


def _check_date_axis(dom: str, folds: pd.DataFrame) -> None:
    """Every chart's x axis is MLflow's "Time" and its ticks are dates within the folds' window
    starts (the metrics' timestamps), not fold indices."""
    from datetime import UTC, datetime, timedelta

    assert re.findall(r'class="g-xtitle".*?>([^<]*)</text>', dom) == ["Time"] * 4
    ticks = [html.unescape(t) for t in re.findall(r'class="xtick"><text[^>]*data-unformatted="([^"]*)"', dom)]
    assert ticks, "no x axis ticks in the charts"
    used = folds[~folds["skipped"]]
    first = datetime.fromtimestamp(int(used["t_start"].min()), UTC)
    last = datetime.fromtimestamp(int(used["t_start"].max()), UTC)
    for tick in ticks:  # "Jun 16<br>2015" or "Jun 17" (plotly's date ticks, the year once)
        day = datetime.strptime(f"{tick.split('<br>')[0]} {first.year}", "%b %d %Y").replace(
            tzinfo=UTC)
        assert first - timedelta(days=1) <= day <= last + timedelta(days=1), (tick, first, last)


@pytest.fixture
def evaluation(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    """A small generated log evaluated by ``sweval run`` into a store of its own."""
    home = tmp_path / "home"
    env = os.environ | {
        "SWEVAL_HOME": str(home),
        "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlflow.db'}",
        "PREFECT_HOME": str(home / "prefect"),
    }
    _sweval("generate", str(tmp_path / "log.csv"), "--scale", "0.02", "--days", "20",
            env=env, cwd=tmp_path)
    # --no-prefect: the same evaluation and MLflow logging without Prefect's temporary server
    _sweval("run", "--no-prefect", "--data", str(tmp_path / "log.csv"), "--folds", "5",
            "--u-min", "5", "--algorithms", "pop,pop-n,item-knn", "--no-progress",
            "--output", str(tmp_path / "out"), env=env, cwd=tmp_path)
    yield env, tmp_path / "out"


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")
def test_sweval_ui_opens_the_evaluation_in_a_browser(
    evaluation: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    env, output = evaluation
    opened = tmp_path / "opened.txt"
    recorder = tmp_path / "browser.sh"
    recorder.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {opened}\n')
    recorder.chmod(0o755)
    port = _free_port()
    log = open(tmp_path / "ui.log", "w")
    ui = subprocess.Popen(
        [sys.executable, "-m", "sweval.flows.cli.app", "ui", "--port", str(port)],
        env=env | {"BROWSER": str(recorder)}, cwd=tmp_path, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not opened.exists():
            assert ui.poll() is None, (tmp_path / "ui.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "sweval ui never opened the browser"
            time.sleep(0.5)
        url = opened.read_text().strip()
        printed = (tmp_path / "ui.log").read_text()
        assert f"latest evaluation: {url}" in printed  # the address is printed too
        base = f"http://127.0.0.1:{port}"
        assert url.startswith(f"{base}/#/experiments/") and "viewStateShareKey=sweval-latest" in url

        tracking = json.loads((output / "tracking.json").read_text())
        summary = pd.read_csv(output / "summary.csv")
        algorithms = ["pop", "pop-n", "item-knn"]

        # 1. the first page: the runs page with the evaluation's charts, not the GenAI overview
        dom, text = _page_text(url, tmp_path / "chromium-1")
        for attempt in range(2):  # on a loaded machine the charts may not be drawn in time
            if 'class="xtick"' in dom:
                break
            dom, text = _page_text(url, tmp_path / f"chromium-1-{attempt}")
        assert "Runs" in text and "matching runs" in text
        _check_date_axis(dom, pd.read_csv(output / "folds.csv"))
        if os.environ.get("SWEVAL_SCREENSHOTS"):  # how docs/mlflow-ui-comparison.png is made
            _screenshot(url, tmp_path / "chromium-shot",
                        Path(os.environ["SWEVAL_SCREENSHOTS"]) / "mlflow-ui-comparison.png")
        for algorithm in algorithms:
            assert f"Group: {algorithm} " in text  # a row (and a line in each chart) per algorithm
        assert "Model metrics (4)" in text  # the charts of recall_at_k per fold, k = 5, 10, 15, 20
        for genai in ("Tool calls", "Detect Issues", "Traces 0"):
            assert genai not in text

        # 2. the same view as a table: the Dataset column shows the log and its fingerprint
        table_url = url.replace("compareRunsMode=CHART", "compareRunsMode=TABLE")
        _, text = _page_text(table_url, tmp_path / "chromium-2")
        from sweval.data.loaders import load_log

        fingerprint = load_log(str(tmp_path / "log.csv")).fingerprint()
        assert "Dataset" in text
        assert f"log ({fingerprint}) evaluation" in text
        assert "log fold 0 (" in text

        # 3. the parent run's page: its description holds the summary table
        run_url = (f"{base}/#/experiments/{tracking['experiment_id']}/runs/"
                   f"{tracking['parent_run_id']}?workflowType=machine_learning")
        dom, text = _page_text(run_url, tmp_path / "chromium-3")
        assert "Description" in text and "<table" in dom
        assert "algorithm Recall@5 Recall@10 Recall@15 Recall@20 folds used/skipped" in text
        recall = summary[(summary["metric"] == "recall") & (summary["stratum"] == "all")]
        for algorithm in algorithms:
            mean = recall[(recall["algorithm"] == algorithm) & (recall["k"] == 10)]["mean"]
            assert f"{mean.iloc[0]:.4f}" in text
        assert "Sliding-window evaluation (SW-EVAL) of pop, pop-n, item-knn" in text
    finally:
        _stop_group(ui)
        log.close()
