"""docker-compose.yml: valid for docker-compose v1, complete, and the same topology as the loopback test.

With Debian's ``docker-compose`` (1.29.2, apt package ``docker-compose``; it needs no Docker engine)
on PATH, ``docker-compose config -q`` validates the file for real. Without it, that test is
skipped and the structural tests below still check what matters: services, health checks,
``depends_on`` conditions, volumes, that every variable the file uses is in ``.env.example``, and
that the servers' commands and environment variable names are those the loopback test runs.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from typing import Any

import pytest
import stack_helpers as stack
import yaml
from sweval_testing import REPO

pytestmark = pytest.mark.stack

COMPOSE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"

#: Keys docker-compose v1 (1.29, Compose spec) accepts at the top level; it rejects `name:`.
TOP_LEVEL_KEYS = {"version", "services", "volumes", "networks", "configs", "secrets"}
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
#: ${VAR}, ${VAR:-default}, ${VAR:?error}, $VAR; `$$` is an escaped dollar.
VARIABLE = re.compile(r"(?<!\$)\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f".env.example: {line!r} is not NAME=VALUE"
            values[name.strip()] = value
    return values


def environment(service: dict[str, Any]) -> dict[str, Any]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return env


# ------------------------------------------------------------------------- the real validator
def test_docker_compose_v1_config_validates() -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip(
            "docker-compose (v1) is not installed: apt-get install -y --no-install-recommends "
            "docker-compose; the structural tests below still ran"
        )
    # Only .env.example may supply the variables, not the caller's environment or a local .env.
    env = {k: v for k, v in os.environ.items() if k not in env_example()}
    for profile in ([], ["--profile", "dask"]):
        result = subprocess.run(
            [binary, "--env-file", str(ENV_EXAMPLE), "-f", str(COMPOSE), *profile, "config", "-q"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
        )
        assert result.returncode == 0, result.stderr
        assert "is not set" not in result.stderr, result.stderr


# ------------------------------------------------------------------------------- structure
def test_top_level_keys(compose: dict[str, Any]) -> None:
    unknown = {key for key in compose if not key.startswith("x-")} - TOP_LEVEL_KEYS
    assert not unknown, f"docker-compose v1 rejects top-level {sorted(unknown)}"
    assert "name" not in compose


def test_services(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == {
        "postgres", "mlflow", "prefect-server", "sweval-serve", "dask-scheduler", "dask-worker",
    }
    for name, service in services.items():
        assert "image" in service or "build" in service, name
    assert services["dask-scheduler"]["profiles"] == ["dask"]
    assert services["dask-worker"]["profiles"] == ["dask"]


def test_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    for name in ("postgres", "mlflow", "prefect-server", "dask-scheduler"):
        check = services[name].get("healthcheck")
        assert check, f"{name} has no healthcheck"
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
        for key in ("interval", "timeout", "start_period"):
            assert re.fullmatch(r"\d+s", check[key]), (name, key)
        assert int(check["retries"]) >= 1
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"][1]
    assert "/health" in " ".join(services["mlflow"]["healthcheck"]["test"])
    assert "/api/health" in " ".join(services["prefect-server"]["healthcheck"]["test"])


def test_depends_on_conditions(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on needs the long form (conditions)"
        for target, spec in depends.items():
            assert target in services, (name, target)
            assert spec["condition"] in CONDITIONS, (name, target)
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}'s health"
    expected = {
        "mlflow": {"postgres"},
        "prefect-server": {"postgres"},
        "sweval-serve": {"prefect-server", "mlflow"},
        "dask-worker": {"dask-scheduler"},
    }
    for name, targets in expected.items():
        depends = services[name]["depends_on"]
        assert set(depends) == targets, name
        assert all(spec["condition"] == "service_healthy" for spec in depends.values()), name


def test_volumes(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            assert target.startswith("/"), (name, volume)
            if source.startswith(("./", "/")):
                assert (REPO / source).exists(), f"{name}: bind mount {source} does not exist"
            elif not source.startswith("$"):
                assert source in declared, f"{name}: volume {source} is not declared"
                used.add(source)
    assert used == declared, f"declared but unused: {declared - used}"
    # Data enters through a mounted directory; the servers keep their state on volumes.
    assert "${SWEVAL_HOST_DATA_DIR}:/data:ro" in services["sweval-serve"]["volumes"]
    assert any(v.startswith("postgres-data:") for v in services["postgres"]["volumes"])
    assert any(v.startswith("mlflow-artifacts:") for v in services["mlflow"]["volumes"])


def test_every_variable_is_in_env_example() -> None:
    text = COMPOSE.read_text()
    used = {a or b for a, b in VARIABLE.findall(text)}
    assert used, "the compose file uses no variables?"
    missing = used - set(env_example())
    assert not missing, f"used by docker-compose.yml but not in .env.example: {sorted(missing)}"


def test_build_files_exist(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        build = service.get("build")
        if build:
            context = REPO / build["context"]
            assert (context / build["dockerfile"]).is_file(), name
    assert (REPO / "docker" / "postgres" / "init.sql").is_file()


def test_dockerfiles() -> None:
    project = (REPO / "docker" / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in project
    assert "pip install --no-cache-dir uv" in project
    assert "uv sync --locked --extra dask --extra server" in project  # Prefect on Postgres
    assert 'ENTRYPOINT ["sweval"]' in project
    mlflow_file = (REPO / "docker" / "mlflow.Dockerfile").read_text()
    # The server image's MLflow is the client's (the locked version) and has a Postgres driver.
    version = importlib.metadata.version("mlflow")
    assert f"FROM ghcr.io/mlflow/mlflow:v{version}" in mlflow_file
    # ... and the driver the loopback test runs MLflow on Postgres with (the `server` extra).
    driver = importlib.metadata.version("psycopg2-binary")
    assert f'"psycopg2-binary=={driver}"' in mlflow_file


def test_server_extra_has_the_drivers_of_the_compose_urls(
    services: dict[str, dict[str, Any]],
) -> None:
    """The `server` extra carries a driver for each Postgres URL the compose file uses."""
    import tomllib

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["server"]
    names = {re.split(r"[<>=\[ ;]", requirement, maxsplit=1)[0] for requirement in extra}
    mlflow_url = environment(services["mlflow"])["MLFLOW_BACKEND_STORE_URI"]
    prefect_url = environment(services["prefect-server"])["PREFECT_API_DATABASE_CONNECTION_URL"]
    # SQLAlchemy's default driver of postgresql:// is psycopg2; +asyncpg names its own.
    assert mlflow_url.startswith("postgresql://") and "psycopg2-binary" in names
    assert prefect_url.startswith("postgresql+asyncpg://") and "asyncpg" in names


def test_init_sql_creates_both_databases() -> None:
    sql = (REPO / "docker" / "postgres" / "init.sql").read_text()
    assert "CREATE DATABASE mlflow;" in sql
    assert "CREATE DATABASE prefect;" in sql
    assert "CREATE EXTENSION IF NOT EXISTS pg_trgm;" in sql


# -------------------------------------------------------- same topology as the loopback test
def test_mlflow_matches_loopback(services: dict[str, dict[str, Any]]) -> None:
    service = services["mlflow"]
    assert service["command"] == stack.MLFLOW_SERVER_COMMAND
    assert "entrypoint" not in service
    loopback = stack.mlflow_server_env(
        host="", port=0, workers=1, backend_store_uri="", artifacts_destination="",
        allowed_hosts="",
    )
    env = environment(service)
    assert set(env) == set(loopback)
    assert env["MLFLOW_BACKEND_STORE_URI"].startswith("postgresql://")
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    allowed = env_example()["MLFLOW_SERVER_ALLOWED_HOSTS"].split(",")
    assert "mlflow" in allowed and "mlflow:*" in allowed, "other containers call it `mlflow:5000`"


def test_prefect_server_matches_loopback(services: dict[str, dict[str, Any]]) -> None:
    service = services["prefect-server"]
    assert service["entrypoint"] + service["command"] == stack.PREFECT_SERVER_COMMAND
    loopback = stack.prefect_server_env(host="", port=0, database_url="", ui_api_url="", home="")
    env = environment(service)
    assert set(env) == set(loopback)
    assert env["PREFECT_API_DATABASE_CONNECTION_URL"].startswith("postgresql+asyncpg://")
    assert env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"


def test_runtime_env_matches_loopback(services: dict[str, dict[str, Any]]) -> None:
    loopback = stack.sweval_runtime_env(prefect_api_url="", mlflow_tracking_uri="")
    for name in ("sweval-serve", "dask-worker"):
        assert set(environment(services[name])) == set(loopback), name
    env = environment(services["sweval-serve"])
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"


def _flags(argv: list[str]) -> list[str]:
    return [arg for arg in argv if arg.startswith("--")]


def test_serve_and_dask_commands_match_loopback(services: dict[str, dict[str, Any]]) -> None:
    """Same programs and options; the values differ only where compose uses service names."""
    serve = ["sweval"] + services["sweval-serve"]["command"]
    loopback = stack.sweval_serve_command(
        config="c", cron="0 3 * * *", name="n", task_runner="dask", dask_address="tcp://h:1"
    )
    assert serve[:2] == loopback[:2] == ["sweval", "serve"]
    assert _flags(serve) == _flags(loopback)
    assert serve[serve.index("--dask-address") + 1] == "tcp://dask-scheduler:8786"

    scheduler = services["dask-scheduler"]
    argv = scheduler["entrypoint"] + scheduler["command"]
    loopback = stack.dask_scheduler_command(host="h", port=8786, dashboard=":8787")
    assert argv[:2] == loopback[:2] and _flags(argv) == _flags(loopback)
    assert argv[argv.index("--port") + 1] == "8786"

    worker = services["dask-worker"]
    argv = worker["entrypoint"] + worker["command"]
    assert argv == stack.dask_worker_command("tcp://dask-scheduler:8786")


def test_serve_default_config_is_valid(services: dict[str, dict[str, Any]]) -> None:
    """The evaluation the stack schedules out of the box (docker/serve.toml) validates."""
    from sweval.evaluators.config.model import EvalConfig

    mounts = services["sweval-serve"]["volumes"]
    assert "./docker/serve.toml:/etc/sweval/serve.toml:ro" in mounts
    assert env_example()["SWEVAL_SERVE_CONFIG"] == "/etc/sweval/serve.toml"
    config = EvalConfig.load(REPO / "docker" / "serve.toml")
    assert config.start is not None, "rolling (scheduled) runs need a fixed start"
    assert config.output.startswith("/runs/"), "the series state must live on the sweval-runs volume"


def test_postgres_major_version_matches_the_loopback_binaries(
    services: dict[str, dict[str, Any]],
) -> None:
    """The loopback test's Postgres (Debian's, when installed) is the compose image's major."""
    image = services["postgres"]["image"]
    assert re.fullmatch(r"postgres:\d+", image), image
    bin_dir = stack.postgres_bin_dir()
    if bin_dir is None or not bin_dir.parent.name.isdigit():
        pytest.skip("no Debian PostgreSQL installed here (/usr/lib/postgresql/N/bin)")
    assert image == f"postgres:{bin_dir.parent.name}"
