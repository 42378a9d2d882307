"""The production topology of docker-compose.yml, run as processes on 127.0.0.1.

No Docker engine is needed: this starts what the containers run, with the same commands and the
same environment variable names (tests/stack/test_compose.py checks that the two agree; the
mapping is in docs/production.md):

    postgres        Debian's postgres binaries + docker/postgres/init.sql   (sqlite without them)
    mlflow          mlflow server                      backend: Postgres (psycopg2), else sqlite
    prefect-server  prefect server start               database: Postgres (asyncpg), else sqlite
    dask-scheduler  dask scheduler
    dask-worker     dask worker
    sweval-serve    sweval serve                       the scheduled deployment + its runner

and then runs the flow through the served deployment (on the Dask cluster) and with ``sweval
run``, and checks the results in both APIs: the Prefect flow runs are COMPLETED (read with
the Prefect client) and MLflow holds the parent run with one child per algorithm and their
per-fold metrics (read through the REST API). Ports are free ports picked at run time, every
address is 127.0.0.1, and every process is stopped by process group; the last test asserts that
none is left.

Where Postgres is installed, both servers run on it, and the drivers come from the project's
``server`` extra (``uv sync --extra server``; the README's test command installs it): without
them the test fails rather than quietly falling back to sqlite. The runs are then also read
straight from the two databases with ``psql``. ``SWEVAL_STACK_POSTGRES=0`` forces the sqlite
fallback where Postgres is installed. Each service's output is copied to pytest's temporary
directory (``stack-logs*``) at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import stack_helpers as stack
from sweval_testing import REPO

pytestmark = pytest.mark.stack

BIN = Path(sys.executable).parent  # the venv's console scripts: mlflow, prefect, dask, sweval
HOST = stack.LOOPBACK
SERVER_TIMEOUT_S = 150  # measured 8-25 s each on 2 cores; generous for a loaded CI machine
FLOW_TIMEOUT_S = 180
POSTGRES_USER = "sweval"
POSTGRES_PASSWORD = "loopback"  # compose's POSTGRES_PASSWORD; the test cluster trusts loopback

#: A small evaluation: a generated log (it ends 2015-09-28 23:57 UTC), 3 daily folds, three fast
#: algorithms. A rolling run from START evaluates 3 complete windows too (the 28th is incomplete).
SMALL_RUN = {
    "scale": 0.02, "seed": 0, "window": "1D", "folds": 3, "k": [5, 10], "u_min": 10,
    "algorithms": ["pop", "pop-n", "item-knn"],
}
START = "2015-09-25"
DEPLOYMENT = "loopback"
CRON = "0 3 * * *"


@dataclass
class Stack:
    """The running topology: URLs, chosen backends and every started service."""

    marker: str
    tmp: Path
    logs: Path
    base_env: dict[str, str]
    services: list[stack.Service] = field(default_factory=list)
    backends: dict[str, str] = field(default_factory=dict)
    mlflow_url: str = ""
    prefect_api_url: str = ""
    dask_address: str = ""
    dask_dashboard_url: str = ""
    postgres_port: int | None = None
    serve_error: str | None = None

    def start(self, name: str, argv: list[str], env: dict[str, str], **kw: Any) -> stack.Service:
        service = stack.start(name, argv, env=self.base_env | env, log_dir=self.logs, **kw)
        self.services.append(service)
        return service

    def runtime_env(self) -> dict[str, str]:
        return stack.sweval_runtime_env(
            prefect_api_url=self.prefect_api_url, mlflow_tracking_uri=self.mlflow_url
        )

    def stop(self) -> None:
        """Stop every service, last started first, each by its process group."""
        for service in reversed(self.services):
            stack.stop(service)

    def startup_report(self) -> str:
        return ", ".join(
            f"{s.name} {s.ready_after_s:.1f}s" for s in self.services if s.ready_after_s is not None
        )


def _clean_environment(marker: str, tmp: Path) -> dict[str, str]:
    """The caller's environment without Prefect/MLflow/Dask/SW-EVAL settings, plus the marker;
    SW-EVAL's local state (and with it PREFECT_HOME) goes to ``tmp``."""
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("PREFECT_", "MLFLOW_", "DASK_", "SWEVAL_"))
    }
    env["SWEVAL_HOME"] = str(tmp / "sweval-home")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env[stack.MARKER_VAR] = marker
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def _start_postgres(s: Stack) -> None:
    """initdb + postgres on loopback, then docker/postgres/init.sql through psql, as compose does."""
    bin_dir = stack.postgres_bin_dir()
    assert bin_dir is not None
    user = stack.postgres_user()
    pg_dir = s.tmp / "postgres"
    pg_dir.mkdir()
    if user is not None:
        shutil.chown(pg_dir, user)
    data = pg_dir / "data"
    subprocess.run(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", POSTGRES_USER, "--auth=trust",
         "-E", "UTF8", "--no-sync"],
        check=True, capture_output=True, user=user, env=s.base_env, timeout=60,
    )
    port = stack.free_port()
    service = s.start(
        "postgres",
        [str(bin_dir / "postgres"), "-D", str(data), "-h", HOST, "-p", str(port),
         "-k", str(pg_dir), "-c", "fsync=off", "-c", "full_page_writes=off"],
        env={}, user=user,
    )
    # The compose healthcheck's command.
    ready = [str(bin_dir / "pg_isready"), "-h", HOST, "-p", str(port), "-U", POSTGRES_USER,
             "-d", "prefect"]
    stack.wait_until(
        service, lambda: subprocess.run(ready, check=False, capture_output=True).returncode == 0,
        timeout_s=60, what="accepting connections",
    )
    subprocess.run(
        [str(bin_dir / "psql"), "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", str(port),
         "-U", POSTGRES_USER, "-d", "postgres", "-f", str(REPO / "docker/postgres/init.sql")],
        check=True, capture_output=True, env=s.base_env, timeout=60,
    )
    s.postgres_port = port


def _postgres_url(s: Stack, driver: str, database: str) -> str:
    return (
        f"postgresql{driver}://{POSTGRES_USER}:{POSTGRES_PASSWORD}@{HOST}:{s.postgres_port}"
        f"/{database}"
    )


def _require_server_extra() -> None:
    """The Postgres drivers of the ``server`` extra: psycopg2 (MLflow), asyncpg (Prefect)."""
    import importlib.util

    missing = [name for name in ("psycopg2", "asyncpg") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(
            f"Postgres is installed but its drivers are not ({', '.join(missing)}): install the "
            "server extra (uv sync --locked --extra dask --extra server), or set "
            "SWEVAL_STACK_POSTGRES=0 to test on sqlite", pytrace=False,
        )


def _psql(s: Stack, database: str, query: str) -> list[str]:
    """Rows of ``query`` on ``database`` of the test's Postgres, one string per row."""
    bin_dir = stack.postgres_bin_dir()
    assert bin_dir is not None
    result = subprocess.run(
        [str(bin_dir / "psql"), "-h", HOST, "-p", str(s.postgres_port), "-U", POSTGRES_USER,
         "-d", database, "-At", "-v", "ON_ERROR_STOP=1", "-c", query],
        check=True, capture_output=True, text=True, env=s.base_env, timeout=60,
    )
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    marker = uuid.uuid4().hex
    tmp = Path(tempfile.mkdtemp(prefix="sweval-stack-"))
    tmp.chmod(0o755)  # Postgres may run as another user (root hands it to `postgres`)
    logs = tmp / "logs"
    logs.mkdir()
    s = Stack(marker=marker, tmp=tmp, logs=logs, base_env=_clean_environment(marker, tmp))
    try:
        # postgres (when Debian's binaries are here) ------------------------------------------
        if os.environ.get("SWEVAL_STACK_POSTGRES") == "0":
            s.backends["prefect"] = s.backends["mlflow"] = "sqlite (SWEVAL_STACK_POSTGRES=0)"
        elif stack.postgres_bin_dir() is None:
            s.backends["prefect"] = s.backends["mlflow"] = "sqlite (no postgres binaries)"
        else:
            _require_server_extra()
            _start_postgres(s)
            s.backends["prefect"] = s.backends["mlflow"] = "postgres"

        # mlflow and prefect-server, started together (each takes 8-25 s) -------------------
        mlflow_port, prefect_port = stack.free_port(), stack.free_port()
        backend = (
            _postgres_url(s, "", "mlflow") if s.backends["mlflow"] == "postgres"
            else f"sqlite:///{tmp}/mlflow.db"
        )
        mlflow = s.start("mlflow", stack.MLFLOW_SERVER_COMMAND, stack.mlflow_server_env(
            host=HOST, port=mlflow_port, workers=1, backend_store_uri=backend,
            artifacts_destination=str(tmp / "mlartifacts"),
            allowed_hosts=f"mlflow,mlflow:*,localhost,localhost:*,{HOST},{HOST}:*",
        ))
        database = (
            _postgres_url(s, "+asyncpg", "prefect") if s.backends["prefect"] == "postgres"
            else f"sqlite+aiosqlite:///{tmp}/prefect.db"
        )
        prefect = s.start("prefect-server", stack.PREFECT_SERVER_COMMAND, stack.prefect_server_env(
            host=HOST, port=prefect_port, database_url=database,
            ui_api_url=f"http://{HOST}:{prefect_port}/api", home=str(tmp / "prefect-home"),
        ))
        s.mlflow_url = f"http://{HOST}:{mlflow_port}"
        s.prefect_api_url = f"http://{HOST}:{prefect_port}/api"

        # dask-scheduler and one dask-worker, meanwhile ---------------------------------------
        dask_port, dashboard_port = stack.free_port(), stack.free_port()
        s.dask_address = f"tcp://{HOST}:{dask_port}"
        s.dask_dashboard_url = f"http://{HOST}:{dashboard_port}"
        scheduler = s.start("dask-scheduler", stack.dask_scheduler_command(
            host=HOST, port=dask_port, dashboard=f"{HOST}:{dashboard_port}"
        ), {})
        # A worker otherwise listens on every interface (its comm and, even with --no-dashboard,
        # its HTTP server); in compose that is the container's own network, here it is the host's.
        worker = s.start(
            "dask-worker",
            stack.dask_worker_command(s.dask_address)
            + ["--host", HOST, "--dashboard-address", f"{HOST}:0"],
            s.runtime_env() | {"DASK_TEMPORARY_DIRECTORY": str(tmp / "dask-scratch")},
        )
        stack.wait_all([
            (mlflow, lambda: stack.http_ok(f"{s.mlflow_url}/health"), "healthy"),
            (prefect, lambda: stack.http_ok(f"{s.prefect_api_url}/health"), "healthy"),
            (scheduler, lambda: stack.http_ok(f"{s.dask_dashboard_url}/health"), "healthy"),
            (worker, lambda: _dask_workers(s) >= 1, "registered with the scheduler"),
        ], timeout_s=SERVER_TIMEOUT_S)

        # sweval-serve: registers the scheduled deployment, fold tasks on the Dask cluster -------
        config = tmp / "serve.toml"
        config.write_text(_toml(SMALL_RUN | {
            "start": START, "output": str(tmp / "runs" / "scheduled"),
            "experiment": "loopback/scheduled",
        }))
        serve = s.start("sweval-serve", stack.sweval_serve_command(
            config=str(config), cron=CRON, name=DEPLOYMENT, task_runner="dask",
            dask_address=s.dask_address,
        ), s.runtime_env(), cwd=tmp)
        try:
            stack.wait_until(
                serve, lambda: _deployment(s) is not None, timeout_s=SERVER_TIMEOUT_S,
                what="serving its deployment",
            )
        except (RuntimeError, TimeoutError) as exc:  # only the tests that need it fail
            s.serve_error = str(exc)
        print(f"\nstack up ({s.backends}): {s.startup_report()}")
        yield s
    finally:
        s.stop()
        left = stack.leftovers(marker)
        if left:
            stack.kill_marked(marker)
            print(f"processes left behind (killed now): {left}")
        kept = tmp_path_factory.mktemp("stack-logs")
        shutil.copytree(logs, kept, dirs_exist_ok=True)  # every service's output, for failures
        shutil.rmtree(tmp, ignore_errors=True)


def _dask_workers(s: Stack) -> int:
    with urllib.request.urlopen(f"{s.dask_dashboard_url}/json/identity.json", timeout=5) as response:
        return len(json.load(response).get("workers", {}))


# ----------------------------------------------------------------------------------- helpers
def _dask_tasks_done(s: Stack, prefix: str) -> float:
    """How many tasks named ``prefix`` reached memory on the scheduler (its Prometheus metrics)."""
    with urllib.request.urlopen(f"{s.dask_dashboard_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    wanted = f'{{state="memory",task_prefix_name="{prefix}"}}'
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
        if line.startswith("dask_scheduler_prefix_state_totals") and wanted in line
    )


def _mlflow_get(s: Stack, path: str, **params: str) -> dict[str, Any]:
    url = f"{s.mlflow_url}/api/2.0/mlflow/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def _mlflow_post(s: Stack, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{s.mlflow_url}/api/2.0/mlflow/{path}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"}, method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def _search_runs(s: Stack, experiment_id: str, filter_string: str) -> list[dict[str, Any]]:
    body = {"experiment_ids": [experiment_id], "filter": filter_string, "max_results": 100}
    return _mlflow_post(s, "runs/search", body).get("runs", [])


def _tags(run: dict[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def _metric_keys(run: dict[str, Any]) -> set[str]:
    return {m["key"] for m in run["data"].get("metrics", [])}


def _check_mlflow_runs(s: Stack, *, experiment: str, flow_run_id: str, n_folds: int) -> None:
    """The parent run of ``flow_run_id`` and one child per algorithm, with per-fold metrics."""
    found = _mlflow_get(s, "experiments/get-by-name", experiment_name=experiment)
    experiment_id = found["experiment"]["experiment_id"]
    parents = _search_runs(s, experiment_id, f"tags.`prefect.flow_run_id` = '{flow_run_id}'")
    assert len(parents) == 1, parents
    parent = parents[0]
    assert parent["info"]["status"] == "FINISHED"
    children = _search_runs(
        s, experiment_id, f"tags.mlflow.parentRunId = '{parent['info']['run_id']}'"
    )
    assert sorted(_tags(c)["mlflow.runName"] for c in children) == sorted(SMALL_RUN["algorithms"])
    for child in children:
        assert child["info"]["status"] == "FINISHED"
        assert {"recall_at_5", "recall_at_10", "n_eligible"} <= _metric_keys(child)
        history = _mlflow_get(
            s, "metrics/get-history", run_id=child["info"]["run_id"], metric_key="recall_at_10"
        )["metrics"]
        assert sorted(m["step"] for m in history) == list(range(n_folds))
    # Artifacts went through the server's proxy to its --artifacts-destination.
    artifacts = _mlflow_get(s, "artifacts/list", run_id=parent["info"]["run_id"])
    assert "results.csv" in {f["path"] for f in artifacts.get("files", [])}


def _toml(values: dict[str, Any]) -> str:
    return "".join(f"{key} = {json.dumps(value)}\n" for key, value in values.items())


@contextlib.contextmanager
def _prefect_client(s: Stack) -> Iterator[Any]:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings({PREFECT_API_URL: s.prefect_api_url}),
        get_client(sync_client=True) as client,
    ):
        yield client


def _deployment(s: Stack) -> Any:
    from prefect.exceptions import ObjectNotFound

    with _prefect_client(s) as client:
        try:
            return client.read_deployment_by_name(f"sliding-window-eval/{DEPLOYMENT}")
        except ObjectNotFound:
            return None


def _wait_final(s: Stack, flow_run_id: Any, watch: stack.Service) -> Any:
    """The flow run once it is final; fails early when ``watch`` (who runs it) dies."""
    deadline = time.monotonic() + FLOW_TIMEOUT_S
    while time.monotonic() < deadline:
        flow_run = _flow_run(s, flow_run_id)
        if flow_run.state is not None and flow_run.state.is_final():
            return flow_run
        assert watch.proc.poll() is None, f"{watch.name} died:\n{watch.log_tail()}"
        time.sleep(1)
    raise TimeoutError(f"flow run {flow_run_id} not final:\n{watch.log_tail()}")


def _flow_run(s: Stack, flow_run_id: str) -> Any:
    with _prefect_client(s) as client:
        return client.read_flow_run(flow_run_id)


# ------------------------------------------------------------------------------------- tests
def test_servers_run_on_postgres_where_it_is_installed(topology: Stack) -> None:
    """Where Postgres is installed (and not turned off), MLflow and Prefect both store in it."""
    s = topology
    if os.environ.get("SWEVAL_STACK_POSTGRES") == "0" or stack.postgres_bin_dir() is None:
        pytest.skip(f"no Postgres here: {s.backends}")
    assert s.backends == {"prefect": "postgres", "mlflow": "postgres"}
    # Both servers created their schemas in their own database (docker/postgres/init.sql's).
    assert "experiments" in _psql(s, "mlflow", "SELECT tablename FROM pg_tables")
    assert "flow_run" in _psql(s, "prefect", "SELECT tablename FROM pg_tables")


def test_servers_are_up_on_loopback(topology: Stack) -> None:
    s = topology
    assert stack.http_ok(f"{s.mlflow_url}/health")
    assert stack.http_ok(f"{s.prefect_api_url}/health")
    for service in s.services:
        assert service.proc.poll() is None, f"{service.name} died:\n{service.log_tail()}"


def test_mlflow_answers_the_compose_service_name_only_when_allowed(topology: Stack) -> None:
    """MLFLOW_SERVER_ALLOWED_HOSTS: `Host: mlflow:5000` (other containers) passes, others get 403."""
    url = f"{topology.mlflow_url}/api/2.0/mlflow/experiments/search?max_results=1"
    assert stack.http_status(url, host_header="mlflow:5000") == 200
    assert stack.http_status(url, host_header="localhost:5000") == 200
    assert stack.http_status(url, host_header="attacker.example:5000") == 403


def _require_serve(s: Stack) -> stack.Service:
    if s.serve_error is not None:
        pytest.fail(f"`sweval serve` did not come up: {s.serve_error}", pytrace=False)
    return next(x for x in s.services if x.name == "sweval-serve")


def test_serve_registered_the_scheduled_deployment(topology: Stack) -> None:
    _require_serve(topology)
    deployment = _deployment(topology)
    assert deployment.schedules[0].schedule.cron == CRON
    assert deployment.parameters["rolling"] is True
    assert deployment.parameters["config"]["start"] == START
    assert deployment.parameters["config"]["task_runner"] == "dask"


def test_deployment_run_completes_on_dask_and_logs_to_mlflow(topology: Stack) -> None:
    """A run of the served deployment: COMPLETED in Prefect, parent + child runs in MLflow."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    s = topology
    serve = _require_serve(s)
    with temporary_settings({PREFECT_API_URL: s.prefect_api_url}):
        started = run_deployment(f"sliding-window-eval/{DEPLOYMENT}", timeout=0)
    flow_run = _wait_final(s, started.id, serve)
    if "No module named 'sliding_window'" in serve.log_tail(200_000):
        pytest.fail(
            "the deployment's flow runs load flows/sliding_window.py as a script (module "
            "`sliding_window`), so Dask workers cannot unpickle its tasks: flows/serve.py must "
            "build the deployment with entrypoint_type=EntrypointType.MODULE_PATH "
            "(entrypoint sweval.flows.sliding_window.sliding_window_eval)", pytrace=False,
        )
    assert flow_run.state.is_completed(), f"{flow_run.state}\n{serve.log_tail()}"
    _check_mlflow_runs(
        s, experiment="loopback/scheduled", flow_run_id=str(flow_run.id), n_folds=3
    )
    # The fold tasks ran on the Dask cluster (its scheduler counts them), not in the serve process.
    assert _dask_tasks_done(s, "evaluate_fold") >= 3


def test_sweval_run_against_the_stack(topology: Stack) -> None:
    """`sweval run` with PREFECT_API_URL and --tracking-uri: the flow run is on the server."""
    s = topology
    output = s.tmp / "runs" / "adhoc"
    argv = [
        "sweval", "run", "--scale", str(SMALL_RUN["scale"]), "--seed", str(SMALL_RUN["seed"]),
        "--window", SMALL_RUN["window"], "--folds", str(SMALL_RUN["folds"]),
        "--k", ",".join(map(str, SMALL_RUN["k"])), "--u-min", str(SMALL_RUN["u_min"]),
        "--algorithms", ",".join(SMALL_RUN["algorithms"]), "--output", str(output),
        "--experiment", "loopback/adhoc", "--tracking-uri", s.mlflow_url, "--no-progress",
        "--cache", str(s.tmp / "adhoc-units"),  # its own store: every fold a task (not reused)
    ]
    env = {"PREFECT_API_URL": s.prefect_api_url}  # MLflow only through --tracking-uri
    run = s.start("sweval-run", argv, env, cwd=s.tmp)
    try:
        run.proc.wait(timeout=FLOW_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"sweval run did not finish:\n{run.log_tail()}")
    assert run.proc.returncode == 0, run.log_tail()
    assert (output / "results.csv").is_file()
    record = json.loads((output / "tracking.json").read_text())
    assert record["tracking_uri"] == s.mlflow_url
    parent = _mlflow_get(s, "runs/get", run_id=record["parent_run_id"])["run"]
    flow_run_id = _tags(parent)["prefect.flow_run_id"]
    flow_run = _flow_run(s, flow_run_id)
    assert flow_run.state.is_completed(), flow_run.state
    assert flow_run.deployment_id is None  # a direct flow call, not a deployment run
    _check_mlflow_runs(
        s, experiment="loopback/adhoc", flow_run_id=flow_run_id, n_folds=SMALL_RUN["folds"]
    )
    if s.postgres_port is not None:  # the same run, read from the databases themselves
        parent_id = record["parent_run_id"]
        assert _psql(s, "mlflow", f"SELECT status FROM runs WHERE run_uuid = '{parent_id}'") == [
            "FINISHED"
        ]
        children = _psql(s, "mlflow", (
            "SELECT r.name, r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
            f"WHERE t.key = 'mlflow.parentRunId' AND t.value = '{parent_id}' ORDER BY r.name"
        ))
        assert children == [f"{name}|FINISHED" for name in sorted(SMALL_RUN["algorithms"])]
        n_steps = _psql(s, "mlflow", (
            "SELECT count(DISTINCT m.step) FROM metrics m JOIN tags t ON t.run_uuid = m.run_uuid "
            f"WHERE t.key = 'mlflow.parentRunId' AND t.value = '{parent_id}' "
            "AND m.key = 'recall_at_10'"
        ))
        assert n_steps == [str(SMALL_RUN["folds"])]
        assert _psql(s, "prefect", (
            f"SELECT state_type FROM flow_run WHERE id = '{flow_run_id}'"
        )) == ["COMPLETED"]
        fold_tasks = _psql(s, "prefect", (
            "SELECT count(*) FROM task_run WHERE flow_run_id = "
            f"'{flow_run_id}' AND state_type = 'COMPLETED' AND name LIKE 'fold-%'"
        ))
        assert fold_tasks == [str(SMALL_RUN["folds"])]


def test_every_listener_is_on_loopback(topology: Stack) -> None:
    found = stack.listeners(topology.marker)
    assert found, "no listening socket found at all?"
    outside = [f for f in found if f[1] not in ("127.0.0.1", "::1")]
    assert not outside, outside


def test_stop_leaves_no_process_behind(topology: Stack) -> None:
    topology.stop()
    time.sleep(0.5)
    assert stack.leftovers(topology.marker) == []
    for service in topology.services:
        assert service.proc.returncode is not None, service.name
        assert not stack.group_alive(service.pgid), service.name
