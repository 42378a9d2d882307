"""`sweval up` / `down` / `status` (flows.servers): real servers, real `sweval` processes.

Every ``sweval`` here runs as a subprocess with its own ``SWEVAL_HOME`` and ``PREFECT_HOME`` in
tmp_path, free loopback ports and a marker variable in its environment: the servers inherit
it, so :func:`_leftovers` finds any process of theirs still alive, whatever session it is in.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flow_helpers import marked_processes
from prefect_database import prefect_home
from sweval_testing import REPO, experiment_runs

from sweval.flows import servers

MARKER = "SWEVAL_SERVERS_TEST_ID"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _leftovers(marker: str) -> list[str]:
    """Live processes whose environment carries ``MARKER=marker``."""
    return marked_processes(MARKER, marker)


class Home:
    """A SWEVAL_HOME of its own and the environment of the `sweval` commands run in it."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "home"
        self.marker = uuid.uuid4().hex
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
        self.env |= {"SWEVAL_HOME": str(self.path),
                     "PREFECT_HOME": str(prefect_home(self.path / "prefect")),
                     MARKER: self.marker, "COLUMNS": "200"}

    def sweval(
        self, *args: str, timeout: float = 300, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sweval.flows.cli.app", *args], cwd=REPO, env=self.env | env,
            capture_output=True, text=True, timeout=timeout,
        )

    def state(self) -> dict[str, Any] | None:
        path = servers.SERVERS.path(self.path)
        return json.loads(path.read_text()) if path.exists() else None


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Home]:
    """A Home whose servers are stopped at the end, whatever the test did."""
    home = Home(tmp_path)
    yield home
    if home.state() is not None:
        home.sweval("down", timeout=60)
    for line in _leftovers(home.marker):  # the test fails on them; never leave them running
        os.kill(int(line.split()[0]), 9)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def _post(url: str, payload: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _csrf(prefect_url: str) -> dict[str, str]:
    """The headers of a write to `sweval up`'s Prefect server: a CSRF token of a client."""
    client = uuid.uuid4().hex
    token = _get(f"{prefect_url}/api/csrf-token?client={client}")["token"]
    return {"Prefect-Csrf-Token": token, "Prefect-Csrf-Client": client}


def _mlflow_parents(url: str, experiment: str) -> list[dict[str, Any]]:
    """The parent runs of ``experiment``, through the MLflow server's REST API."""
    found = _get(f"{url}/api/2.0/mlflow/experiments/get-by-name?"
                 + urllib.parse.urlencode({"experiment_name": experiment}))
    runs = _post(f"{url}/api/2.0/mlflow/runs/search",
                 {"experiment_ids": [found["experiment"]["experiment_id"]]}).get("runs", [])
    tags = [{t["key"]: t["value"] for t in run["data"].get("tags", [])} for run in runs]
    return [run | {"tags": t} for run, t in zip(runs, tags, strict=True)
            if "mlflow.parentRunId" not in t]


def _refused(url: str, method: str, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=b"{}" if method == "POST" else None,
                                     method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


RUN = ["run", "--window", "1D", "--folds", "7", "--k", "5,10", "--u-min", "5",
       "--algorithms", "pop,pop-n", "--no-progress"]


@pytest.mark.slow
def test_up_run_serve_status_down_leaves_nothing_and_runs_land_in_the_servers(
    home: Home, write_log, tmp_path: Path, prefect_api: str
) -> None:
    prefect_port, mlflow_port = _free_port(), _free_port()
    started = home.sweval("up", "--prefect-port", str(prefect_port),
                          "--mlflow-port", str(mlflow_port))
    assert started.returncode == 0, started.stderr
    prefect_url, mlflow_url = f"http://127.0.0.1:{prefect_port}", f"http://127.0.0.1:{mlflow_port}"
    assert prefect_url in started.stdout and mlflow_url in started.stdout
    state = home.state()
    assert state is not None and state["mlflow_store"] == f"sqlite:///{home.path / 'mlflow.db'}"
    assert (home.path / "prefect" / "server.pid").exists()  # Prefect's own background server

    again = home.sweval("up", "--prefect-port", str(prefect_port),
                        "--mlflow-port", str(mlflow_port))
    assert again.returncode == 0 and "already up" in again.stderr
    assert "is not used" not in again.stderr
    assert home.state() == state  # the same servers
    moved = home.sweval("up", "--mlflow-port", str(mlflow_port + 1))
    assert moved.returncode == 0 and home.state() == state
    assert (f"--mlflow-port {mlflow_port + 1} is not used: the MLflow server is up at "
            f"{mlflow_url}") in " ".join(moved.stderr.split())

    status = home.sweval("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count(" up") == 2 and prefect_url in status.stdout

    # the Prefect server accepts writes of its own origin only: CORS limited to its address,
    # a CSRF token required (a web page cannot get one: the token request needs a header
    # that a cross-origin page may not send)
    assert _refused(f"{prefect_url}/api/flows/filter", "POST",
                    {"Content-Type": "application/json"}) == 403
    assert _refused(f"{prefect_url}/api/flows/", "OPTIONS", {
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}) == 400
    assert _refused(f"{prefect_url}/api/flows/", "OPTIONS", {
        "Origin": prefect_url, "Access-Control-Request-Method": "POST"}) == 200
    # and only requests addressed to its own host (a page's, by DNS rebinding, is not)
    assert _refused(f"{prefect_url}/api/health", "GET", {"Host": "evil.example"}) == 400
    assert _refused(f"{prefect_url}/api/health", "GET", {}) == 200

    # a plain `sweval run` lands in both servers
    data = write_log(8)
    run = home.sweval(*RUN, "--data", str(data), "--output", str(tmp_path / "out"),
                      "--experiment", "test/up")
    assert run.returncode == 0, run.stderr[-4000:]
    assert "Traceback" not in run.stderr and "does not answer" not in run.stderr
    assert f"in {mlflow_url} (browse: {mlflow_url}/#/experiments/" in run.stdout
    assert "View run" not in run.stdout  # MLflow's own line per run: the last line says it
    [parent] = _mlflow_parents(mlflow_url, "test/up")
    assert parent["info"]["status"] == "FINISHED"
    flow_run_id = parent["tags"]["prefect.flow_run_id"]
    flow_run = _get(f"{prefect_url}/api/flow_runs/{flow_run_id}")
    assert flow_run["state_type"] == "COMPLETED"
    # its artifacts went where a plain run keeps them (next to the store), served by the server
    assert any((home.path / "mlartifacts").rglob("results.csv"))
    with urllib.request.urlopen(f"{mlflow_url}/get-artifact?path=results.csv&run_uuid="
                                f"{parent['info']['run_id']}", timeout=30) as response:
        assert response.read().startswith(b"fold,")

    # the same output, its store reached directly and then through the server again: the one
    # parent run, and the last line names the way it was reached this time
    direct = f"sqlite:///{home.path / 'mlflow.db'}"
    for uri, shown in ((direct, f"in {direct} (browse: sweval ui)"),
                       (None, f"in {mlflow_url} (browse: {mlflow_url}/#/experiments/")):
        rerun = home.sweval(*RUN, "--data", str(data), "--output", str(tmp_path / "out"),
                            "--experiment", "test/up",
                            **({"MLFLOW_TRACKING_URI": uri} if uri else {}))
        assert rerun.returncode == 0, rerun.stderr[-4000:]
        assert shown in rerun.stdout and parent["info"]["run_id"] in rerun.stdout, rerun.stdout
    assert [p["info"]["run_id"] for p in _mlflow_parents(mlflow_url, "test/up")] == [
        parent["info"]["run_id"]]

    # an explicit MLFLOW_TRACKING_URI and PREFECT_API_URL win over the servers
    other = f"sqlite:///{tmp_path / 'other' / 'mlflow.db'}"
    explicit = home.sweval(*RUN, "--data", str(data), "--output", str(tmp_path / "out2"),
                           "--experiment", "test/explicit", MLFLOW_TRACKING_URI=other,
                           PREFECT_API_URL=prefect_api)
    assert explicit.returncode == 0, explicit.stderr[-4000:]
    assert f"in {other}" in explicit.stdout
    names = {e["name"] for e in _get(
        f"{mlflow_url}/api/2.0/mlflow/experiments/search?max_results=100")["experiments"]}
    assert "test/up" in names and "test/explicit" not in names
    [elsewhere] = experiment_runs(other, "test/explicit")[0]
    other_run = elsewhere.data.tags["prefect.flow_run_id"]
    on_the_server = [r["id"] for r in _post(f"{prefect_url}/api/flow_runs/filter", {},
                                            _csrf(prefect_url))]
    assert flow_run_id in on_the_server and other_run not in on_the_server
    assert len(on_the_server) == 3  # the run and its two reruns
    assert _get(f"{prefect_api}/flow_runs/{other_run}")["state_type"] == "COMPLETED"

    # `sweval serve` finds the server as `sweval run` does (it refused without PREFECT_API_URL)
    serving = subprocess.Popen(
        [sys.executable, "-m", "sweval.flows.cli.app", "serve", "--data", str(data),
         "--window", "1D", "--u-min", "5", "--algorithms", "pop", "--name", "up-test",
         "--output", str(tmp_path / "served")], cwd=REPO, env=home.env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert serving.stderr is not None
        line = serving.stderr.readline()
        assert "serving sliding-window-eval/up-test" in line, line + serving.stderr.read()
        [deployment] = _post(f"{prefect_url}/api/deployments/filter", {}, _csrf(prefect_url))
        assert deployment["name"] == "up-test"
    finally:
        serving.terminate()
        serving.wait(timeout=60)

    stopped = home.sweval("down")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.count("stopped") == 2  # both servers
    assert home.state() is None and not (home.path / "prefect" / "server.pid").exists()
    assert _leftovers(home.marker) == []
    assert home.sweval("status").returncode == 1


@pytest.mark.slow
def test_a_taken_port_is_named_with_its_holder_and_nothing_starts(home: Home) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = home.sweval("up", "--prefect-port", str(_free_port()),
                             "--mlflow-port", str(port))
    assert result.returncode == 2
    message = " ".join(result.stderr.split())
    assert f"port {port} on 127.0.0.1 is taken (held by pid {os.getpid()}" in message
    assert "--mlflow-port" in message and "Traceback" not in result.stderr
    assert home.state() is None
    assert _leftovers(home.marker) == []


def _dead_pid() -> tuple[int, float]:
    import psutil

    process = subprocess.Popen(["true"])
    create_time = psutil.Process(process.pid).create_time()
    process.wait()
    return process.pid, create_time


def _write_state(home_path: Path, urls: dict[str, str], store: str = "",
                 pid: tuple[int, float] = (0, 0.0)) -> None:
    """A servers.json recording ``urls`` (by name), MLflow's with the leader ``pid``."""
    record: dict[str, Any] = {name: {"url": url} for name, url in urls.items()}
    if "mlflow" in record:
        record["mlflow"] |= {"pid": pid[0], "create_time": pid[1]}
    servers.SERVERS.write(home_path, record | {"mlflow_store": store})


def test_stale_state_shows_not_answering_and_down_forgets_it(home: Home) -> None:
    _write_state(home.path, {"prefect": f"http://127.0.0.1:{_free_port()}",
                             "mlflow": f"http://127.0.0.1:{_free_port()}"}, pid=_dead_pid())
    status = home.sweval("status", timeout=60)
    assert status.returncode == 1
    assert status.stdout.count("not answering") == 2
    stopped = home.sweval("down", timeout=60)
    assert stopped.returncode == 0 and stopped.stdout.count("was not running") == 2
    assert home.state() is None


@pytest.mark.slow
def test_down_names_the_commands_using_the_servers_and_stops_nothing_unless_forced(
    home: Home,
) -> None:
    """`sweval down` in the middle of a run failed the run (its MLflow logging, its Prefect
    states) without a word."""
    _write_state(home.path, {"mlflow": f"http://127.0.0.1:{_free_port()}"}, pid=_dead_pid())
    script = ("import sys, time\n"
              "from pathlib import Path\n"
              "from sweval.evaluators.units.locks import registered\n"
              "with registered(Path(sys.argv[1])):\n"
              "    print('ready', flush=True)\n"
              "    time.sleep(600)\n")
    user = subprocess.Popen([sys.executable, "-c", script, str(home.path / servers.USERS_FOLDER)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert user.stdout is not None and user.stdout.readline().strip() == "ready"
        refused = home.sweval("down", timeout=60)
        said = " ".join((refused.stdout + refused.stderr).split())
        assert refused.returncode == 2, said
        assert f"1 sweval command is using the servers: pid {user.pid}" in said
        assert "sweval down --force" in said and home.state() is not None
        assert f"in use by pid {user.pid}" in home.sweval("status", timeout=60).stdout
        forced = home.sweval("down", "--force", timeout=60)
        assert forced.returncode == 0 and "was not running" in forced.stdout
        assert home.state() is None
    finally:
        user.kill()
        user.wait(timeout=30)


def _health_server(path: str, body: bytes) -> Iterator[str]:
    """A loopback HTTP server answering ``path`` with ``body``, as a server's health check."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            ok = self.path == path
            self.send_response(200 if ok else 404)
            self.end_headers()
            self.wfile.write(body if ok else b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def healthy_mlflow() -> Iterator[str]:
    """A loopback HTTP server answering ``/health`` with ``OK``, as ``mlflow server`` does."""
    yield from _health_server("/health", b"OK")


def test_mlflow_commands_use_an_answering_server_unless_the_user_chose_a_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, healthy_mlflow: str
) -> None:
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _write_state(tmp_path, {"mlflow": healthy_mlflow}, store)
    notices: list[str] = []

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    servers.use_local_servers(prefect=False, say=notices.append)
    assert os.environ["MLFLOW_TRACKING_URI"] == healthy_mlflow and notices == []
    from sweval.evaluators.units.locks import registrants

    assert [user["pid"] for user in registrants(servers.users_folder())] == [os.getpid()]

    from sweval.flows.tracking.client import artifact_root, backing_store

    assert backing_store(healthy_mlflow) == store  # the server's own store, artifacts included
    assert artifact_root(healthy_mlflow) == tmp_path / "mlartifacts"

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///elsewhere.db")
    servers.use_local_servers(prefect=False, say=notices.append)
    assert os.environ["MLFLOW_TRACKING_URI"] == "sqlite:///elsewhere.db"


def test_each_server_that_answers_is_used_even_when_the_other_does_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, healthy_mlflow: str
) -> None:
    """One server that did not answer (MLflow busy past the 3 s health check, say) made a
    command use neither: `sweval serve` then refused ("schedules need a Prefect server: start
    one with `sweval up`") although `sweval up`'s Prefect server was up (issue 46)."""
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    silent = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    _write_state(tmp_path, {"prefect": silent, "mlflow": healthy_mlflow})
    notices: list[str] = []
    servers.use_local_servers(prefect=True, say=notices.append)
    assert os.environ["MLFLOW_TRACKING_URI"] == healthy_mlflow
    assert len(notices) == 1 and f"prefect ({silent})" in notices[0]


def test_a_recorded_server_that_does_not_answer_gets_one_notice_and_no_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    silent = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    _write_state(tmp_path, {"mlflow": silent})
    notices: list[str] = []
    servers.use_local_servers(prefect=False, say=notices.append)
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert len(notices) == 1 and silent in notices[0] and "sweval status" in notices[0]


def test_no_state_file_changes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    notices: list[str] = []
    servers.use_local_servers(prefect=True, say=notices.append)
    assert "MLFLOW_TRACKING_URI" not in os.environ and notices == []


def test_a_tracking_server_in_mlflow_tracking_uri_is_refused_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://user:secret@mlflow.example.org")
    with pytest.raises(servers.SwevalError) as raised:
        servers.mlflow_store()
    assert str(raised.value).startswith(
        "MLFLOW_TRACKING_URI=https://user:***@mlflow.example.org is a tracking server already")


def test_up_after_servers_that_died_starts_them_again_on_their_ports_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A state file left by killed servers: `sweval up` moved to the default ports (4200, 5000);
    now the servers come back on the recorded ports unless others are given, and it says so."""
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    started: list[tuple[str, int]] = []
    monkeypatch.setattr(servers, "_start_prefect", lambda port, log: started.append(("p", port)))
    monkeypatch.setattr(servers, "_start_mlflow", lambda port, log: started.append(("m", port)))
    monkeypatch.setattr(servers, "_wait", lambda urls, timeout, logs: None)
    prefect_port, mlflow_port, other_port = _free_port(), _free_port(), _free_port()
    _write_state(tmp_path, {"prefect": f"http://127.0.0.1:{prefect_port}",
                            "mlflow": f"http://127.0.0.1:{mlflow_port}"}, pid=_dead_pid())
    said: list[str] = []
    urls, new = servers.up({"prefect": None, "mlflow": None}, say=said.append)
    assert new and started == [("p", prefect_port), ("m", mlflow_port)]
    assert urls == {"prefect": f"http://127.0.0.1:{prefect_port}",
                    "mlflow": f"http://127.0.0.1:{mlflow_port}"}
    assert (f"the servers {tmp_path / 'servers.json'} records do not all answer: starting them "
            f"again on ports {prefect_port} (Prefect) and {mlflow_port} (MLflow)") in said
    assert servers.SERVERS.read(tmp_path) == {}  # the dead ones forgotten

    _write_state(tmp_path, {"prefect": f"http://127.0.0.1:{prefect_port}",
                            "mlflow": f"http://127.0.0.1:{mlflow_port}"}, pid=_dead_pid())
    servers.up({"prefect": None, "mlflow": other_port}, say=said.append)
    assert started[-2:] == [("p", prefect_port), ("m", other_port)]


def test_status_exits_as_its_help_says(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, healthy_mlflow: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0 when what is recorded answers, 1 when nothing is up or one does not answer."""
    from sweval.flows.cli.app import main

    def status(*args: str) -> int:
        monkeypatch.setattr(sys, "argv", ["sweval", "status", *args])
        try:
            main()
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    assert status() == 1 and "not up" in capsys.readouterr().out
    _write_state(tmp_path, {"mlflow": healthy_mlflow})
    assert status() == 0 and " up" in capsys.readouterr().out
    _write_state(tmp_path, {"mlflow": healthy_mlflow,
                            "prefect": f"http://127.0.0.1:{_free_port()}"})
    assert status() == 1 and "not answering" in capsys.readouterr().out

    assert status("--help") == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "Exit status 0 when the recorded servers all answer" in text
    assert "1 when nothing is up, or when one is not answering" in text


@pytest.mark.parametrize("pid", [0, 1, os.getpgrp()], ids=["0", "init", "own-group"])
def test_a_corrupt_state_file_never_gets_init_or_this_group_signalled(
        pid: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pid 0 (or 1) as MLflow's process group would send the stop signals to init's group."""
    monkeypatch.setenv("SWEVAL_HOME", str(tmp_path))
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    (tmp_path / "prefect").mkdir()
    (tmp_path / "prefect" / "server.pid").write_text(str(pid))
    signalled: list[tuple[int, int]] = []
    monkeypatch.setattr(servers.os, "killpg", lambda *a: signalled.append(a))
    monkeypatch.setattr(servers.os, "kill", lambda *a: signalled.append(a))
    monkeypatch.setattr(servers.subprocess, "run", lambda *a, **k: None)  # `prefect server stop`
    _write_state(tmp_path, {"prefect": "http://127.0.0.1:1", "mlflow": "http://127.0.0.1:2"},
                 pid=(pid, 0.0))
    assert servers.down() == {"prefect": False, "mlflow": False}
    assert signalled == []
