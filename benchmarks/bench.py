"""SW-EVAL against its peers, on the same data and the same folds (issue 8). Run on demand.

::

    .venv/bin/python benchmarks/bench.py                       # everything (about 2 h on 2 cores)
    .venv/bin/python benchmarks/bench.py --quick               # MovieLens only, small budgets
    .venv/bin/python benchmarks/bench.py --workloads gen --peers rectools --algorithms pop,item-knn
    .venv/bin/python benchmarks/bench.py --report-only         # reprint from saved results

What it does, per workload (``ml``: MovieLens latest-small, 30 weekly folds, u_min 1; ``gen``:
the generated log at scale 1, 30 daily folds, u_min 100; k = 5, 10, 15, 20 everywhere):

1. exports the log once, after SW-EVAL's loading and de-duplication, as ``<work>/<w>.parquet``
   (for SW-EVAL) and ``<w>.npz`` (for the peers), columns user, item, timestamp;
2. fixes the folds: width W, n folds, t0 = ceil_day(t_max + 1 s) − n·W (RecTools can only anchor
   folds at the ceiling of the last timestamp, so everybody uses its anchor; for daily folds this
   is SW-EVAL's default anchor too);
3. runs SW-EVAL stage by stage in a child process (``benchmarks/sweval_run.py``);
4. runs ``sweval run`` per algorithm as a user would (whole command: start-up, imports, load,
   evaluation, outputs; its own wall time and peak RSS), for the non-learned algorithms;
5. runs the cost floor (``benchmarks/floor.py``);
6. runs each peer, one child process per (peer, algorithm), with the peer's virtual environment
   (``--venvs``/<peer>/bin/python ``benchmarks/peers/<peer>_run.py``); wall, peak RSS and CPU
   times come from ``os.wait4``; evaluation time is measured inside the child (imports and data
   load excluded); slow peers stop after ``--budget`` seconds of evaluation and their total is
   extrapolated from the folds done (marked ``~``);
7. scaling: SW-EVAL (and, with ``--scaling-peers``, peers) for ``--folds-list`` at scale 1 and
   for ``--scales`` at 30 folds;
8. the ALS duel (``--duel-repeats`` N, default 3): ALS is implicit's fits and little else, for us
   and for every peer, and the same fits vary by ±30 % between processes on a shared VM (see
   RESULTS.md). One process each cannot decide "at least as fast as the fastest peer", so SW-EVAL's
   ALS, the bare fits (floor) and each ``--duel-peers`` run N times, interleaved, the order
   rotated every repetition; the report compares medians and gives every repetition's ratios.

Every child writes JSON under ``<work>/results``; the report is built from those files, so a
long run can be resumed (``--reuse``) or reprinted (``--report-only``). The environment of every
child has ``OPENBLAS_NUM_THREADS=1`` (implicit asks for it); peers otherwise run with their own
threading defaults (implicit's kNN and ALS use every core).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NON_LEARNED = ["pop", "pop-n", "item-knn", "user-knn"]
#: What each peer runner implements (see the runner's docstring for the exact configuration).
PEER_ALGORITHMS = {
    "rectools": ["pop", "pop-n", "item-knn", "svd", "als"],
    "lenskit": ["pop", "pop-n", "item-knn", "user-knn", "svd", "als"],
    "recpack": ["pop", "item-knn", "svd", "als"],
    "streamsight": ["pop", "item-knn"],
}
PEERS = list(PEER_ALGORITHMS)
DAY = 86_400
WORKLOADS = {
    "ml": {"label": "MovieLens latest-small, 30 weekly folds", "width": 7 * DAY, "folds": 30,
           "u_min": 1},
    "gen": {"label": "generated scale 1, 30 daily folds", "width": DAY, "folds": 30,
            "u_min": 100, "scale": 1.0},
}


# ------------------------------------------------------------------------------ child processes
def run_child(cmd: list[str], *, log: Path, timeout: float, env: dict[str, str] | None = None,
              cwd: Path = ROOT, on_start: Any = None) -> dict[str, Any]:
    """Run ``cmd`` in its own process group; wall and CPU times via ``os.wait4``
    (``on_start(pid)``, if given, is called once the child is started).

    Peak RSS comes from GNU ``time -f %M`` wrapped around the command: on Linux a process's
    ``ru_maxrss`` survives ``execve``, so a child forked straight from this (large) driver would
    report at least the driver's own RSS.
    """
    rss_file = log.with_suffix(".maxrss")
    if Path("/usr/bin/time").exists():
        cmd = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file), *cmd]
    child_env = dict(os.environ)
    child_env["OPENBLAS_NUM_THREADS"] = "1"
    child_env.setdefault("PYTHONWARNINGS", "ignore")
    if env:
        child_env.update(env)
    log.parent.mkdir(parents=True, exist_ok=True)
    load_before = loadavg()
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env=child_env, start_new_session=True)
        if on_start is not None:
            on_start(proc.pid)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
    try:
        peak_kb = float(rss_file.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        peak_kb = float("nan")  # killed before time wrote it
    return {
        "wall_s": wall,
        "peak_rss_mb": peak_kb / 1024,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "returncode": os.waitstatus_to_exitcode(status),
        "timed_out": killed.is_set(),
        "log": str(log),
        "loadavg_1min_before_after": [load_before, loadavg()],
    }


def loadavg() -> float:
    """The 1-minute load average (the machine may be shared: recorded with every child)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def load_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


# ------------------------------------------------------------------------------ workloads
def prepare(work: Path, name: str, scale: float | None = None, n_folds: int | None = None,
            width: int | None = None) -> dict[str, Any]:
    """Export the log of a workload once (SW-EVAL's loader + dedup) and fix its folds."""
    spec = dict(WORKLOADS["gen" if name.startswith("gen") else name])
    if scale is not None:
        spec["scale"] = scale
    if n_folds is not None:
        spec["folds"] = n_folds
    if width is not None:
        spec["width"] = width
    tag = name if name == "ml" else f"gen-s{spec['scale']:g}"
    meta_path = work / f"{tag}.json"
    meta = load_json(meta_path)
    if meta is None:
        import numpy as np
        import pandas as pd

        from sweval.data.loaders import load_log
        from sweval.data.log import InteractionLog

        clock = time.perf_counter()
        if name == "ml":
            log = load_log("movielens-latest-small")
        else:
            from sweval.data.synthetic import generate_log

            frame = generate_log(scale=spec["scale"], seed=0)
            log = InteractionLog.from_frame(frame, policy_col="policy", source=tag)
        prepare_s = time.perf_counter() - clock
        frame = pd.DataFrame({"user": log.user, "item": log.item, "timestamp": log.timestamp})
        frame.to_parquet(work / f"{tag}.parquet", index=False)
        np.savez(work / f"{tag}.npz", **{c: frame[c].to_numpy() for c in frame.columns})
        meta = {"tag": tag, "n_interactions": len(log), "n_users": int(log.n_users),
                "n_items": int(log.n_items), "t_min": int(log.t_min), "t_max": int(log.t_max),
                "generate_or_read_s": prepare_s, "n_duplicates_removed": int(log.n_duplicates)}
        meta_path.write_text(json.dumps(meta, indent=1))
    end = -(-(meta["t_max"] + 1) // DAY) * DAY
    return meta | {
        "name": name, "label": spec["label"], "width": spec["width"], "folds": spec["folds"],
        "u_min": spec["u_min"], "t0": end - spec["folds"] * spec["width"],
        "parquet": str(work / f"{tag}.parquet"), "npz": str(work / f"{tag}.npz"),
        "key": f"{tag}-f{spec['folds']}",
    }


def fold_args(w: dict[str, Any]) -> list[str]:
    return ["--t0", str(w["t0"]), "--width", str(w["width"]), "--n-folds", str(w["folds"])]


# ------------------------------------------------------------------------------ the runs
class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work)
        self.results = self.work / "results"
        self.results.mkdir(parents=True, exist_ok=True)
        self.python = str(ROOT / ".venv" / "bin" / "python")

    def say(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def _run(self, out: Path, cmd: list[str], timeout: float,
             env: dict[str, str] | None = None) -> dict[str, Any] | None:
        if self.args.reuse and out.exists():
            return load_json(out)
        self.say(f"run {out.name}")
        proc = run_child(cmd + ["--out", str(out.with_suffix(".inner.json"))],
                         log=out.with_suffix(".log"), timeout=timeout, env=env)
        inner = load_json(out.with_suffix(".inner.json")) or {
            "status": "timeout" if proc["timed_out"] else f"crashed (exit {proc['returncode']})"
        }
        if proc["timed_out"]:
            inner["status"] = f"killed at the {timeout:.0f} s timeout"
        record = inner | {"process": proc}
        out.write_text(json.dumps(record, indent=1))
        self.say(f"  -> {record.get('status', 'ok')}, wall {proc['wall_s']:.1f} s, "
                 f"RSS {proc['peak_rss_mb']:.0f} MB")
        return record

    def sweval(self, w: dict[str, Any], algorithms: list[str], tag: str = "",
               params: str = "{}", out: Path | None = None) -> None:
        out = out or self.results / f"{w['key']}__sweval{tag}.json"
        self._run(out, [self.python, "benchmarks/sweval_run.py", "--data", w["parquet"],
                        *fold_args(w), "--algorithms", ",".join(algorithms),
                        "--u-min", str(w["u_min"]), "--params", params],
                  timeout=self.args.timeout)

    def cli(self, w: dict[str, Any], algorithm: str, bare: bool = False) -> None:
        """``sweval run`` as a user types it, reading the same file, one algorithm.

        ``bare`` adds ``--no-prefect --no-tracking`` (no Prefect flow, no MLflow logging).
        """
        out = self.results / f"{w['key']}__cli{'-bare' if bare else ''}__{algorithm}.json"
        if self.args.reuse and out.exists():
            return
        self.say(f"run {out.name}")
        home = self.work / "sweval-home"
        cmd = [str(ROOT / ".venv" / "bin" / "sweval"), "run", "--data", w["parquet"],
               "--window", f"{w['width']}s", "--folds", str(w["folds"]), "--start", str(w["t0"]),
               "--algorithms", algorithm, "--u-min", str(w["u_min"]),
               "--output", str(self.work / "cli-output" / f"{w['key']}-{algorithm}-{bare}")]
        subprocess.run(["rm", "-rf", cmd[-1]], check=False)
        if bare:
            cmd += ["--no-prefect", "--no-tracking"]
        proc = run_child(cmd, log=out.with_suffix(".log"), timeout=self.args.timeout,
                         env={"SWEVAL_HOME": str(home),
                              "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db"})
        out.write_text(json.dumps({"process": proc, "cmd": cmd}, indent=1))
        self.say(f"  -> exit {proc['returncode']}, wall {proc['wall_s']:.1f} s")

    def overhead(self, w: dict[str, Any], algorithm: str = "pop") -> None:
        """Orchestration and tracking overhead: ``sweval run`` with and without Prefect / MLflow.

        Each variant runs twice: first with an empty ``SWEVAL_HOME`` (fresh Prefect and MLflow
        databases), then again with the state the first run left (the usual case).
        """
        variants = {"prefect+mlflow": [], "mlflow only": ["--no-prefect"],
                    "bare": ["--no-prefect", "--no-tracking"]}
        for label, flags in variants.items():
            home = self.work / f"home-{label.replace(' ', '-').replace('+', '-')}"
            subprocess.run(["rm", "-rf", str(home)], check=False)
            for attempt in ("fresh", "warm"):
                out = self.results / f"overhead__{label.replace(' ', '-')}__{attempt}.json"
                if self.args.reuse and out.exists():
                    continue
                self.say(f"run {out.name}")
                target = self.work / "cli-output" / f"overhead-{label}-{attempt}"
                subprocess.run(["rm", "-rf", str(target)], check=False)
                cmd = [str(ROOT / ".venv" / "bin" / "sweval"), "run", "--data", w["parquet"],
                       "--window", f"{w['width']}s", "--folds", str(w["folds"]),
                       "--start", str(w["t0"]), "--algorithms", algorithm,
                       "--u-min", str(w["u_min"]), "--no-progress", "--output", str(target),
                       *flags]
                proc = run_child(cmd, log=out.with_suffix(".log"), timeout=self.args.timeout,
                                 env={"SWEVAL_HOME": str(home),
                                      "MLFLOW_TRACKING_URI": f"sqlite:///{home}/mlflow.db"})
                out.write_text(json.dumps({"process": proc, "cmd": cmd, "variant": label,
                                           "attempt": attempt, "algorithm": algorithm}, indent=1))
                self.say(f"  -> exit {proc['returncode']}, wall {proc['wall_s']:.1f} s")

    def cli_imports(self) -> None:
        out = self.results / "cli_imports.json"
        if self.args.reuse and out.exists():
            return
        proc = run_child([self.python, "-c", "import sweval.flows.cli.app, sweval.evaluators.run.plan, sweval.algorithms.registry"],
                         log=out.with_suffix(".log"), timeout=120)
        out.write_text(json.dumps({"process": proc}, indent=1))

    def floor(self, w: dict[str, Any], skip: str = "", out: Path | None = None) -> None:
        out = out or self.results / f"{w['key']}__floor.json"
        if self.args.reuse and out.exists():
            return
        self.say(f"run {out.name}")
        proc = run_child([self.python, "benchmarks/floor.py", "--data", w["parquet"], *fold_args(w),
                          "--u-min", str(w["u_min"]), "--out", str(out.with_suffix(".inner.json")),
                          "--skip", skip], log=out.with_suffix(".log"), timeout=self.args.timeout)
        inner = load_json(out.with_suffix(".inner.json")) or {"status": "failed"}
        out.write_text(json.dumps(inner | {"process": proc}, indent=1))

    def peer(self, w: dict[str, Any], peer: str, algorithm: str, budget: float,
             out: Path | None = None) -> None:
        python = Path(self.args.venvs) / peer / "bin" / "python"
        out = out or self.results / f"{w['key']}__{peer}__{algorithm}.json"
        if not python.exists():
            if not out.exists():
                out.write_text(json.dumps({"status": f"not installed ({python} missing)"}))
            return
        env = {"STREAMSIGHT_ROOT": str(self.work / "streamsight-root")}
        (self.work / "streamsight-root").mkdir(exist_ok=True)
        self._run(out, [str(python), f"benchmarks/peers/{peer}_run.py", "--data", w["npz"],
                        *fold_args(w), "--algorithm", algorithm, "--u-min", str(w["u_min"]),
                        "--budget", str(budget)],
                  timeout=max(budget * 2, 120) + 120, env=env)


    def duel(self, w: dict[str, Any], repeats: int, peers: list[str]) -> None:
        """ALS only: SW-EVAL, the bare fits and ``peers``, ``repeats`` times, interleaved.

        Repetition r runs the contenders in the order rotated by r, so a slow stretch of the
        machine hits each of them in turn. Files: ``<w>__duel-r<r>__<contender>.json``.
        """
        contenders = ["sweval", "floor", *peers]
        for r in range(1, repeats + 1):
            order = contenders[(r - 1) % len(contenders):] + contenders[:(r - 1) % len(contenders)]
            for name in order:
                out = self.results / f"{w['key']}__duel-r{r}__{name}.json"
                if name == "sweval":
                    self.sweval(w, ["als"], out=out)
                elif name == "floor":
                    self.floor(w, skip="svd,knn", out=out)
                else:
                    self.peer(w, name, "als", self.args.budget * 10, out=out)


def duel_report(bench: Bench, w: dict[str, Any]) -> list[str]:
    """The ALS duel's table: every repetition's seconds and ratios, then the medians."""
    res = bench.results
    runs = sorted({int(p.name.split("__duel-r")[1].split("__")[0])
                   for p in res.glob(f"{w['key']}__duel-r*__*.json") if ".inner" not in p.name})
    if not runs:
        return []
    peers = sorted({p.stem.split("__")[-1] for p in res.glob(f"{w['key']}__duel-r*__*.json")
                    if ".inner" not in p.name} - {"sweval", "floor"})
    rows, columns = [], {"ours": [], "bare": [], "inside": [], **{p: [] for p in peers}}
    for r in runs:
        ours = load_json(res / f"{w['key']}__duel-r{r}__sweval.json") or {}
        floor = load_json(res / f"{w['key']}__duel-r{r}__floor.json") or {}
        mine = ours_per_algorithm(ours, "als") if "per_algorithm" in ours else None
        bare = floor.get("totals", {}).get("als_fit")
        theirs = {}
        for p in peers:
            rec = load_json(res / f"{w['key']}__duel-r{r}__{p}.json") or {}
            value, approx = peer_eval(rec)
            theirs[p] = None if approx else value
        for key, value in (("ours", mine), ("bare", bare), *theirs.items()):
            if value is not None:
                columns[key].append(value)
        inside = ours.get("als_library_fit_s")
        if inside is not None:
            columns["inside"].append(inside)
        rows.append((str(r), mine, bare, theirs, inside))
    median = {k: statistics.median(v) if v else None for k, v in columns.items()}
    rows.append(("median", median["ours"], median["bare"], {p: median[p] for p in peers},
                 median["inside"]))
    lines = [(f"\nALS duel, {len(runs)} interleaved repetitions (one process each; eval seconds "
              "as in the main table; bare = the floor's implicit fits alone):\n")]
    head = ["repetition", "SW-EVAL", "bare fits", "SW-EVAL / bare",
            "implicit's fit calls in SW-EVAL's process", "SW-EVAL / those"]
    for p in peers:
        head += [p, f"{p} / SW-EVAL"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, mine, bare, theirs, inside in rows:
        cells = [label, fmt_s(mine), fmt_s(bare),
                 f"{mine / bare:.2f}x" if mine and bare else "-", fmt_s(inside),
                 f"{mine / inside:.3f}x" if mine and inside else "-"]
        for p in peers:
            cells += [fmt_s(theirs[p]), f"{theirs[p] / mine:.2f}x" if mine and theirs[p] else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ------------------------------------------------------------------------------ the report
def ours_per_algorithm(rec: dict[str, Any], name: str, cpu: bool = False) -> float:
    """SW-EVAL's evaluation time charged to one algorithm (fold building charged in full).

    = plan + every training matrix + the algorithm's units (persisting them included) + its
    share of collecting (measuring the stored lists). With ``cpu``, the units and training
    matrices count CPU time (plan and collect, both small, count wall time).
    """
    n = len(rec["algorithms"])
    unit = rec["per_algorithm"][name]["unit_cpu" if cpu else "unit_wall"]
    train = rec["train_data_cpu_s" if cpu else "train_data_s"]
    return rec["plan_s"] + train + unit + rec["collect_s"] / n


def fmt_s(value: float | None, approx: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"
    return ("~" if approx else "") + text


def fmt_r(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def peer_eval(rec: dict[str, Any], cpu: bool = False) -> tuple[float | None, bool]:
    key = "eval_cpu_s" if cpu else "eval_s"
    if rec.get(key + "_extrapolated") is not None:
        return rec[key + "_extrapolated"], True
    if rec.get("status") == "ok":
        return rec.get(key), False
    return None, False


def report(bench: Bench, workloads: list[dict[str, Any]], peers: list[str],
           algorithms: list[str]) -> str:
    res = bench.results
    lines: list[str] = []
    add = lines.append
    for w in workloads:
        ours = load_json(res / f"{w['key']}__sweval.json")
        add(f"\n### {w['label']} ({w['n_interactions']:,} interactions, {w['n_users']:,} users, "
            f"{w['n_items']:,} items; t0 = {w['t0']}, u_min = {w['u_min']})\n")
        if ours is None or "per_algorithm" not in ours:
            add(f"SW-EVAL run missing or failed: {ours and ours.get('status')}\n")
            lines += duel_report(bench, w)
            continue
        names = [a for a in algorithms if a in ours["per_algorithm"]]
        # --- main table: evaluation seconds, speed-up, Recall@10
        add("Evaluation seconds, wall (CPU); speed-up = peer / SW-EVAL, wall and CPU; "
            "R@10 = canonical Recall@10, macro over folds.\n")
        head = ["algorithm", "SW-EVAL eval s", "SW-EVAL R@10"]
        for p in peers:
            head += [f"{p} eval s", f"{p}/ours", f"{p} R@10"]
        add("| " + " | ".join(head) + " |")
        add("|" + "---|" * len(head))
        for a in names:
            mine = ours_per_algorithm(ours, a)
            mine_cpu = ours_per_algorithm(ours, a, cpu=True)
            row = [a, f"{fmt_s(mine)} ({fmt_s(mine_cpu)})", fmt_r(ours["recall10"].get(a))]
            for p in peers:
                rec = load_json(res / f"{w['key']}__{p}__{a}.json")
                if rec is None or a not in PEER_ALGORITHMS.get(p, []):
                    row += ["n/a", "", ""]
                    continue
                value, approx = peer_eval(rec)
                if value is None:
                    row += [str(rec.get("status", "?"))[:40], "", ""]
                    continue
                cpu, _ = peer_eval(rec, cpu=True)
                done = ("" if rec.get("status") == "ok"
                        else f" [{rec.get('folds_done')}/{w['folds']} folds]")
                recall = fmt_r(rec.get("recall10"))
                n_done = rec.get("folds_done") or 0
                if done and n_done and ours["recall10_per_fold"].get(a):
                    same = ours["recall10_per_fold"][a][:n_done]
                    recall += f" (ours {sum(same) / len(same):.4f} on those folds)"
                row += [f"{fmt_s(value, approx)} ({fmt_s(cpu, approx)}){done}",
                        f"{value / mine:.1f}x / {cpu / mine_cpu:.1f}x" if cpu else
                        f"{value / mine:.1f}x", recall]
            add("| " + " | ".join(row) + " |")
        variant = load_json(res / f"{w['key']}__sweval-userknn-cosine.json")
        if variant and "per_algorithm" in variant:
            lk = load_json(res / f"{w['key']}__lenskit__user-knn.json") or {}
            n_done = lk.get("folds_done") or len(variant["recall10_per_fold"]["user-knn"])
            same = variant["recall10_per_fold"]["user-knn"][:n_done]
            add(f"\nuser-knn with weighting=cosine (LensKit's scoring): R@10 "
                f"{variant['recall10']['user-knn']:.4f} over all folds, "
                f"{sum(same) / len(same):.4f} over the first {n_done}; eval "
                f"{ours_per_algorithm(variant, 'user-knn'):.1f} s "
                f"(CPU {ours_per_algorithm(variant, 'user-knn', cpu=True):.1f} s)")
        warm = load_json(res / f"{w['key']}__sweval-als-warm.json")
        if warm and "per_algorithm" in warm and "als" in ours["per_algorithm"]:
            exact_k = ours.get("recall_at_k", {}).get("als", {})
            warm_k = warm.get("recall_at_k", {}).get("als", {})
            add("\nDeviation `als.warm_start=true` (3 sweeps from the previous fold's factors "
                "instead of 15 from random): eval "
                f"{ours_per_algorithm(warm, 'als'):.1f} s vs exact "
                f"{ours_per_algorithm(ours, 'als'):.1f} s "
                f"({ours_per_algorithm(ours, 'als') / ours_per_algorithm(warm, 'als'):.1f}x "
                "faster); Recall@k exact → warm (Δ%): " + ", ".join(
                    f"@{k} {exact_k[k]:.4f} → {warm_k[k]:.4f} "
                    f"({100 * (warm_k[k] / exact_k[k] - 1):+.1f}%)"
                    for k in sorted(exact_k, key=int) if k in warm_k))
        lines += duel_report(bench, w)
        # --- SW-EVAL stage split
        add("\nSW-EVAL stages (s): "
            + ", ".join(f"{k} {ours.get(k + '_s', 0):.2f}" for k in
                        ("import", "kernel_load", "load", "plan", "train_data", "persist",
                         "collect", "write"))
            + f"; engine total {ours['engine_s']:.2f} (CPU {ours.get('engine_cpu_s', 0):.2f})"
              f"; child wall "
              f"{ours['process']['wall_s']:.1f}; peak RSS {ours['process']['peak_rss_mb']:.0f} MB\n")
        add("| algorithm | fit | recommend | metrics | other per unit | unit wall | unit CPU |")
        add("|---|---|---|---|---|---|---|")
        for a in names:
            s = ours["per_algorithm"][a]
            other = s["unit_wall"] - s["fit"] - s["recommend"] - s["metrics"]
            add(f"| {a} | {s['fit']:.2f} | {s['recommend']:.2f} | {s['metrics']:.2f} | "
                f"{other:.2f} | {s['unit_wall']:.2f} | {s.get('unit_cpu', 0):.2f} |")
        load = ours["process"].get("loadavg_1min_before_after")
        if load:
            add(f"\n1-min load average before/after the SW-EVAL child: {load[0]:.1f} / {load[1]:.1f}")
        # --- whole processes
        add("\nWhole process (one process per tool and algorithm): wall s / CPU s (user+sys) / "
            "peak RSS MB; peers also: imports s / load s (measured inside)\n")
        head = ["algorithm", "sweval run (Prefect + MLflow)", "sweval run --no-prefect "
                "--no-tracking"] + peers
        add("| " + " | ".join(head) + " |")
        add("|" + "---|" * len(head))
        for a in names:
            row = [a]
            for kind in ("cli", "cli-bare"):
                cli = load_json(res / f"{w['key']}__{kind}__{a}.json")
                row.append(f"{cli['process']['wall_s']:.1f} / "
                           f"{cli['process']['user_s'] + cli['process']['sys_s']:.1f} / "
                           f"{cli['process']['peak_rss_mb']:.0f}"
                           if cli and cli["process"]["returncode"] == 0 else "-")
            for p in peers:
                rec = load_json(res / f"{w['key']}__{p}__{a}.json")
                if rec is None or "process" not in rec:
                    row.append("n/a" if a not in PEER_ALGORITHMS.get(p, []) else "-")
                    continue
                pr = rec["process"]
                partial = "" if rec.get("status") == "ok" else " (partial)"
                row.append(f"{pr['wall_s']:.1f} / {pr['user_s'] + pr['sys_s']:.1f} / "
                           f"{pr['peak_rss_mb']:.0f} / {rec.get('import_s', 0):.1f} / "
                           f"{rec.get('load_s', 0) or 0:.2f}{partial}")
            add("| " + " | ".join(row) + " |")
        # --- floor
        fl = load_json(res / f"{w['key']}__floor.json")
        if fl and "totals" in fl:
            t = fl["totals"]
            add("\nCost floor (sum over folds, s): " + ", ".join(f"{k} {v:.2f}" for k, v in t.items()))
            for a, fit, score in (("svd", "svd_fit", "svd_score"), ("als", "als_fit", "als_score")):
                if a in ours["per_algorithm"] and fit in t:
                    mine = ours["per_algorithm"][a]["unit_wall"] + ours["train_data_s"]
                    inside = ours.get(f"{a}_library_fit_s")
                    add(f"- {a}: SW-EVAL {mine:.1f} s (units + training matrices) vs bare fits "
                        f"{t[fit]:.1f} s -> {mine / t[fit]:.3f}x (floor incl. csr + scoring "
                        f"{t[fit] + t[score] + t['csr']:.1f} s)"
                        + (f"; vs implicit's fit calls inside SW-EVAL's process {inside:.1f} s "
                           f"-> {mine / inside:.3f}x" if inside else ""))
        # --- canonical vs native recall of peers
        notes = []
        for p in peers:
            for a in names:
                rec = load_json(res / f"{w['key']}__{p}__{a}.json")
                if not rec or not rec.get("folds"):
                    continue
                nat = [f.get("native_recall10") for f in rec["folds"] if "native_recall10" in f]
                miss = sum(f.get("missing_users", 0) for f in rec["folds"])
                extra = sum(f.get("extra_users", 0) for f in rec["folds"])
                if nat:
                    notes.append(f"{p}/{a}: native {sum(nat) / len(nat):.4f}, canonical "
                                 f"{rec['recall10']:.4f}, eligible users without a list {miss}, "
                                 f"lists for non-eligible users {extra}")
        if notes:
            add("\nPeer Recall@10, native vs canonical (mean over the folds done): ")
            add("\n".join(f"- {n}" for n in notes))
    # --- orchestration / tracking overhead
    over = sorted(res.glob("overhead__*.json"))
    if over:
        add("\n### sweval run: orchestration and tracking overhead (generated scale 1, 30 folds, "
            "pop; its own engine time is in the main table)\n")
        add("| variant | first run (fresh state) wall s / CPU s / RSS MB | second run |")
        add("|---|---|---|")
        by_variant: dict[str, dict[str, Any]] = {}
        for path in over:
            rec = load_json(path)
            if rec:
                by_variant.setdefault(rec["variant"], {})[rec["attempt"]] = rec["process"]
        for label, runs in by_variant.items():
            cells = []
            for attempt in ("fresh", "warm"):
                pr = runs.get(attempt)
                cells.append("-" if pr is None else
                             f"{pr['wall_s']:.1f} / {pr['user_s'] + pr['sys_s']:.1f} / "
                             f"{pr['peak_rss_mb']:.0f}" + ("" if pr["returncode"] == 0
                                                          else f" (exit {pr['returncode']})"))
            add(f"| {label} | " + " | ".join(cells) + " |")
    # --- scaling
    scaling = sorted((p for p in res.glob("scaling__*.json") if ".inner" not in p.name),
                     key=_scaling_key)
    if scaling:
        peer_cols = sorted({p.stem.split("__")[1].rsplit("-s", 1)[0]
                            for p in res.glob("pscaling__*.json") if ".inner" not in p.name})
        add("\n### Scaling (generated log; SW-EVAL eval seconds per algorithm as in the main "
            "table; peers: eval seconds)\n")
        head = (["run", "interactions", "folds"] + NON_LEARNED
                + ["SW-EVAL engine total", "engine s / fold"] + peer_cols)
        add("| " + " | ".join(head) + " |")
        add("|" + "---|" * len(head))
        for path in scaling:
            rec = load_json(path)
            if not rec or "per_algorithm" not in rec:
                continue
            point = path.stem.removeprefix("scaling__")
            cells = [fmt_s(ours_per_algorithm(rec, a)) if a in rec["per_algorithm"] else "-"
                     for a in NON_LEARNED]
            peers_cells = []
            for col in peer_cols:
                prec = load_json(res / f"pscaling__{col}-{point}.json")
                value, approx = peer_eval(prec) if prec else (None, False)
                peers_cells.append(fmt_s(value, approx))
            add(f"| {point} | {rec['data']['n_interactions']:,} | {rec['n_folds_used']} | "
                + " | ".join(cells) + f" | {rec['engine_s']:.1f} | "
                f"{rec['engine_s'] / max(rec['n_folds_used'], 1):.3f} |"
                + "".join(f" {c} |" for c in peers_cells))
    return "\n".join(lines)


def _scaling_key(path: Path) -> tuple[float, int]:
    point = path.stem.removeprefix("scaling__")  # s<scale>-f<folds>
    scale, folds = point.removeprefix("s").split("-f")
    return float(scale), int(folds)


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, {platform.platform()}, "
            f"Python {platform.python_version()}")


# ------------------------------------------------------------------------------ main
def main() -> None:
    from sweval.evaluators.config.fields import ALL_ALGORITHMS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="ml,gen")
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--algorithms", default=",".join(ALL_ALGORITHMS))
    p.add_argument("--scales", default="0.25,0.5,1,2")
    p.add_argument("--folds-list", default="10,30,90")
    p.add_argument("--scaling-algorithms", default=",".join(NON_LEARNED))
    p.add_argument("--scaling-peers", default="", help="peers also run for the scaling points")
    p.add_argument("--budget", type=float, default=150.0,
                   help="seconds of evaluation after which a slow peer stops (then extrapolated)")
    p.add_argument("--timeout", type=float, default=3600.0, help="hard limit per SW-EVAL child")
    p.add_argument("--duel-repeats", type=int, default=3,
                   help="ALS duel repetitions per workload (0: none; see step 8)")
    p.add_argument("--duel-peers", default="rectools", help="peers in the ALS duel")
    p.add_argument("--quick", action="store_true",
                   help="MovieLens only, budget 20 s, no scaling, no CLI runs")
    p.add_argument("--skip", default="",
                   help="comma-separated steps to skip: sweval,cli,overhead,floor,peers,duel,scaling")
    p.add_argument("--exclude", default="",
                   help="peer:algorithm pairs not to run, comma-separated (e.g. recpack:als)")
    p.add_argument("--work", default="/tmp/sweval-bench-i8")
    p.add_argument("--venvs", default="/work/bench-venvs")
    p.add_argument("--reuse", action="store_true", help="keep results already in --work")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--markdown", help="also write the report to this file")
    args = p.parse_args()
    if args.quick:
        args.workloads, args.budget = "ml", 20.0
        args.skip = ",".join(filter(None, [args.skip, "scaling", "cli"]))
    skip = set(filter(None, args.skip.split(",")))
    excluded = set(filter(None, args.exclude.split(",")))
    peers = [x for x in args.peers.split(",") if x]
    algorithms = [a for a in args.algorithms.split(",") if a]
    bench = Bench(args)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    workloads = [prepare(bench.work, name) for name in args.workloads.split(",") if name]

    if not args.report_only:
        bench.cli_imports()
        for w in workloads:
            if "sweval" not in skip:
                bench.sweval(w, algorithms)
                if "user-knn" in algorithms:  # LensKit's user-kNN weighs by cosine
                    bench.sweval(w, ["user-knn"], tag="-userknn-cosine",
                                 params='{"user-knn": {"weighting": "cosine"}}')
                if "als" in algorithms:  # the warm-start deviation, against the exact run
                    bench.sweval(w, ["als"], tag="-als-warm",
                                 params='{"als": {"warm_start": true}}')
            if "cli" not in skip and w["name"] == "gen":
                for a in algorithms:
                    if a in NON_LEARNED:
                        bench.cli(w, a)
                        bench.cli(w, a, bare=True)
                if "overhead" not in skip:
                    bench.overhead(w)
            if "floor" not in skip:
                bench.floor(w, skip="" if {"svd", "als"} & set(algorithms) else "svd,als")
            if "peers" not in skip:
                for peer in peers:
                    for a in algorithms:
                        if a in PEER_ALGORITHMS.get(peer, []) and f"{peer}:{a}" not in excluded:
                            bench.peer(w, peer, a, args.budget)
            if "duel" not in skip and "als" in algorithms:
                bench.duel(w, args.duel_repeats,
                           [x for x in args.duel_peers.split(",") if x in peers])
        if "scaling" not in skip:
            scaling_algorithms = args.scaling_algorithms.split(",")
            points = [(1.0, int(n)) for n in args.folds_list.split(",")]
            points += [(float(s), 30) for s in args.scales.split(",") if float(s) != 1.0]
            for scale, n_folds in points:
                w = prepare(bench.work, "gen", scale=scale, n_folds=n_folds)
                out = bench.results / f"scaling__s{scale:g}-f{n_folds}.json"
                bench._run(out, [bench.python, "benchmarks/sweval_run.py", "--data", w["parquet"],
                                 *fold_args(w), "--algorithms", ",".join(scaling_algorithms),
                                 "--u-min", str(w["u_min"])], timeout=args.timeout)
                for peer in filter(None, args.scaling_peers.split(",")):
                    for a in scaling_algorithms:
                        if a in PEER_ALGORITHMS.get(peer, []):
                            python = Path(args.venvs) / peer / "bin" / "python"
                            bench._run(
                                bench.results / f"pscaling__{peer}-{a}-s{scale:g}-f{n_folds}.json",
                                [str(python), f"benchmarks/peers/{peer}_run.py", "--data",
                                 w["npz"], *fold_args(w), "--algorithm", a,
                                 "--u-min", str(w["u_min"]), "--budget", str(args.budget)],
                                timeout=max(args.budget * 3, 120) + 300)

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "algorithms", "evaluators", "data"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    text = (f"Machine: {machine()}\nSW-EVAL commit {commit}"
            + (" (engine files modified in the working tree)" if dirty else "") + "\n"
            + report(bench, workloads, peers, algorithms))
    imports = load_json(bench.results / "cli_imports.json")
    if imports:
        text += (f"\n\nImporting SW-EVAL's CLI modules in a fresh interpreter: "
                 f"{imports['process']['wall_s']:.2f} s wall.")
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
