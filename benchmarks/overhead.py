"""What a command costs besides its engine: start-up, Prefect, MLflow, and answers already known.

Each measurement is a fresh ``sweval`` process (wall time, the median of ``--repeats``), in a
fresh home (``SWEVAL_HOME``, ``PREFECT_HOME``, ``XDG_CACHE_HOME`` in a temporary directory;
one untimed warm-up run first, so that Prefect's and MLflow's databases exist as they do for
any user after their first run)::

    help               sweval --help
    bad option         sweval run --no-such-option (exit 2)
    first line         sweval run: time until its first output line
    run, cold          the job, every unit computed (a new unit store each time)
      --no-prefect --no-tracking, then plain (Prefect's temporary API, MLflow's local store)
    run, reused        the same job into a new output directory, every unit in the store
    compare, cold / reused   sweval compare --protocols sw-eval,loocv,leave-last-one-out

Usage (from the repository root)::

    .venv/bin/python benchmarks/overhead.py               # the README's default job
    .venv/bin/python benchmarks/overhead.py --quick       # pop and pop-n on the bundled log

The default job is the one ``uv run sweval run`` runs (the generated log, six algorithms, 30
daily folds); ``--quick`` takes MovieLens latest-small, 10 weekly folds, POP and POP-N.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWEVAL = str(Path(sys.executable).with_name("sweval"))
QUICK = ["--data", "movielens-latest-small", "--window", "7D", "--folds", "10", "--u-min", "3",
         "--algorithms", "pop,pop-n"]
QUIET = ["--no-progress"]
LOCAL = ["--no-prefect", "--no-tracking"]


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, seconds to the first output line, exit status) of one command."""
    start = time.perf_counter()
    process = subprocess.Popen([SWEVAL, *argv], env=env, cwd=cwd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    first = None
    for _line in process.stdout:
        first = first if first is not None else time.perf_counter() - start
    status = process.wait()
    return time.perf_counter() - start, first or float("nan"), status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="pop and pop-n on MovieLens")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    job = QUICK if args.quick else []
    rows: list[tuple[str, list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="sweval-overhead-") as tmp:
        home = Path(tmp)
        env = os.environ | {"SWEVAL_HOME": str(home / "sweval"), "PREFECT_HOME": str(home / "p"),
                            "XDG_CACHE_HOME": str(home / "cache"), "COLUMNS": "120"}
        env.pop("PREFECT_API_URL", None)
        env.pop("MLFLOW_TRACKING_URI", None)
        env.pop("SWEVAL_CACHE", None)
        counter = iter(range(10**6))

        def fresh(name: str) -> list[str]:
            return ["--output", str(home / f"{name}-{next(counter)}")]

        def store(name: str) -> list[str]:
            return ["--cache", str(home / f"store-{name}")]

        timed(["run", *job, *QUIET, *fresh("warm-up"), *store("warm-up")], env, home)
        measured: dict[str, list[float]] = {}

        def add(name: str, value: float) -> None:
            measured.setdefault(name, []).append(value)

        for repeat in range(args.repeats):
            add("sweval --help", timed(["--help"], env, home)[0])
            add("sweval run --no-such-option", timed(["run", "--no-such-option"], env, home)[0])
            cold = store(f"cold-{repeat}")
            local = timed(["run", *job, *QUIET, *LOCAL, *fresh("local"), *cold], env, home)
            add("run --no-prefect --no-tracking, cold", local[0])
            plain = timed(["run", *job, *QUIET, *fresh("plain"), *store(f"plain-{repeat}")], env,
                          home)
            add("run (Prefect, MLflow), cold", plain[0])
            add("run: first output line", plain[1])
            add("run --no-prefect --no-tracking, reused",
                timed(["run", *job, *QUIET, *LOCAL, *fresh("local"), *cold], env, home)[0])
            add("run (Prefect, MLflow), reused",
                timed(["run", *job, *QUIET, *fresh("plain"), *cold], env, home)[0])
            compare = store(f"compare-{repeat}")
            add("compare, cold", timed(["compare", *job, *QUIET, "--no-tracking",
                                        *fresh("compare"), *compare], env, home)[0])
            add("compare, reused", timed(["compare", *job, *QUIET, "--no-tracking",
                                          *fresh("compare"), *compare], env, home)[0])
        rows = list(measured.items())
    print(f"| measurement ({'quick' if args.quick else 'default job'}, median of "
          f"{args.repeats}) | seconds | all runs |")
    print("|---|---:|---|")
    for name, values in rows:
        print(f"| {name} | {statistics.median(values):.2f} | "
              f"{', '.join(f'{v:.2f}' for v in values)} |")
    medians = dict((name, statistics.median(values)) for name, values in rows)
    print(f"\nplain run minus --no-prefect --no-tracking: cold "
          f"{medians['run (Prefect, MLflow), cold'] - medians['run --no-prefect --no-tracking, cold']:+.2f} s, "
          f"reused {medians['run (Prefect, MLflow), reused'] - medians['run --no-prefect --no-tracking, reused']:+.2f} s; "
          f"compare reused / cold: {medians['compare, reused'] / medians['compare, cold']:.0%}")


if __name__ == "__main__":
    main()
