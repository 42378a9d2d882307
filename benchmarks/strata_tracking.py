"""What MLflow costs a run with many strata: one child run per (algorithm, stratum).

A generated log of 12,000 interactions, 1,500 users and a ``policy`` column of 500 values, cut
into 3 daily folds; POP and POP-N stratified by the policy (``--stratify-mode test``): 1,002
child runs. Each row is a fresh ``sweval run`` in a fresh home (the unit store, Prefect's and
MLflow's databases), wall seconds::

    no tracking     --no-tracking (Prefect's temporary API, no MLflow)
    SQLite store    --tracking-uri sqlite:///…/mlflow.db (a new store each time)

Usage (from the repository root; ``--sweval`` times another checkout's command)::

    .venv/bin/python benchmarks/strata_tracking.py
    .venv/bin/python benchmarks/strata_tracking.py --sweval ../old/.venv/bin/sweval
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

T0 = 1_704_067_200  # 2024-01-01T00:00:00Z
DAY = 86_400


def write_log(path: Path, n_strata: int) -> None:
    """The 500-strata log of ``tests/flows/test_signals.py``."""
    rng = np.random.default_rng(0)
    users = rng.integers(0, 1500, 12_000)
    pd.DataFrame({"user": users, "item": rng.zipf(1.5, len(users)) % 300,
                  "timestamp": T0 + rng.integers(0, 8 * DAY, len(users)),
                  "policy": [f"p{u % n_strata:03d}" for u in users]}).to_csv(path, index=False)


def timed_run(sweval: str, log: Path, tracking: list[str], home: Path) -> float:
    """Wall seconds of one ``sweval run`` of the log, in ``home``."""
    env = os.environ | {"HOME": str(home), "SWEVAL_HOME": str(home / "sweval"),
                        "PREFECT_HOME": str(home / "prefect"),
                        "XDG_CACHE_HOME": str(home / "cache")}
    env.pop("PREFECT_API_URL", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    argv = [sweval, "run", "--data", str(log), "--window", "1D", "--folds", "3", "--u-min", "1",
            "--k", "10", "--algorithms", "pop,pop-n", "--stratify-by", "policy",
            "--stratify-mode", "test", "--no-progress", "--no-report",
            "--output", str(home / "out"), *tracking]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=home, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"sweval run failed ({done.returncode}):\n{done.stdout[-2000:]}"
                 f"{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweval", default=str(Path(sys.executable).with_name("sweval")),
                        help="the sweval command to time (default: this environment's)")
    parser.add_argument("--strata", type=int, default=500, help="values of the policy column")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sweval-strata-bench-") as tmp:
        root = Path(tmp)
        log = root / "log.csv"
        write_log(log, args.strata)
        rows = []
        for name, tracking in (("no tracking", ["--no-tracking"]),
                               ("SQLite store", ["--tracking-uri",
                                                 f"sqlite:///{root / 'mlflow.db'}"])):
            home = root / name.replace(" ", "-")
            home.mkdir()
            rows.append((name, timed_run(args.sweval, log, tracking, home)))
    print(f"sweval run, 2 algorithms × {args.strata} strata, 3 folds ({args.sweval})")
    print(f"{'tracking':<14} {'seconds':>8}")
    for name, seconds in rows:
        print(f"{name:<14} {seconds:>8.1f}")
    print(f"{'MLflow costs':<14} {rows[1][1] - rows[0][1]:>8.1f}")


if __name__ == "__main__":
    main()
