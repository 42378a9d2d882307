"""Benchmark the algorithms fold by fold: fit and recommend time, peak memory, Recall@10.

Run on demand (not a test), from the repository root::

    python -m benchmarks.algorithms                          # both workloads, all algorithms
    python -m benchmarks.algorithms --workload movielens --algorithms item-knn,user-knn
    python -m benchmarks.algorithms --workload synthetic --scale 1 --max-seconds 120

Workloads:
    movielens       MovieLens latest-small (bundled), 30 weekly folds.
    movielens-100k  MovieLens 100K from /work/shared/data (skipped when absent), 30 weekly folds.
    synthetic       ``data.synthetic.generate_log(scale, seed)``, 30 daily folds (skipped when
                    the module is absent).

Each fold's training data is built once and shared by the algorithms (as a run does); every
(fold, algorithm) unit goes through ``evaluators.units.engine.evaluate_unit``. Memory is the peak of
``tracemalloc`` over fit + recommend: every numpy/scipy/Python allocation, but not native buffers
that bypass Python's allocators (implicit's C++/OpenMP work space), so ALS is under-counted.
``--no-memory`` turns tracing off (tracing slows allocation-heavy code a little).
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
import time  # noqa: E402
import tracemalloc  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402

from sweval.algorithms.registry import ALGORITHMS, build_algorithm  # noqa: E402
from sweval.data.log import InteractionLog  # noqa: E402
from sweval.evaluators.protocols.folds import Fold, build_folds  # noqa: E402
from sweval.evaluators.protocols.windows import WindowSpec  # noqa: E402
from sweval.evaluators.units.engine import evaluate_unit  # noqa: E402

DAY = 86_400
ML100K = Path("/work/shared/data/movielens-100k/u.data.gz")


@dataclass
class Tally:
    """Per-algorithm measurements over the folds of one workload."""

    fit: list[float] = field(default_factory=list)
    recommend: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    users: list[int] = field(default_factory=list)
    device: str = "cpu"
    stopped: str = ""


def load_workload(name: str, scale: float, seed: int) -> tuple[InteractionLog, WindowSpec] | None:
    """The log and window spec of a workload, or None when it cannot be built here."""
    if name in ("movielens", "movielens-100k"):
        from sweval.data.loaders import load_log

        if name == "movielens":
            return load_log("movielens-latest-small"), WindowSpec(width_s=7 * DAY, n_folds=30)
        if not ML100K.exists():
            print(f"[movielens-100k] skipped: {ML100K} not found")
            return None
        return load_log(ML100K, fmt="movielens"), WindowSpec(width_s=7 * DAY, n_folds=30)
    try:
        from sweval.data.synthetic import generate_log
    except ImportError as exc:
        print(f"[synthetic] skipped: data.synthetic.generate_log is not available ({exc})")
        return None
    frame = generate_log(scale, seed)
    log = InteractionLog.from_frame(frame[["user", "item", "timestamp"]], source="synthetic")
    return log, WindowSpec(width_s=DAY, n_folds=30)


def parse_sets(items: list[str]) -> dict[str, dict[str, object]]:
    """``--set als.factors=32`` → {"als": {"factors": 32}} (ints, floats, else strings)."""
    params: dict[str, dict[str, object]] = {}
    for item in items:
        key, _, raw = item.partition("=")
        algo, _, name = key.partition(".")
        value: object = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                continue
        params.setdefault(algo, {})[name] = value
    return params


def bench_workload(
    log: InteractionLog,
    folds: list[Fold],
    names: list[str],
    params: dict[str, dict[str, object]],
    *,
    memory: bool,
    max_seconds: float,
) -> dict[str, Tally]:
    """Evaluate every (fold, algorithm) unit, fold-major, and collect the measurements."""
    tallies = {name: Tally() for name in names}
    spent = dict.fromkeys(names, 0.0)
    for fold in folds:
        train = fold.train_data(log)
        for name in names:
            tally = tallies[name]
            if spent[name] > max_seconds:
                tally.stopped = tally.stopped or f"stopped after {len(tally.fit)} folds"
                continue
            algo = build_algorithm(name, params.get(name))
            if memory:
                tracemalloc.start()
            clock, cpu = time.perf_counter(), time.process_time()
            result = evaluate_unit(log, fold, algo, ks=[10], train=train)
            tally.cpu.append(time.process_time() - cpu)
            spent[name] += time.perf_counter() - clock
            if memory:
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                tally.peak_mb.append(peak / 2**20)
            tally.fit.append(result.timings["fit"])
            tally.recommend.append(result.timings["recommend"])
            tally.recall.append(float(np.mean(result.values[("recall", 10)])))
            tally.users.append(len(result.users))
            tally.device = result.device
    return tallies


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    print(f"\n{title}")
    header = (
        f"{'algorithm':<10} {'folds':>5} {'fit s/fold':>10} {'rec s/fold':>10} "
        f"{'total s':>8} {'cpu s':>7} {'max fit':>8} {'max rec':>8} {'peak MB':>8} "
        f"{'Recall@10':>9} {'device':>6}"
    )
    print(header)
    print("-" * len(header))
    for name, t in tallies.items():
        if not t.fit:
            print(f"{name:<10} {'0':>5}  {t.stopped or 'no folds'}")
            continue
        peak = f"{max(t.peak_mb):8.1f}" if t.peak_mb else f"{'-':>8}"
        print(
            f"{name:<10} {len(t.fit):>5} {np.mean(t.fit):>10.3f} {np.mean(t.recommend):>10.3f} "
            f"{sum(t.fit) + sum(t.recommend):>8.2f} {sum(t.cpu):>7.2f} {max(t.fit):>8.3f} "
            f"{max(t.recommend):>8.3f} {peak} {np.mean(t.recall):>9.4f} {t.device:>6}"
            + (f"  ({t.stopped})" if t.stopped else "")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--workload",
        choices=["movielens", "movielens-100k", "synthetic", "all"],
        default="all",
        help="what to run (all: every workload)",
    )
    parser.add_argument(
        "--algorithms",
        default=",".join(ALGORITHMS),
        help="comma-separated registry names (default: all)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="synthetic log scale")
    parser.add_argument("--seed", type=int, default=0, help="synthetic log seed")
    parser.add_argument("--folds", type=int, default=30, help="number of folds")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=240.0,
        help="per algorithm and workload: stop after this much fit+recommend+metrics time",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="ALGO.PARAM=VALUE", help="parameters"
    )
    parser.add_argument("--no-memory", action="store_true", help="do not trace memory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    names = [n.strip() for n in args.algorithms.split(",") if n.strip()]
    params = parse_sets(args.set)
    everything = ["movielens", "movielens-100k", "synthetic"]
    workloads = everything if args.workload == "all" else [args.workload]
    for workload in workloads:
        clock = time.perf_counter()
        loaded = load_workload(workload, args.scale, args.seed)
        if loaded is None:
            continue
        log, spec = loaded
        spec = WindowSpec(width_s=spec.width_s, n_folds=args.folds)
        folds = [f for f in build_folds(log, spec, u_min=1) if not f.skipped]
        load_s = time.perf_counter() - clock
        eligible = sum(f.n_eligible for f in folds)
        title = (
            f"[{workload}] {len(log):,} interactions, {log.n_users:,} users, {log.n_items:,} "
            f"items; {len(folds)} folds of {spec.width_s // DAY} day(s), {eligible:,} evaluated "
            f"users in all; loaded in {load_s:.1f} s. Times are means per fold (fit / "
            f"recommend), total = fit + recommend wall seconds over all folds, cpu = process CPU "
            f"seconds of whole units (all threads); peak MB = tracemalloc peak of one unit, max "
            f"over folds."
        )
        tallies = bench_workload(
            log, folds, names, params, memory=not args.no_memory, max_seconds=args.max_seconds
        )
        print_table(title, tallies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
