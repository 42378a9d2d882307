"""Helpers shared by the test modules (imported by name; ``tests/`` is on sys.path)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import scipy.sparse as sp

from sweval.data.log import InteractionLog

REPO = Path(__file__).resolve().parents[1]
#: The finished units of a unit store (evaluators/units/store.py: <2 hex>/<key>/unit.json).
UNITS_GLOB = "*/*/unit.json"
DAY = 86_400
T0 = 1_704_067_200  # 2024-01-01T00:00:00Z


def sweval_cli(*argv: str | Path) -> int:
    """``sweval ARGV`` run in this process (the tests' one command-line runner); its exit
    status. A subprocess is for tests where the process itself is the point (signals, servers,
    packaging)."""
    from sweval.flows.cli.app import main

    with mock.patch.object(sys, "argv", ["sweval", *map(str, argv)]):
        try:
            main()
        except SystemExit as exc:
            return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def session_directory(prefix: str) -> Path:
    """A new directory for this test session inside its temporary home (``tests/conftest.py``
    sets ``SWEVAL_HOME`` in it), so that it goes when a passing session removes the home."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=Path(os.environ["SWEVAL_HOME"]).parent))


def plain_python(kernel: Any) -> Any:
    """A numba kernel's Python function (numpy checks its indices); the function itself under
    ``NUMBA_DISABLE_JIT=1``, where ``njit`` returns it unchanged."""
    return getattr(kernel, "py_func", kernel)


def make_log(rows: list[tuple], columns: tuple[str, ...] = ("user", "item", "timestamp"), **kw) -> InteractionLog:
    """An InteractionLog from tuples; a 4th ``policy`` column is picked up as the policy."""
    frame = pd.DataFrame(rows, columns=list(columns) + (["policy"] if rows and len(rows[0]) == len(columns) + 1 else []))
    if "policy" in frame.columns:
        kw.setdefault("policy_col", "policy")
    return InteractionLog.from_frame(frame, **kw)


def log_frame(days: float = 8, *, seed: int = 0, quiet_day: int | None = None) -> pd.DataFrame:
    """A small log over ``days`` days from T0: 40 users, 30 items with skewed popularity.

    Every user interacts on about half of the days; on ``quiet_day`` (if any) only 2 users do, so
    that day's fold has fewer eligible users than a u_min of 3 or more and is skipped.
    """
    rng = np.random.default_rng(seed)
    rows = []
    popularity = 1.0 / np.arange(1, 31)
    popularity /= popularity.sum()
    for day in range(int(np.ceil(days))):
        users = range(2) if day == quiet_day else range(40)
        for user in users:
            if day != quiet_day and rng.random() < 0.5:
                continue
            for _ in range(rng.integers(1, 4)):
                t = T0 + day * DAY + int(rng.integers(0, DAY))
                if t < T0 + days * DAY:
                    rows.append((f"u{user}", f"i{rng.choice(30, p=popularity)}", t))
    return pd.DataFrame(rows, columns=["user", "item", "timestamp"])


def random_logs(*, sizes: tuple[int, int], users: int, items: int, days: int):
    """Hypothesis strategy of small random logs: ``sizes`` (min, max) transactions, user codes
    0..users, item codes 0..items, times over ``days`` days, dedup ``first`` or ``none``."""
    from hypothesis import strategies as st

    @st.composite
    def logs(draw) -> InteractionLog:
        n = draw(st.integers(*sizes))
        user = draw(st.lists(st.integers(0, users), min_size=n, max_size=n))
        item = draw(st.lists(st.integers(0, items), min_size=n, max_size=n))
        times = draw(st.lists(st.integers(0, days * DAY), min_size=n, max_size=n))
        dedup = draw(st.sampled_from(["first", "none"]))
        frame = pd.DataFrame({"user": user, "item": item, "timestamp": times})
        return InteractionLog.from_frame(frame, dedup=dedup)

    return logs()


def exclude_seen(scores: np.ndarray, matrix: sp.csr_matrix, rows: np.ndarray) -> None:
    """Reference seen-item filter: set each row's training items to -inf, in place."""
    sub = matrix[rows]
    block_row = np.repeat(np.arange(len(rows)), np.diff(sub.indptr))
    scores[block_row, sub.indices] = -np.inf


def group_members(pgid: int) -> list[str]:
    """Live (non-zombie) processes of process group ``pgid``, as ``pid command`` lines."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state != "Z":
            members.append(f"{entry.name} {stat[: stat.rindex(')') + 1]}")
    return members


def experiment_runs(uri: str, name: str) -> tuple[list[Any], dict[str, Any]]:
    """(parent runs, {child run name: child run}) of MLflow experiment ``name``."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    assert experiment is not None, f"no experiment {name}"
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    return parents, children


def check_child_metrics(uri: str, child: Any, results: pd.DataFrame) -> pd.DataFrame:
    """An algorithm's child run is FINISHED and holds, for every metric key, exactly one step per
    non-skipped fold valued as in ``results`` (results.csv), and ``n_eligible`` at every fold.

    Returns the algorithm's rows of the ``all`` stratum.
    """
    import pytest
    from mlflow import MlflowClient

    from sweval.flows.tracking import metric_key

    client = MlflowClient(uri)
    algorithm = child.info.run_name
    assert child.info.status == "FINISHED", algorithm
    mine = results[(results["algorithm"] == algorithm) & (results["stratum"] == "all")]
    used = mine[~mine["skipped"]]
    for (metric, k), rows in used.groupby(["metric", "k"], dropna=False):
        key = metric_key(metric, None if pd.isna(k) else int(k))
        history = client.get_metric_history(child.info.run_id, key)
        steps = sorted(m.step for m in history)
        assert steps == sorted(rows["fold"].tolist()), (algorithm, key, steps)
        logged = {m.step: m.value for m in history}
        for fold, value in zip(rows["fold"], rows["value"], strict=True):
            # results.csv holds %.10g
            assert logged[fold] == pytest.approx(value, rel=1e-9, abs=1e-12), (algorithm, key, fold)
    # n_eligible: one step per fold, skipped folds included
    eligible = client.get_metric_history(child.info.run_id, "n_eligible")
    assert sorted(m.step for m in eligible) == sorted(mine["fold"].unique().tolist()), algorithm
    return mine


# ------------------------------------------------------------------------------------ plugins
EXAMPLE_PLUGIN = REPO / "examples" / "plugin"


def write_dist_info(site: Path, name: str, version: str, entry_points: dict[str, str]) -> Path:
    """What ``pip install`` leaves for importlib.metadata to find in ``site``: a
    ``NAME-VERSION.dist-info`` with METADATA and the ``sweval.algorithms`` entry points."""
    dist = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[sweval.algorithms]\n{lines}")
    return dist


def install_example_plugin(site: Path) -> list[Path]:
    """Install ``examples/plugin`` for a test, offline and without building: its source folder
    plus a dist-info carrying the entry points its pyproject declares. Returns the folders to
    put on the path (sys.path or PYTHONPATH)."""
    import tomllib

    project = tomllib.loads((EXAMPLE_PLUGIN / "pyproject.toml").read_text())["project"]
    write_dist_info(site, project["name"], project["version"],
                    project["entry-points"]["sweval.algorithms"])
    return [site, EXAMPLE_PLUGIN / "src"]


def use_plugins(monkeypatch: Any, *folders: Path) -> None:
    """Put ``folders`` on sys.path for one test, with a registry that reads the entry points
    afresh (and forgets them afterwards)."""
    import functools

    from sweval.algorithms import registry

    for folder in folders:
        monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(registry, "plugin_entry_points",
                        functools.cache(registry.plugin_entry_points.__wrapped__))


#: More series than tab10 has colours: every built-in, variants, a tuned series and a plugin.
MANY_SERIES = [
    "pop", "pop-n", "item-knn", "user-knn", "svd", "als", "bpr", "lmf", "ease", "decay-pop",
    "item-knn(n_neighbors=50)", "item-knn[tuned]", 'user-knn(n_neighbors=50,weighting="cosine")',
    "my_pkg.models:MyModel",
]


def line_colours(fig: Any, labels: list[str]) -> dict[str, tuple]:
    """The RGBA colour of the line of every label of ``labels`` in ``fig``, checked the same in
    all its panels."""
    from matplotlib.colors import to_rgba

    colours: dict[str, tuple] = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_label() in labels:
                colour = to_rgba(line.get_color())
                assert colours.setdefault(line.get_label(), colour) == colour, line.get_label()
    return colours


def assert_legend_inside(fig: Any) -> None:
    """Every legend of ``fig``, saved as the report saves it, lies within the saved image, and
    its panels are still plots (the legend took none's room)."""
    from sweval.evaluators.report.figures import figure_png

    figure_png(fig)  # lays the figure out and draws it
    for legend in fig.legends:
        box = legend.get_window_extent()
        assert box.x0 >= 0 and box.y0 >= 0, box
        assert box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height, (box, fig.bbox)
    heights = [ax.get_position().height * fig.get_figheight() for ax in fig.axes]
    assert min(heights) > 1.5, heights  # inches
