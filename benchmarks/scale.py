"""The scale series: the whole ``sweval run`` command on generated logs of growing size (issue 20).

Run on demand (never part of the test suite), from the repository root::

    .venv/bin/python benchmarks/scale.py                          # scales 0.25, 1, 10
    .venv/bin/python benchmarks/scale.py --scales 0.25,1,10,30 --data-dir /tmp/scale-data
    .venv/bin/python benchmarks/scale.py --report-only            # reprint from saved results

Per scale S: the log ``sweval generate --scale S --seed 0`` (written once into ``--data-dir`` as
``s<S>.parquet`` and reused), then, in one child process each, the command the issue measures::

    sweval run --data s<S>.parquet --algorithms pop,pop-n,item-knn,user-knn --window 1D \
        --folds 30 --u-min 100 --no-prefect --no-tracking --output <work>/s<S>

A first, unreported run on the bundled MovieLens log fills numba's disk cache (a fresh checkout
compiles the kernels once). Whole process: wall time, CPU time (user + sys, all threads: the figure that survives a shared
machine) and peak RSS (GNU ``time``), through :func:`bench.run_child`. The per-stage split comes
from the run's own ``units.csv`` (``train_data_s``, ``fit_s``, ``recommend_s``, ``metrics_s`` per
unit, summed over the folds). Every ratio in the table is against scale 1 of the same run; the
1-minute load average is printed with every child.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pandas as pd
from bench import ROOT, machine, run_child

ALGORITHMS = ["pop", "pop-n", "item-knn", "user-knn"]
STAGES = ["train_data_s", "fit_s", "recommend_s", "metrics_s"]


def sweval_cmd() -> list[str]:
    venv = ROOT / ".venv" / "bin" / "sweval"
    return [str(venv)] if venv.exists() else ["sweval"]


def ensure_log(data_dir: Path, scale: float, timeout: float) -> Path:
    path = data_dir / f"s{scale:g}.parquet"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [*sweval_cmd(), "generate", str(path), "--scale", f"{scale:g}", "--seed", "0"]
        done = run_child(cmd, log=data_dir / f"generate-s{scale:g}.log", timeout=timeout)
        if done["returncode"] != 0:
            raise SystemExit(f"generating scale {scale:g} failed: see {done['log']}")
    return path


def run_scale(args: argparse.Namespace, scale: float) -> dict[str, Any]:
    data = ensure_log(args.data_dir, scale, args.timeout)
    out = args.work / f"s{scale:g}"
    if out.exists():  # a fresh output folder: no unit is reused from an earlier run
        import shutil

        shutil.rmtree(out)
    cmd = [
        *sweval_cmd(), "run", "--data", str(data), "--algorithms", ",".join(args.algorithms),
        "--window", "1D", "--folds", str(args.folds), "--u-min", "100", "--no-prefect",
        "--no-tracking", "--output", str(out),
    ]  # fmt: skip
    record = run_child(cmd, log=args.work / f"s{scale:g}.log", timeout=args.timeout)
    record["scale"] = scale
    units_csv = out / "units.csv"
    if record["returncode"] == 0 and units_csv.exists():
        units = pd.read_csv(units_csv)
        record["stages"] = units.groupby("algorithm")[STAGES].sum().to_dict(orient="index")
        folds = pd.read_csv(out / "folds.csv")
        record["interactions"] = int(folds["n_train"].max() + folds["n_test"].max())
        record["eligible"] = int(folds["n_eligible"].sum())
    (args.work / f"s{scale:g}.json").write_text(json.dumps(record, indent=1))
    return record


def table(records: list[dict[str, Any]], algorithms: list[str]) -> str:
    base = next((r for r in records if r["scale"] == 1.0), None)

    def ratio(value: float, key: str) -> str:
        return f"{value / base[key]:.1f}×" if base and base.get(key) else "-"

    lines = [
        (
            "| scale | eligible users (all folds) | wall s | CPU s | CPU vs scale 1 "
            "| peak RSS GB | load avg |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        cpu = r["user_s"] + r["sys_s"]
        r["cpu_s"] = cpu
        status = "" if r["returncode"] == 0 else f" (exit {r['returncode']})"
        lines.append(
            f"| {r['scale']:g}{status} | {r.get('eligible', '-')} | {r['wall_s']:.1f} | "
            f"{cpu:.1f} | {ratio(cpu, 'cpu_s')} | {r['peak_rss_mb'] / 1024:.2f} | "
            f"{r['loadavg_1min_before_after'][0]:.1f}→{r['loadavg_1min_before_after'][1]:.1f} |"
        )
    lines += ["", "Per stage, seconds summed over the folds (from units.csv):", ""]
    header = "| scale | " + " | ".join(
        f"{a} {s.removesuffix('_s')}" for a in algorithms for s in STAGES[1:3]
    )
    lines += [header + " | train_data |", "|---" * (2 * len(algorithms) + 2) + "|"]
    for r in records:
        stages = r.get("stages", {})
        cells = [
            f"{stages.get(a, {}).get(s, float('nan')):.2f}" for a in algorithms for s in STAGES[1:3]
        ]
        train = sum(v.get("train_data_s", 0.0) for v in stages.values())
        lines.append(f"| {r['scale']:g} | " + " | ".join(cells) + f" | {train:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default="0.25,1,10", help="comma-separated scales")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS))
    parser.add_argument("--folds", type=int, default=30)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/scale-data"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/scale-bench"))
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    args.algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    scales = [float(s) for s in args.scales.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    print(machine())
    records = []
    if not args.report_only:  # fills numba's disk cache: the first run compiles the kernels
        run_child(
            [*sweval_cmd(), "run", "--data", "movielens-latest-small", "--algorithms",
             ",".join(args.algorithms), "--folds", "3", "--window", "7D", "--no-prefect",
             "--no-tracking", "--output", str(args.work / "warm-up")],
            log=args.work / "warm-up.log", timeout=args.timeout,
        )  # fmt: skip
    for scale in scales:
        saved = args.work / f"s{scale:g}.json"
        if args.report_only:
            if saved.exists():
                records.append(json.loads(saved.read_text()))
            continue
        record = run_scale(args, scale)
        print(
            f"scale {scale:g}: {record['wall_s']:.1f} s wall, exit {record['returncode']}",
            flush=True,
        )
        records.append(record)
    print(table(records, args.algorithms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
