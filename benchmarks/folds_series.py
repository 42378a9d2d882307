"""Per-fold cost against the fold index: does a fold cost more as the history grows? (issue 20)

Run on demand (not a test), from the repository root::

    .venv/bin/python benchmarks/folds_series.py                        # year-long scale-1 log
    .venv/bin/python benchmarks/folds_series.py --data y1.parquet --series 30,90,365 \\
        --algorithms pop,pop-n,item-knn,user-knn --sample 12 --json out.json

The log: ``--data`` (a file ``sweval run --data`` reads), else the generated log at ``--scale``
over ``--days`` days (default 1.0 and 365: about 2.2M interactions, 576k users, 21.6k items;
``sweval generate --scale 1 --days 365`` writes the same log).

For each series length n (``--series``, default 30, 90, 365) the n daily folds end where
``sweval run --window 1D --folds n`` puts them (the last n days of the log), expanding training
windows. Per fold, in one process:

- ``train_data``: the fold's :class:`TrainData` built three ways, in a rotating order: from
  scratch (:meth:`Fold.train_data`, a pass over the whole log), advanced from the previous
  fold's (:class:`evaluators.protocols.training_state.IncrementalTraining`), and advanced carrying the
  item co-occurrences C = RᵀR (``cooccurrence=True``, what a run with item-kNN does;
  ``train_data.incremental+C`` includes C's upkeep); all three are checked equal;
- ``fit`` and ``recommend`` of every algorithm on the fold's data, for the eligible users, on
  ``--sample`` folds spread evenly over the series (all folds with ``--sample 0``). Only
  item-kNN reads C: it is measured on the data with C (``item-knn``) and without
  (``item-knn.walk``, the walk over the users' items that folds built from scratch get),
  alternately first, and the two lists are checked equal; the other algorithms see the same
  data on every path and are measured once. ``C MB`` is C's memory at the last fold.

Times are CPU seconds of the process (steadier than wall time on a shared machine; the kNN
kernels are run single-threaded, ``--threads``). The report prints, per series and stage, the
mean over the first and the last tenth of the folds and their ratio (1.0 = flat), and a
per-fold line for every tenth of the series; ``--json`` keeps every fold's numbers.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: this folder must not shadow the package
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from sweval.algorithms.registry import build_algorithm  # noqa: E402
from sweval.algorithms.threads import unit_threads  # noqa: E402
from sweval.data.log import InteractionLog  # noqa: E402
from sweval.evaluators.protocols.folds import build_folds  # noqa: E402
from sweval.evaluators.protocols.training_state import IncrementalTraining  # noqa: E402
from sweval.evaluators.protocols.windows import WindowSpec  # noqa: E402

DAY = 86_400


def load(args: argparse.Namespace) -> InteractionLog:
    if args.data:
        from sweval.data.loaders import load_log

        return load_log(args.data)
    from sweval.data.synthetic import generate_log

    frame = generate_log(scale=args.scale, seed=args.seed, days=args.days)
    return InteractionLog.from_frame(frame, policy_col="policy", source="generated")


def same(a: Any, b: Any) -> bool:
    arrays = [(a.matrix.indices, b.matrix.indices), (a.matrix.indptr, b.matrix.indptr),
              (a.item_sequence, b.item_sequence), (a.user_sequence, b.user_sequence),
              (a.item_codes, b.item_codes), (a.user_codes, b.user_codes)]
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in arrays)


def run_series(log: InteractionLog, n: int, names: list[str], sample: int) -> list[dict[str, Any]]:
    folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=n), u_min=1)
    measured = set(range(n)) if sample <= 0 else {
        int(round(x)) for x in np.linspace(0, n - 1, min(sample, n))}
    builders = {
        "scratch": lambda fold: fold.train_data(log),
        "incremental": IncrementalTraining(log).train_data,
        "incremental+C": IncrementalTraining(log, cooccurrence=True).train_data,
    }
    rows = []
    for fold in folds:
        row: dict[str, Any] = {"fold": fold.index, "n_train": fold.n_train,
                               "n_window": fold.n_test, "n_eligible": fold.n_eligible}
        paths = list(builders)
        order = paths[fold.index % 3 :] + paths[: fold.index % 3]
        built = {}
        for path in order:
            clock = time.process_time()
            built[path] = builders[path](fold)
            row[f"train_data.{path}"] = time.process_time() - clock
        if not (same(built["scratch"], built["incremental"])
                and same(built["scratch"], built["incremental+C"])):
            raise AssertionError(f"fold {fold.index}: the paths differ")
        train = built["incremental+C"]
        if train.cooccurrence is not None:
            row["cooccurrence_mb"] = train.cooccurrence.nbytes / 1e6
        del built
        if fold.index in measured and not fold.skipped:
            depth = 10
            users = train.rows_of(fold.eligible_users)
            for name in names:
                variants = {name: train}
                if name == "item-knn":  # the same data without C: the walk
                    walk = {f"{name}.walk": dataclasses.replace(train, cooccurrence=None)}
                    variants = {**walk, **variants} if fold.index % 2 else {**variants, **walk}
                lists = []
                for label, data in variants.items():
                    algorithm = build_algorithm(name, None)
                    gc.collect()  # not the benchmark's own garbage in the stage's time
                    clock = time.process_time()
                    algorithm.fit(data)
                    row[f"{label}.fit"] = time.process_time() - clock
                    clock = time.process_time()
                    lists.append(algorithm.recommend(users, depth))
                    row[f"{label}.recommend"] = time.process_time() - clock
                if any(not np.array_equal(lists[0], other) for other in lists[1:]):
                    raise AssertionError(f"fold {fold.index}: {name}'s lists differ")
        rows.append(row)
    return rows


def report(n: int, rows: list[dict[str, Any]]) -> None:
    stages = [key for key in rows[0] if "." in key]
    for row in rows[1:]:
        stages += [key for key in row if "." in key and key not in stages]
    print(f"\n{n} daily folds (n_train {rows[0]['n_train']:,} → {rows[-1]['n_train']:,}); "
          "CPU ms per fold")
    print(f"{'stage':<28} {'first 10%':>10} {'last 10%':>10} {'ratio':>6} {'folds':>6}")
    tenth = max(1, n // 10)
    for stage in stages:
        values = [(row["fold"], row[stage]) for row in rows if stage in row]
        first = [v for f, v in values if f < tenth]
        last = [v for f, v in values if f >= n - tenth]
        if not first or not last:  # sampled stages: the first and last samples
            first, last = [values[0][1]], [values[-1][1]]
        a, b = 1000 * np.mean(first), 1000 * np.mean(last)
        print(f"{stage:<28} {a:>10.1f} {b:>10.1f} {b / a if a else float('nan'):>6.2f} "
              f"{len(values):>6}")
    print("per fold (train_data ms scratch / incremental / incremental+C; C MB):")
    for row in rows[:: tenth]:
        print(f"  fold {row['fold']:>4}  n_train {row['n_train']:>9,}  window {row['n_window']:>6,}"
              f"  {1000 * row['train_data.scratch']:7.1f} / "
              f"{1000 * row['train_data.incremental']:7.1f} / "
              f"{1000 * row['train_data.incremental+C']:7.1f}; "
              f"{row.get('cooccurrence_mb', float('nan')):6.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="a log file (default: the generated log)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--series", default="30,90,365", help="fold counts, comma-separated")
    parser.add_argument("--algorithms", default="pop,pop-n,item-knn,user-knn")
    parser.add_argument("--sample", type=int, default=12,
                        help="folds per series on which the algorithms run (0: all)")
    parser.add_argument("--threads", type=int, default=1, help="threads of the kNN kernels")
    parser.add_argument("--json", help="write every fold's numbers here")
    args = parser.parse_args(argv)
    clock = time.perf_counter()
    log = load(args)
    print(f"log: {len(log):,} interactions, {log.n_users:,} users, {log.n_items:,} items "
          f"({time.perf_counter() - clock:.1f} s)")
    names = [name for name in args.algorithms.split(",") if name]
    warm_up = build_folds(log, WindowSpec(width_s=DAY, n_folds=2), u_min=0)
    incremental = IncrementalTraining(log, cooccurrence=True)
    for fold in warm_up:  # load the compiled kernels outside the measurements
        train = incremental.train_data(fold)
    users = train.rows_of(warm_up[-1].eligible_users[:50])
    for data in (train, dataclasses.replace(train, cooccurrence=None)):
        for name in names:
            build_algorithm(name, None).fit(data).recommend(users, 10)
    del train, incremental
    results = {}
    token = unit_threads.set(args.threads)
    try:
        for n in [int(x) for x in args.series.split(",") if x]:
            results[n] = run_series(log, n, names, args.sample)
            report(n, results[n])
    finally:
        unit_threads.reset(token)
    if args.json:
        Path(args.json).write_text(json.dumps({str(n): rows for n, rows in results.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
