"""The wheel installs one import package, ``sweval``, and works without the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from sweval_testing import REPO

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([uv, "build", "--wheel", "--out-dir", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (path,) = out.glob("sweval-*.whl")
    return path


def test_the_wheel_holds_only_sweval(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"sweval", next(n for n in top_level if n.endswith(".dist-info"))}
    for package in ("data", "evaluators", "algorithms", "flows"):
        assert f"sweval/{package}/__init__.py" in names
    assert "sweval/testing.py" in names  # the contract kit users run on their models
    assert "sweval/data/bundled/movielens-latest-small/ratings.csv.gz" in names
    assert "sweval/evaluators/report/templates/report.html.j2" in names  # the report's HTML
    dist_info = next(n for n in top_level if n.endswith(".dist-info"))
    assert f"{dist_info}/licenses/LICENSE" in names
    shipped = zipfile.ZipFile(wheel).read(f"{dist_info}/licenses/LICENSE").decode()
    assert shipped == (REPO / "LICENSE").read_text() and shipped.startswith("MIT License")
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode().splitlines()
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "sweval = sweval.flows.cli.app:entry_point" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_wheel_imports_without_the_checkout(wheel: Path, tmp_path: Path) -> None:
    """A new venv holds the wheel alone; its dependencies come from this environment's
    site-packages on PYTHONPATH (where ``.pth`` files, the checkout's editable hook among them,
    are not read)."""
    target = tmp_path / "venv"
    venv.create(target, with_pip=False)
    python = target / "bin" / "python"
    subprocess.run([shutil.which("uv") or "uv", "pip", "install", "--no-deps", "--python",
                    str(python), str(wheel)], check=True, capture_output=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=sysconfig.get_paths()["purelib"])
    found = subprocess.run(
        [str(python), "-c", "import sweval.flows.cli.app, sweval.testing, sweval.data.loaders as l;"
         "print(sweval.flows.cli.app.__file__); print(l.BUNDLED)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert found.returncode == 0, found.stderr
    cli_file, bundled = found.stdout.splitlines()
    assert Path(cli_file).is_relative_to(target)
    assert "movielens-latest-small" in bundled
    shadow = subprocess.run([str(python), "-c", "import flows"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert shadow.returncode != 0, "a top-level 'flows' package was installed"
    assert sys.version_info >= (3, 11)


_API_AGAINST_CLI = """
import sys
from pathlib import Path

import sweval
from sweval.flows.cli.app import main

options = dict(window="7D", folds=4, u_min=3, algorithms=["pop", "pop-n"])
run = sweval.evaluate("movielens-latest-small", **options, cache=sys.argv[1] + "/api-units")
sys.argv = ["sweval", "run", "--data", "movielens-latest-small", "--window", "7D", "--folds", "4",
            "--u-min", "3", "--algorithms", "pop,pop-n", "--no-prefect", "--no-tracking",
            "--no-progress", "--output", sys.argv[1] + "/cli"]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
written = (Path(sys.argv[-1]) / "results.csv").read_text()
assert run.results.to_csv(index=False, float_format="%.10g") == written
print("same")
"""


def test_the_api_of_the_installed_wheel_gives_the_commands_results(wheel: Path,
                                                                    tmp_path: Path) -> None:
    """``sweval.evaluate`` from the installed wheel, on the bundled log, returns the very table
    ``sweval run --no-prefect`` writes (results.csv, byte for byte once formatted alike)."""
    target = tmp_path / "venv"
    venv.create(target, with_pip=False)
    python = target / "bin" / "python"
    subprocess.run([shutil.which("uv") or "uv", "pip", "install", "--no-deps", "--python",
                    str(python), str(wheel)], check=True, capture_output=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=sysconfig.get_paths()["purelib"])
    found = subprocess.run([str(python), "-c", _API_AGAINST_CLI, str(tmp_path)], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=600)
    assert found.returncode == 0, found.stderr[-3000:]
    assert found.stdout.strip().endswith("same")
