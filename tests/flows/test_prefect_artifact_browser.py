"""The summary artifact of a run in Prefect's own UI, rendered by headless Chromium.

Real processes: ``prefect server start`` (with its UI) on a free loopback port and a home of its
own, ``sweval run`` reporting to it (``PREFECT_API_URL``), then Chromium on the UI's page of the
artifact's key (``/artifacts/key/<key>``, its history of versions) and on the latest version's
page (``/artifacts/artifact/<id>``): the summary table, its numbers as summary.csv has them. A screenshot goes to ``$SWEVAL_SCREENSHOTS`` when that is set (how
docs/prefect-artifact.png is made). Skipped where Chromium is not installed.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from prefect_database import prefect_home
from test_mlflow_browser import _free_port, _stop_group

from sweval.evaluators.config.model import EvalConfig
from sweval.flows.prefect_ui import artifact_key

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)"),
]


def _chromium(url: str, profile: Path, *args: str) -> str:
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,900",
         "--hide-scrollbars", "--virtual-time-budget=20000", *args, url],
        capture_output=True, text=True, timeout=180, check=False, start_new_session=True)
    return done.stdout


def _wait_healthy(base: str, server: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"{base}/api/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the Prefect server did not start"
        time.sleep(1)


def _text(dom: str) -> str:
    """The visible text of a DOM, in one line."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def _drawn(url: str, profile: Path, marker: str) -> str:
    """The DOM of ``url`` once it holds ``marker`` (three tries: a loaded machine may not have
    drawn the page within Chromium's time budget)."""
    for attempt in range(3):
        dom = _chromium(url, profile.with_name(f"{profile.name}-{attempt}"), "--dump-dom")
        if marker in dom:
            break
    return dom


def _latest_id(base: str, key: str) -> str:
    """The id of the latest artifact of ``key`` (Prefect's REST API)."""
    request = urllib.request.Request(
        f"{base}/api/artifacts/filter", method="POST",
        data=json.dumps({"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC",
                         "limit": 1}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())[0]["id"]


def test_the_summary_artifact_reads_in_prefect_s_ui(write_log, tmp_path: Path) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = os.environ | {
        "PREFECT_HOME": str(prefect_home(tmp_path / "prefect")), "PREFECT_API_URL": f"{base}/api",
        "SWEVAL_HOME": str(tmp_path / "home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "true",
    }
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
    try:
        _wait_healthy(base, server, log)
        data, output = write_log(8), tmp_path / "out"
        done = subprocess.run(
            [sys.executable, "-m", "sweval.flows.cli.app", "run", "--data", str(data),
             "--window", "1D", "--folds", "4", "--start", "2024-01-02", "--k", "5,10",
             "--u-min", "5", "--algorithms", "pop,pop-n", "--output", str(output),
             "--no-tracking", "--no-progress", "--no-report"],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        key = artifact_key(EvalConfig.build(data=str(data), output=str(output)))
        # the key's page: the key's latest description (its history of versions below it is
        # drawn lazily, too late for a loaded machine's Chromium to be read reliably)
        latest = _text(_drawn(f"{base}/artifacts/key/{key}", tmp_path / "key", "units computed"))
        assert key in latest and "6 units computed, 0 reused" in latest, latest[-2000:]
        # the latest version's page: the summary table
        url = f"{base}/artifacts/artifact/{_latest_id(base, key)}"
        dom = _drawn(url, tmp_path / "artifact", "<table")
        if os.environ.get("SWEVAL_SCREENSHOTS"):
            shot = Path(os.environ["SWEVAL_SCREENSHOTS"]) / "prefect-artifact.png"
            _chromium(url, tmp_path / "chromium-shot", f"--screenshot={shot}")
            assert shot.exists()
        text = _text(dom)
        assert "<table" in dom and "algorithm metric k mean ci_low ci_high n_folds" in text, \
            text[-2000:]
        assert "Flow Run log-w1D · pop+pop-n" in text  # the flow run that made it, by its name
        summary = pd.read_csv(output / "summary.csv")
        for row in summary[summary["stratum"] == "all"].itertuples():
            shown = repr(round(row.mean, 4)).removesuffix(".0")  # as JavaScript prints it
            assert f" {shown} " in f" {text} ", (row.algorithm, row.mean)
    finally:
        _stop_group(server)
