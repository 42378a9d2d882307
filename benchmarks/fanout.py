"""Fan-out: the whole ``sweval run`` command with the sequential runner and with Dask (issue 20).

Run on demand (never part of the test suite), from the repository root::

    .venv/bin/python benchmarks/fanout.py --data /tmp/scale-data/s1.parquet
    .venv/bin/python benchmarks/fanout.py --data LOG --before /work/main   # also another checkout

Variants, each one child process (Prefect on, MLflow off, a fresh output folder, so nothing is
reused), run in turn and repeated ``--repeats`` times with the order rotated, so that every
ratio comes from the same period of a shared machine:

- ``sequential``: ``--task-runner sequential`` (kernels use every core);
- ``dask 2``: ``--task-runner dask --workers 2`` (one thread per worker; kernels use every core);
- ``dask 1 / 1 thr`` and ``dask 2 / 1 thr``: 1 and 2 workers with ``SWEVAL_KERNEL_THREADS=1``
  (one kernel thread per worker: the scaling a cluster of one-core workers would see);
- with ``--before DIR``: ``sequential`` and ``dask 2`` with the ``sweval`` of that checkout.

Wall and CPU time (user + sys of the command and the worker processes it waited for) and the
peak RSS of the largest process come from :func:`bench.run_child`; the table gives medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import ROOT, machine, run_child


def variants(before: Path | None) -> list[tuple[str, Path, list[str], dict[str, str]]]:
    here = ROOT / ".venv" / "bin" / "sweval"
    one = {"SWEVAL_KERNEL_THREADS": "1"}
    out = [
        ("sequential", here, ["--task-runner", "sequential"], {}),
        ("dask 2", here, ["--task-runner", "dask", "--workers", "2"], {}),
        ("dask 1 / 1 thr", here, ["--task-runner", "dask", "--workers", "1"], one),
        ("dask 2 / 1 thr", here, ["--task-runner", "dask", "--workers", "2"], one),
    ]
    if before is not None:
        old = before / ".venv" / "bin" / "sweval"
        out += [
            ("before: sequential", old, ["--task-runner", "sequential"], {}),
            ("before: dask 2", old, ["--task-runner", "dask", "--workers", "2"], {}),
        ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="log file (e.g. sweval generate output)")
    parser.add_argument("--algorithms", default="pop,pop-n,item-knn,user-knn")
    parser.add_argument("--folds", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--before", type=Path, help="another checkout with its own .venv")
    parser.add_argument("--work", type=Path, default=Path("/tmp/fanout-bench"))
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    print(machine())
    todo = variants(args.before)
    records: dict[str, list[dict]] = {label: [] for label, *_ in todo}
    for repeat in range(args.repeats):
        shift = repeat % len(todo)
        for n, (label, exe, extra, env) in enumerate(todo[shift:] + todo[:shift]):
            out = args.work / f"r{repeat}-{n}"
            cmd = [
                str(exe), "run", "--data", args.data, "--algorithms", args.algorithms,
                "--window", "1D", "--folds", str(args.folds), "--u-min", "100", "--no-tracking",
                "--output", str(out), *extra,
            ]  # fmt: skip
            record = run_child(cmd, log=out.with_suffix(".log"), timeout=args.timeout, env=env)
            record["label"] = label
            records[label].append(record)
            print(
                f"{label}: {record['wall_s']:.1f} s wall, exit {record['returncode']}", flush=True
            )
    (args.work / "fanout.json").write_text(json.dumps(records, indent=1))
    base = statistics.median(r["wall_s"] for r in records["sequential"])
    one = statistics.median(r["wall_s"] for r in records["dask 1 / 1 thr"])
    print("\n| variant | wall s | vs sequential | CPU s | peak RSS GB | load avg | exit |")
    print("|---|---|---|---|---|---|---|")
    for label, runs in records.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["user_s"] + r["sys_s"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs) / 1024
        load = runs[0]["loadavg_1min_before_after"][0]
        codes = ",".join(str(r["returncode"]) for r in runs)
        print(
            f"| {label} | {wall:.1f} | {base / wall:.2f}× | {cpu:.1f} | {rss:.2f} | "
            f"{load:.1f} | {codes} |"
        )
    two = statistics.median(r["wall_s"] for r in records["dask 2 / 1 thr"])
    print(f"\n2 workers vs 1 worker at one kernel thread each: {one / two:.2f}× faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
