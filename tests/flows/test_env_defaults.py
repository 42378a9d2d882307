"""Importing ``sweval.flows`` changes nothing; the entry points set SW-EVAL's Prefect defaults.

Each check runs in a fresh interpreter whose environment has none of the defaults (the test
session's own environment has them: ``tests/conftest.py`` applies them): those are ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweval.flows.settings import PREFECT_DEFAULTS

REPO = Path(__file__).resolve().parents[2]

#: Prints the variables the snippet before it changed, as JSON, on the last line.
_DIFF = """
import json, os
print(json.dumps({k: v for k, v in os.environ.items() if BEFORE.get(k) != v}))
"""


def _run(code: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in PREFECT_DEFAULTS and k not in ("PREFECT_HOME", "PREFECT_API_URL")}
    env["SWEVAL_HOME"] = str(home)
    script = "import os\nBEFORE = dict(os.environ)\n" + code + _DIFF
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_flows_package_and_its_modules_leaves_the_environment_alone(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    code = (
        "import sweval.flows\n"
        "import sweval.flows.cli.app, sweval.flows.cli.compare, sweval.flows.cli.compare_tables\n"
        "import sweval.flows.tracking, sweval.flows.cli.report, sweval.flows.settings\n"
    )
    assert _run(code, home) == {}
    assert not home.exists()  # nor creates PREFECT_HOME


@pytest.mark.slow  # a fresh interpreter
def test_the_sweval_command_sets_the_defaults_before_prefect(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code = (
        "import sys\n"
        "from sweval.flows.cli.app import main\n"
        "sys.argv = ['sweval', 'generate', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert 'prefect' not in sys.modules\n"
    )
    changed = _run(code, home)
    assert changed == PREFECT_DEFAULTS | {"PREFECT_HOME": str(home / "prefect")}
    assert (home / "prefect").is_dir()


@pytest.mark.slow  # a fresh interpreter
def test_python_m_sliding_window_sets_the_defaults_before_prefect_reads_them(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    code = (
        "import runpy, sys\n"
        "sys.argv = ['sliding_window', '--help']\n"
        "try:\n"
        "    runpy.run_module('sweval.flows.sliding_window', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "from prefect.settings import get_current_settings\n"
        "settings = get_current_settings()\n"
        "assert str(settings.home) == os.environ['PREFECT_HOME'], settings.home\n"
        "assert settings.server.ephemeral.startup_timeout_seconds == 120\n"
    )
    changed = _run(code, home)
    assert changed["PREFECT_HOME"] == str(home / "prefect")
    assert {k: changed.get(k) for k in PREFECT_DEFAULTS} == PREFECT_DEFAULTS


_HEARTBEAT = (
    "from prefect.settings import get_current_settings\n"
    "from sweval.flows.settings import flow_run_settings\n"
    "with flow_run_settings():\n"
    "    seen = get_current_settings().flows.heartbeat_frequency\n"
    "os.environ['SEEN'] = repr(seen)\n"
    "os.environ['AFTER'] = repr(get_current_settings().flows.heartbeat_frequency)\n"
)


@pytest.mark.slow  # a fresh interpreter
def test_flow_runs_send_no_heartbeats_unless_the_user_asks(tmp_path: Path) -> None:
    # Prefect's 180 s default makes the end of every flow run wait for its heartbeat thread's
    # next 1 s sleep step; SW-EVAL's runs turn it off, and only inside the flow run.
    changed = _run(_HEARTBEAT, tmp_path / "home")
    assert (changed["SEEN"], changed["AFTER"]) == ("None", "180")


@pytest.mark.slow  # a fresh interpreter
def test_a_heartbeat_frequency_in_the_environment_wins(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "60")
    changed = _run(_HEARTBEAT, tmp_path / "home")
    assert (changed["SEEN"], changed["AFTER"]) == ("60", "60")


def test_sweval_run_calls_the_flow_inside_those_settings(monkeypatch) -> None:
    from prefect.settings import get_current_settings

    from sweval.flows import sliding_window, startup
    from sweval.flows.cli import run as cli_run

    seen: list[object] = []
    monkeypatch.setattr(startup, "preload", lambda cfg: None)
    monkeypatch.setattr(sliding_window, "sliding_window_eval", lambda **kw: seen.append(
        get_current_settings().flows.heartbeat_frequency))
    cli_run.run_flow(None, rolling=False)  # type: ignore[arg-type]
    assert seen == [None]
