"""The default command's fixed overhead with and without ``sweval up``, and its whole-command
ratio against RecTools (issue 20). Run on demand, never part of the test suite::

    .venv/bin/python benchmarks/default_command.py --work /work/bench-default --repeats 3
    .venv/bin/python benchmarks/default_command.py --work /work/bench-default --report-only

Per workload (``ml``: MovieLens latest-small, 30 weekly folds, u_min 1; ``gen``: the generated
log at scale 1, 30 daily folds, u_min 100; the same files and folds as ``benchmarks/bench.py``)
and algorithm (``pop``, ``item-knn``), each repetition runs, in an order rotated every
repetition:

- ``warm``: ``sweval run`` as a user types it, with ``sweval up``'s servers and warm process
  answering (its own ``SWEVAL_HOME``, all started once before the first repetition, in the
  environment the runs get, so the warm process's start-up variables match theirs); the warm
  process's log confirms that its child ran the command;
- ``up``: the same with ``SWEVAL_WARM=0``: the servers, but the command in-process;
- ``plain``: the same command without them (another ``SWEVAL_HOME``: Prefect's temporary server,
  the local sqlite store), today's default;
- ``rectools``: RecTools' runner for the same evaluation (``benchmarks/peers/rectools_run.py``,
  its own venv), when installed.

Each ``sweval run`` writes to a fresh ``--output`` (every unit computed, none reused) after one
untimed warm-up run per home and workload (the databases and experiments exist, as for any run
but a user's very first). Its **fixed overhead** is the whole command's wall time minus the
engine time in its ``units.csv`` (training matrices + fit + recommend + metrics, every unit): the
imports, the Prefect flow and task runs, MLflow logging, loading the log, writing the tables
and the report. With ``sweval up`` the servers' own CPU during the command is recorded too: on
a 2-core machine it competes with the command. Results go to ``<work>/default-command.json``;
the report (medians, every repetition) is printed as Markdown.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench import fold_args, prepare, run_child  # noqa: E402

SWEVAL = str(ROOT / ".venv" / "bin" / "sweval")
VARIANTS = ("warm", "up", "plain", "rectools")


def engine_s(output: Path) -> float | None:
    """The engine's time in ``units.csv``: every unit's training matrix, fit, recommend, metrics."""
    try:
        with open(output / "units.csv", newline="") as handle:
            columns = ("train_data_s", "fit_s", "recommend_s", "metrics_s")
            return sum(sum(float(row[c] or 0) for c in columns) for row in csv.DictReader(handle))
    except OSError:
        return None


def server_cpu_s(home: Path) -> float:
    """CPU seconds so far of every process of ``sweval up``'s servers recorded in ``home``."""
    import psutil

    state = json.loads((home / "servers.json").read_text())
    total = 0.0
    for server in state["servers"]:
        for process in psutil.process_iter():
            try:
                if os.getpgid(process.pid) == server["pid"]:
                    times = process.cpu_times()
                    total += times.user + times.system
            except (psutil.Error, OSError):
                continue
    return total


class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.logs = self.work / "logs"
        self.homes = {"up": self.work / "home-up", "plain": self.work / "home-plain"}
        self.records: list[dict[str, Any]] = []

    def say(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    def env(self, variant: str) -> dict[str, str]:
        home = self.homes["up" if variant == "warm" else variant]
        env = {"SWEVAL_HOME": str(home), "PREFECT_HOME": str(home / "prefect")}
        if variant == "up":
            env["SWEVAL_WARM"] = "0"
        return env

    def warm_children(self) -> int:
        """Commands the warm process has run so far (its log's lines)."""
        try:
            log = (self.homes["up"] / "logs" / "warm-server.log").read_text()
        except OSError:
            return 0
        return sum(": sweval run" in line for line in log.splitlines())

    def sweval_cmd(self, w: dict[str, Any], algorithm: str, output: Path) -> list[str]:
        return [SWEVAL, "run", "--data", w["parquet"], "--window", f"{w['width']}s",
                "--folds", str(w["folds"]), "--start", str(w["t0"]), "--algorithms", algorithm,
                "--u-min", str(w["u_min"]), "--no-progress", "--output", str(output)]

    def sweval(self, variant: str, w: dict[str, Any], algorithm: str, tag: str) -> dict[str, Any]:
        output = self.work / "outputs" / f"{variant}-{w['key']}-{algorithm}-{tag}"
        subprocess.run(["rm", "-rf", str(output)], check=True)
        before = server_cpu_s(self.homes["up"]) if variant in ("up", "warm") else 0.0
        children = self.warm_children()
        proc = run_child(self.sweval_cmd(w, algorithm, output),
                         log=self.logs / f"{output.name}.log", timeout=600,
                         env=self.env(variant))
        record = {"process": proc, "engine_s": engine_s(output)}
        record["warm_child"] = self.warm_children() > children
        if variant in ("up", "warm"):
            record["server_cpu_s"] = server_cpu_s(self.homes["up"]) - before
            text = Path(proc["log"]).read_text(errors="replace")
            record["used_servers"] = "http://127.0.0.1" in text and "does not answer" not in text
        return record

    def rectools(self, w: dict[str, Any], algorithm: str, tag: str) -> dict[str, Any] | None:
        python = Path(self.args.venvs) / "rectools" / "bin" / "python"
        if not python.exists():
            return None
        out = self.logs / f"rectools-{w['key']}-{algorithm}-{tag}.json"
        proc = run_child([str(python), "benchmarks/peers/rectools_run.py", "--data", w["npz"],
                          *fold_args(w), "--algorithm", algorithm, "--u-min", str(w["u_min"]),
                          "--out", str(out)],
                         log=out.with_suffix(".log"), timeout=600)
        try:
            inner = json.loads(out.read_text())
        except (OSError, ValueError):
            inner = {"status": "failed"}
        return {"process": proc, "eval_s": inner.get("eval_s"), "status": inner.get("status")}

    def up(self) -> None:
        home = self.homes["up"]
        env = os.environ | {"OPENBLAS_NUM_THREADS": "1"} | self.env("warm")  # as run_child's
        env.setdefault("PYTHONWARNINGS", "ignore")
        result = subprocess.run(
            [SWEVAL, "up", "--prefect-port", str(self.args.prefect_port),
             "--mlflow-port", str(self.args.mlflow_port)],
            env=env, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise SystemExit(f"sweval up failed:\n{result.stderr}")
        self.say(f"sweval up ({home}): {result.stdout.strip()}")

    def down(self) -> None:
        subprocess.run([SWEVAL, "down"], env=os.environ | self.env("up"), check=False,
                       capture_output=True, timeout=120)

    def run(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        workloads = [prepare(self.work, name) for name in self.args.workloads.split(",")]
        algorithms = self.args.algorithms.split(",")
        self.up()
        try:
            for w in workloads:  # warm-up: databases, experiments, numba's cache
                for variant in ("warm", "up", "plain"):
                    self.say(f"warm-up {variant} {w['key']}")
                    self.sweval(variant, w, algorithms[0], "warmup")
            for rep in range(self.args.repeats):
                for w in workloads:
                    for algorithm in algorithms:
                        n = len(VARIANTS)
                        order = VARIANTS[rep % n:] + VARIANTS[:rep % n]
                        for variant in order:
                            if variant == "rectools":
                                record = self.rectools(w, algorithm, f"r{rep}")
                                if record is None:
                                    continue
                            else:
                                record = self.sweval(variant, w, algorithm, f"r{rep}")
                            record |= {"variant": variant, "workload": w["key"],
                                       "algorithm": algorithm, "repetition": rep}
                            self.records.append(record)
                            self.say(f"r{rep} {w['key']} {algorithm} {variant}: wall "
                                     f"{record['process']['wall_s']:.2f} s")
                            self.save()
        finally:
            self.down()

    def save(self) -> None:
        (self.work / "default-command.json").write_text(json.dumps(self.records, indent=1))


def report(records: list[dict[str, Any]]) -> str:
    """Medians per (workload, algorithm, variant), and every repetition."""
    lines = [
        "| workload | algorithm | warm: wall / fixed overhead | up (SWEVAL_WARM=0): wall / "
        "fixed overhead | plain: wall / fixed overhead | RecTools wall | RecTools / warm | "
        "RecTools / up | RecTools / plain | repetitions (warm, up, plain, RecTools wall) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["workload"], r["algorithm"]) for r in records})
    for workload, algorithm in keys:
        mine = [r for r in records if (r["workload"], r["algorithm"]) == (workload, algorithm)]

        def of(variant: str, field: str, mine: list[dict[str, Any]] = mine) -> list[float]:
            values = []
            for r in mine:
                if r["variant"] != variant or r["process"]["returncode"] != 0:
                    continue
                if variant == "warm" and not r.get("warm_child"):
                    continue  # it fell back: not a warm measurement
                wall = r["process"]["wall_s"]
                value = {"wall": wall, "fixed": wall - (r.get("engine_s") or 0.0),
                         "server": r.get("server_cpu_s", 0.0)}[field]
                values.append(value)
            return values

        def med(values: list[float]) -> float | None:
            return statistics.median(values) if values else None

        def fmt(value: float | None) -> str:
            return "–" if value is None else f"{value:.2f}"

        walls = {v: med(of(v, "wall")) for v in VARIANTS}
        rt = walls["rectools"]
        columns = [f"{fmt(walls[v])} / {fmt(med(of(v, 'fixed')))}" for v in ("warm", "up", "plain")]
        ratios = [f"{fmt(rt / walls[v] if rt and walls[v] else None)}×"
                  for v in ("warm", "up", "plain")]
        n = max(len(of(v, "wall")) for v in VARIANTS)
        series = [of(v, "wall") + [None] * (n - len(of(v, "wall"))) for v in VARIANTS]
        reps = "; ".join("/".join(fmt(v) for v in column) for column in zip(*series, strict=True))
        lines.append(f"| {workload} | {algorithm} | {' | '.join(columns)} | {fmt(rt)} | "
                     f"{' | '.join(ratios)} | {reps} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/work/bench-default")
    parser.add_argument("--workloads", default="ml,gen")
    parser.add_argument("--algorithms", default="pop,item-knn")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--venvs", default="/work/bench-venvs")
    parser.add_argument("--prefect-port", type=int, default=4200)
    parser.add_argument("--mlflow-port", type=int, default=5000)
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    for name in ("MLFLOW_TRACKING_URI", "PREFECT_API_URL"):  # each variant's home decides
        os.environ.pop(name, None)
    if not args.report_only:
        runner = Runner(args)
        runner.run()
    records = json.loads((Path(args.work) / "default-command.json").read_text())
    print(report(records))


if __name__ == "__main__":
    main()
