"""What a changed command costs once units are reused: one table, run on demand.

Runs ``sweval run --no-prefect --no-tracking`` as a user would, one command after the other into
one output directory (and one into a second directory sharing the store with ``--cache``), and
prints for each the wall and CPU seconds and the units it reused and computed::

    .venv/bin/python benchmarks/reuse.py [--scale 0.1] [--folds 30] [--old PATH/TO/old/sweval]

``--old`` also times the same sequence with another installation's ``sweval`` (e.g. a checkout
of an earlier version with its own venv), side by side.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWEVAL = str(Path(sys.executable).with_name("sweval"))


def scenarios(folds: int) -> list[tuple[str, list[str]]]:
    """(what changed, extra options) in the order they run; each builds on the store so far."""
    more = str(folds + 1)
    return [
        ("first run (empty store)", []),
        ("the same command again", []),
        ("fewer k (--k 5,10)", ["--k", "5,10"]),
        ("algorithms reordered", ["--algorithms", "als,svd,user-knn,item-knn,pop-n,pop"]),
        (f"one more fold (--folds {more})", ["--folds", more]),
        ("item-knn.n_neighbors=50", ["--set", "item-knn.n_neighbors=50"]),
        ("als.factors=64.0 (the default)", ["--set", "als.factors=64.0"]),
        ("another --output, shared --cache", ["@other"]),
    ]


def run(binary: str, output: Path, cache: Path, base: list[str], extra: list[str]) -> dict:
    if extra == ["@other"]:
        output, extra = output.with_name(output.name + "-other"), []
    command = [binary, "run", "--no-prefect", "--no-tracking", "--no-progress", *base,
               "--output", str(output), *extra]
    if binary == SWEVAL:  # older versions have no --cache
        command += ["--cache", str(cache)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    clock = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - clock
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    found = re.search(r"reused (\d+) units?, computed (\d+)", done.stdout)
    return {
        "wall": wall,
        "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "units": f"{found[1]} / {found[2]}" if found else "—",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", default="0.1")
    parser.add_argument("--folds", type=int, default=30)
    parser.add_argument("--old", help="another sweval executable to time side by side")
    args = parser.parse_args()
    base = ["--scale", args.scale, "--folds", str(args.folds)]
    binaries = {"this": SWEVAL} | ({"old": args.old} if args.old else {})
    rows = {name: [] for name in binaries}
    with tempfile.TemporaryDirectory(prefix="sweval-reuse-") as root:
        for name, binary in binaries.items():
            output, cache = Path(root) / name / "out", Path(root) / name / "cache"
            for _what, extra in scenarios(args.folds):
                rows[name].append(run(binary, output, cache, base, extra))
            shutil.rmtree(Path(root) / name, ignore_errors=True)
    header = f"{'command':36} " + " ".join(
        f"{name + ' wall s':>13} {name + ' cpu s':>12} {'reused/computed':>16}" if name == "this"
        else f"{name + ' wall s':>12} {name + ' cpu s':>11}" for name in binaries
    )
    print(f"sweval run, generated log scale {args.scale}, {args.folds} daily folds, 6 algorithms")
    print(header)
    for i, (what, _extra) in enumerate(scenarios(args.folds)):
        cells = []
        for name in binaries:
            r = rows[name][i]
            cells.append(f"{r['wall']:13.1f} {r['cpu']:12.1f} {r['units']:>16}" if name == "this"
                         else f"{r['wall']:12.1f} {r['cpu']:11.1f}")
        print(f"{what:36} " + " ".join(cells))


if __name__ == "__main__":
    main()
