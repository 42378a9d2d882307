"""ALS and BPR on the CPU against the GPU: fit time and Recall@10 on the same folds.

Run on demand on a machine with an NVIDIA GPU and ``implicit[gpu]`` (``uv sync --extra gpu``),
from the repository root::

    python -m benchmarks.gpu --workload movielens --seeds 0,1,2
    python -m benchmarks.gpu --workload synthetic --scale 1 --seeds 0,1,2 --max-seconds 120
    python -m benchmarks.gpu --workload synthetic --cpu-set bpr.threads=16   # an extra CPU row

Every (algorithm, device, seed) run goes over the same folds, each fold's training data built
once and shared, each unit through ``evaluators.units.engine.evaluate_unit`` (what ``sweval run`` does
for a unit, without the store). The GPU's seed-0 run is done twice, to say whether the GPU gives
the same lists again.

The tolerance (``docs/protocol.md``, "ALS and BPR on the GPU"). ``implicit`` draws a model's
initial factors differently on each device (ALS: uniform·0.01 on the CPU, another uniform draw
on the GPU; BPR's GPU samples its steps with cuRAND), so the same seed is not the same start and
a GPU run is judged as one more random start of the same model. With c_s and g_s the mean
Recall@10 over the common folds of CPU and GPU seed s, S seeds, and σ the CPU seeds' standard
deviation, the GPU is within tolerance when

    |mean(g) − mean(c)| ≤ max(3 σ √(2 / S), 0.01 · mean(c))

(three standard errors of a difference of two S-seed means drawn alike, with a floor of 1 % of
the CPU's Recall for when the seeds barely differ). Welch's t-test of g against c (scipy) is
printed beside it. A run stops its folds after ``--max-seconds`` of fit + recommend; the
comparison uses the folds every run of the algorithm finished.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: this folder must not shadow the package
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import argparse  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from benchmarks.algorithms import load_workload, parse_sets  # noqa: E402
from sweval.algorithms.implicit_device import cuda_unavailable_reason  # noqa: E402
from sweval.algorithms.registry import build_algorithm  # noqa: E402
from sweval.algorithms.train_data import TrainData  # noqa: E402
from sweval.data.log import InteractionLog  # noqa: E402
from sweval.evaluators.protocols.folds import Fold, build_folds  # noqa: E402
from sweval.evaluators.protocols.windows import WindowSpec  # noqa: E402
from sweval.evaluators.units.engine import evaluate_unit  # noqa: E402

DAY = 86_400
K = 10


@dataclass
class Run:
    """One (algorithm, device, seed) pass over the folds."""

    algorithm: str
    device: str
    seed: int
    label: str
    role: str  # "seeds": one of the compared seeds; "again": a seed repeated; "extra": --cpu-set
    fit: list[float] = field(default_factory=list)
    recommend: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)  # mean Recall@K of each fold
    lists: list[np.ndarray] = field(default_factory=list)


def run_once(
    log: InteractionLog,
    folds: list[Fold],
    trains: list[TrainData],
    algorithm: str,
    params: dict[str, object],
    *,
    label: str,
    role: str,
    max_seconds: float,
) -> Run:
    """Evaluate ``algorithm`` with ``params`` fold by fold until ``max_seconds`` are spent."""
    run = Run(algorithm, str(params["device"]), int(str(params["seed"])), label, role)
    spent = 0.0
    for fold, train in zip(folds, trains, strict=True):
        if spent > max_seconds:
            break
        model = build_algorithm(algorithm, params)
        result = evaluate_unit(log, fold, model, ks=[K], train=train, keep_lists=True)
        run.fit.append(result.timings["fit"])
        run.recommend.append(result.timings["recommend"])
        run.recall.append(float(np.mean(result.values[("recall", K)])))
        run.lists.append(result.recommended)
        spent += result.timings["fit"] + result.timings["recommend"]
        print(
            f"  {label:<22} fold {fold.index:>3}: fit {result.timings['fit']:7.3f} s, "
            f"Recall@{K} {run.recall[-1]:.4f}",
            flush=True,
        )
    return run


def tolerance(cpu_means: np.ndarray) -> float:
    """The documented bound on |mean(GPU) − mean(CPU)| (module docstring)."""
    seeds = len(cpu_means)
    sigma = float(np.std(cpu_means, ddof=1)) if seeds > 1 else 0.0
    return max(3.0 * sigma * np.sqrt(2.0 / seeds), 0.01 * float(np.mean(cpu_means)))


def compare(algorithm: str, runs: list[Run]) -> None:
    """Print the speed and Recall comparison of one algorithm's runs.

    Recall is compared over the first n folds that every default-parameter run finished; fit
    time per fold is each run's mean over the folds it ran (an extra CPU run may stop sooner).
    """
    cpu = [r for r in runs if r.device == "cpu" and r.role == "seeds"]
    gpu = [r for r in runs if r.device == "gpu" and r.role == "seeds"]
    again = [r for r in runs if r.role == "again"]
    n = min(len(r.recall) for r in cpu + gpu + again)
    print(f"\n[{algorithm}] Recall@{K} over the first {n} folds every seed's run finished")
    header = (
        f"{'run':<24} {'folds':>5} {'fit s/fold':>10} {'rec s/fold':>10} {'Recall@10':>9} "
        f"{'CPU/this fit':>12}"
    )
    print(header)
    print("-" * len(header))
    per_fold = {id(r): float(np.mean(r.fit)) for r in runs}
    cpu_fit = float(np.mean([per_fold[id(r)] for r in cpu])) if cpu else float("nan")
    for r in runs:
        folds = min(n, len(r.recall))
        mark = "" if folds == n else f" (first {folds})"
        print(
            f"{r.label:<24} {len(r.fit):>5} {per_fold[id(r)]:>10.4f} "
            f"{np.mean(r.recommend):>10.4f} {np.mean(r.recall[:folds]):>9.4f} "
            f"{cpu_fit / per_fold[id(r)]:>11.2f}x{mark}"
        )
    if not cpu or not gpu:
        return
    c = np.array([np.mean(r.recall[:n]) for r in cpu])
    g = np.array([np.mean(r.recall[:n]) for r in gpu])
    delta, bound = float(np.mean(g) - np.mean(c)), tolerance(c)
    verdict = "within" if abs(delta) <= bound else "OUTSIDE"
    line = (
        f"Recall@{K} CPU {np.mean(c):.4f} (seeds {np.min(c):.4f}-{np.max(c):.4f}), GPU "
        f"{np.mean(g):.4f} ({np.min(g):.4f}-{np.max(g):.4f}); difference {delta:+.4f}, "
        f"tolerance {bound:.4f}: {verdict}"
    )
    if len(c) > 1 and len(g) > 1:
        line += f"; Welch t-test p = {stats.ttest_ind(g, c, equal_var=False).pvalue:.3f}"
    print(line)
    gpu_fit = float(np.mean([per_fold[id(r)] for r in gpu]))
    print(f"fit s/fold, mean over seeds: CPU {cpu_fit:.4f}, GPU {gpu_fit:.4f}: "
          f"GPU {cpu_fit / gpu_fit:.2f}x faster")
    if again:
        first = next(r for r in gpu if r.seed == again[0].seed)
        same = all(
            np.array_equal(a, b) for a, b in zip(first.lists[:n], again[0].lists[:n], strict=True)
        )
        print(f"GPU seed {first.seed} run twice: {'identical' if same else 'different'} lists")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", choices=["movielens", "synthetic"], default="movielens")
    parser.add_argument("--algorithms", default="als,bpr", help="comma-separated: als, bpr")
    parser.add_argument("--scale", type=float, default=1.0, help="synthetic log scale")
    parser.add_argument("--folds", type=int, default=30, help="number of folds")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument(
        "--max-seconds", type=float, default=300.0, help="fit + recommend seconds per run"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="ALGO.PARAM=VALUE",
        help="parameters for every run",
    )
    parser.add_argument(
        "--cpu-set", action="append", default=[], metavar="ALGO.PARAM=VALUE",
        help="an extra CPU run (seed 0) with these parameters, e.g. bpr.threads=16",
    )
    parser.add_argument(
        "--devices", default="cpu,gpu", help="cpu,gpu (default); cpu alone: the seeds' spread"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    reason = cuda_unavailable_reason() if "gpu" in devices else None
    if reason is not None:
        print(f"implicit cannot use a GPU here ({reason}): use --devices cpu")
        return 1

    loaded = load_workload(args.workload, args.scale, 0)
    assert loaded is not None
    log, spec = loaded
    spec = WindowSpec(width_s=spec.width_s, n_folds=args.folds)
    clock = time.perf_counter()
    folds = [f for f in build_folds(log, spec, u_min=1) if not f.skipped]
    trains = [f.train_data(log) for f in folds]
    print(
        f"[{args.workload}] {len(log):,} interactions, {log.n_users:,} users, "
        f"{log.n_items:,} items; {len(folds)} folds of {spec.width_s // DAY} day(s), "
        f"{sum(f.n_eligible for f in folds):,} evaluated users; training data for every fold "
        f"built in {time.perf_counter() - clock:.1f} s. {platform.node()}, "
        f"{os.cpu_count()} CPUs."
    )
    seeds = [int(s) for s in args.seeds.split(",")]
    common, extra = parse_sets(args.set), parse_sets(args.cpu_set)
    for algorithm in [a.strip() for a in args.algorithms.split(",") if a.strip()]:
        base = dict(common.get(algorithm, {}))
        if base:
            shown = ", ".join(f"{k}={v}" for k, v in base.items())
            print(f"\n{algorithm} runs with {shown} (--set)")
        plan: list[tuple[str, str, dict[str, object]]] = [
            (f"{device} seed {seed}", "seeds", base | {"device": device, "seed": seed})
            for device in devices
            for seed in seeds
        ]
        if "gpu" in devices:
            plan.append((f"gpu seed {seeds[0]} again", "again",
                         base | {"device": "gpu", "seed": seeds[0]}))
        if algorithm in extra:
            shown = ",".join(f"{k}={v}" for k, v in extra[algorithm].items())
            plan.append((f"cpu seed {seeds[0]} {shown}", "extra",
                         base | extra[algorithm] | {"device": "cpu", "seed": seeds[0]}))
        for device in devices:  # CUDA context, kernels' first load, numba: outside every clock
            evaluate_unit(log, folds[0], build_algorithm(algorithm, base | {"device": device}),
                          ks=[K], train=trains[0])
        runs = [
            run_once(log, folds, trains, algorithm, params, label=label, role=role,
                     max_seconds=args.max_seconds)
            for label, role, params in plan
        ]
        compare(algorithm, runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
