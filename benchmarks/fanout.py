"""Fan-out: the whole ``sweval run`` command with the sequential runner and with Dask (issue 20).

Run on demand (never part of the test suite), from the repository root::

    .venv/bin/python benchmarks/fanout.py --data /tmp/scale-data/s1.parquet
    .venv/bin/python benchmarks/fanout.py --data LOG --before /work/main   # also another checkout

Variants, each one child process (Prefect on, MLflow off, a fresh output folder, so nothing is
reused), run in turn and repeated ``--repeats`` times with the order rotated, so that every
ratio comes from the same period of a shared machine:

- ``sequential``: ``--task-runner sequential`` (kernels use every core);
- ``dask 2``: ``--task-runner dask --workers 2`` (one task thread per worker; the local
  cluster gives each worker cpus // workers kernel threads, so on 2 cores this is ``dask 2 / 1
  thr``);
- ``dask 1 / 1 thr`` and ``dask 2 / 1 thr``: 1 and 2 workers with ``SWEVAL_KERNEL_THREADS=1``
  (one kernel thread per worker: the scaling a cluster of one-core workers would see; before
  ``--workers 1`` meant one worker, this "1 worker" variant ran one per CPU);
- with ``--before DIR``: all four with the ``sweval`` of that checkout, labelled ``before: ...``.

Wall and CPU time (user + sys of the command and the worker processes it waited for) and the
peak RSS of the largest process come from :func:`bench.run_child`; the table gives medians.

Each run's wall time is also split into three phases (:func:`phases`), from its output: before
the first fold task starts (start-up, loading and planning the log, starting the workers),
the fold tasks (what more workers can share), and after the last one ends (tables, closing)::

    start ── serial before ──┬── fold tasks ──┬── serial after ── end
                             first unit       last unit
                             started          written

A unit is written to the store as soon as it is computed (its record's ``created``); its start
is that time less its own time in ``units.csv``. The boundaries leave out the Prefect
bookkeeping of the first task before its first unit and of the last after its last unit.
A sampler (:class:`TreeSampler`, every 0.2 s) splits them by role: the driver (the ``sweval``
process), the Dask workers, Prefect's temporary server: each role's CPU seconds (the last sample
of each of its processes, summed) and peak RSS (``VmHWM``, the largest of its processes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import ROOT, machine, run_child

ROLES = ("driver", "workers", "server")


def role(process: psutil.Process, driver: int) -> str:
    """``driver`` (the ``sweval`` process), ``workers`` (Dask's spawned worker processes),
    ``server`` (Prefect's temporary API server) or ``other``."""
    if process.pid == driver:
        return "driver"
    command = " ".join(process.cmdline())
    if "spawn_main" in command and "resource_tracker" not in command:
        return "workers"
    if "uvicorn" in command or "prefect.server" in command:
        return "server"
    return "other"


class TreeSampler(threading.Thread):
    """Polls the process tree under ``root`` (GNU ``time``'s pid): per process its last CPU
    seconds and peak RSS (``VmHWM``), until :meth:`stop`."""

    def __init__(self, root: int, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.period = root, period
        self.seen: dict[int, dict[str, Any]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.period):
            try:
                top = psutil.Process(self.root)
                children = top.children(recursive=True)
                direct = [child.pid for child in top.children()]
            except psutil.Error:  # the command is exiting
                continue
            driver = direct[0] if direct else -1
            for process in children:
                try:
                    with process.oneshot():
                        times = process.cpu_times()
                        record = self.seen.setdefault(
                            process.pid, {"role": role(process, driver), "peak_kb": 0}
                        )
                        record["cpu_s"] = times.user + times.system
                        record["peak_kb"] = max(record["peak_kb"], _hwm_kb(process.pid))
                except psutil.Error:
                    continue

    def stop(self) -> dict[str, dict[str, float]]:
        """Per role: ``cpu_s`` (summed), ``peak_rss_gb`` (largest process), ``n`` processes."""
        self.done.set()
        self.join()
        out = {}
        for name in ROLES:
            records = [r for r in self.seen.values() if r["role"] == name]
            out[name] = {
                "cpu_s": sum(r.get("cpu_s", 0.0) for r in records),
                "peak_rss_gb": max((r["peak_kb"] for r in records), default=0) / 2**20,
                "n": len(records),
            }
        return out


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def phases(output: Path, started: float, ended: float) -> dict[str, float]:
    """``serial_before_s``, ``fold_tasks_s``, ``serial_after_s`` of the run that wrote
    ``output`` (see the module docstring); ``started`` and ``ended`` in epoch seconds."""
    import pandas as pd

    units = pd.read_csv(output / "units.csv")
    stages = [c for c in ("train_data_s", "fit_s", "recommend_s", "metrics_s") if c in units]
    units["unit_s"] = units[stages].sum(axis=1)
    created = {}
    for record in (output / "units").glob("*/*/unit.json"):
        data = json.loads(record.read_text())
        created[data["key"]] = float(data["created"])
    units["created"] = units["unit_key"].map(created)
    first_start = float((units["created"] - units["unit_s"]).min())
    last_end = float(units["created"].max())
    return {"serial_before_s": first_start - started, "fold_tasks_s": last_end - first_start,
            "serial_after_s": ended - last_end}


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
            ("before: dask 1 / 1 thr", old, ["--task-runner", "dask", "--workers", "1"], one),
            ("before: dask 2 / 1 thr", old, ["--task-runner", "dask", "--workers", "2"], one),
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
    parser.add_argument(
        "--only", help="comma-separated variant labels to run (default: all), e.g. 'sequential,dask 2'"
    )
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    print(machine())
    todo = variants(args.before)
    if args.only:
        wanted = [label.strip() for label in args.only.split(",")]
        todo = [variant for variant in todo if variant[0] in wanted]
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
            samplers: list[TreeSampler] = []

            def watch(pid: int) -> None:
                samplers.append(TreeSampler(pid))
                samplers[0].start()

            started = time.time()
            record = run_child(cmd, log=out.with_suffix(".log"), timeout=args.timeout, env=env,
                               on_start=watch)
            record["roles"] = samplers[0].stop()
            record["phases"] = phases(out, started, started + record["wall_s"])
            record["label"] = label
            records[label].append(record)
            split = " / ".join(f"{v:.1f}" for v in record["phases"].values())
            print(f"{label}: {record['wall_s']:.1f} s wall (before / fold tasks / after: "
                  f"{split} s), exit {record['returncode']}", flush=True)
    (args.work / "fanout.json").write_text(json.dumps(records, indent=1))
    first = next(iter(records))
    base = statistics.median(r["wall_s"] for r in records.get("sequential", records[first]))
    print(
        "\n| variant | wall s | vs sequential | CPU s | CPU s driver / workers / server "
        "| peak RSS GB driver / worker / server | load avg | exit |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, runs in records.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["user_s"] + r["sys_s"] for r in runs)
        split = " / ".join(
            f"{statistics.median(r['roles'][name]['cpu_s'] for r in runs):.1f}" for name in ROLES
        )
        peaks = " / ".join(
            f"{max(r['roles'][name]['peak_rss_gb'] for r in runs):.2f}" for name in ROLES
        )
        load = "–".join(f"{r['loadavg_1min_before_after'][0]:.1f}" for r in runs)
        codes = ",".join(str(r["returncode"]) for r in runs)
        print(
            f"| {label} | {wall:.1f} | {base / wall:.2f}× | {cpu:.1f} | {split} | {peaks} | "
            f"{load} | {codes} |"
        )
    for prefix in ("", "before: "):
        one_worker, two_workers = f"{prefix}dask 1 / 1 thr", f"{prefix}dask 2 / 1 thr"
        if one_worker in records and two_workers in records:
            one = statistics.median(r["wall_s"] for r in records[one_worker])
            two = statistics.median(r["wall_s"] for r in records[two_workers])
            print(f"\n{prefix}2 workers vs 1 worker at one kernel thread each: {one / two:.2f}× faster")
            one_tasks = statistics.median(r["phases"]["fold_tasks_s"] for r in records[one_worker])
            two_tasks = statistics.median(r["phases"]["fold_tasks_s"] for r in records[two_workers])
            print(f"{prefix}  their fold-task phase alone: {one_tasks:.1f} s vs {two_tasks:.1f} s, "
                  f"{one_tasks / two_tasks:.2f}× faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
