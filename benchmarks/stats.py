"""Benchmark the statistics of ``significance.csv`` and ``summary.csv``: what users as the
sampling unit cost, against the folds.

Run on demand (not a test), from the repository root::

    python -m benchmarks.stats                                  # 500, 2000 and 8000 users
    python -m benchmarks.stats --users 1000 --algorithms 13 --resamples 1999

Workload: a synthetic run of ``--folds`` folds, each with ``--share`` of ``--users`` users
eligible (so most users are in several folds: clusters), ``--algorithms`` algorithms and
``--keys`` (metric, k) per user, values in [0, 1] with a user effect and an algorithm effect.
Each stage is timed on its own (best of ``--repeat``):

    folds          significance.csv's folds rows: every pair × key over the folds
    users pairs    the users' cluster means of every pair × key (evaluators.stats.users)
    users tests    Wilcoxon, t, permutation (n ≤ 50), rank-biserial, floors
    users CI       the users' cluster-bootstrap intervals (mean, relative, d_z): B × n × cols
    table          corrections, min_p_reachable, mde (evaluators.stats.significance.finish)
    two-level      summary.csv's two-level intervals of every algorithm × key

The users' intervals dominate: their cost is B × n_users × (pairs + algorithms) per key, a
matrix product (evaluators.stats.resampling).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: this folder must not shadow the package
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import argparse  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from itertools import combinations  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from sweval.evaluators.stats.paired import TESTS, paired_rows  # noqa: E402
from sweval.evaluators.stats.resampling import Bootstrap, paired_intervals  # noqa: E402
from sweval.evaluators.stats.significance import (  # noqa: E402
    SIGNIFICANCE_COLUMNS,
    Comparisons,
    fold_pairs,
    finish,
)
from sweval.evaluators.stats.users import UserValues, two_level_summary, user_pairs  # noqa: E402


def workload(n_users: int, folds: int, share: float, algorithms: int, keys: int,
             seed: int = 0) -> tuple[UserValues, pd.DataFrame]:
    """Synthetic per-user values and the results table of their fold means."""
    rng = np.random.default_rng(seed)
    base = rng.beta(1, 6, n_users)
    lift = rng.normal(0, 0.02, algorithms)
    values = UserValues()
    rows = []
    for fold in range(folds):
        users = np.sort(rng.choice(n_users, max(2, int(share * n_users)), replace=False))
        for a in range(algorithms):
            columns = {}
            for key in range(keys):
                noise = rng.normal(0, 0.15, len(users))
                column = np.clip(base[users] + lift[a] + noise, 0, 1).round(3)
                columns[("recall", key + 1)] = column
                rows.append({"fold": fold, "algorithm": f"alg{a}", "stratum": "all",
                             "metric": "recall", "k": key + 1, "value": column.mean(),
                             "skipped": False})
            values.add(SimpleNamespace(fold=fold, algorithm=f"alg{a}", users=users,
                                       values=columns), stratum="all")
    results = pd.DataFrame(rows)
    results["k"] = results["k"].astype("Int64")
    return values, results


def best_of(repeat: int, work: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def measure(n_users: int, args: argparse.Namespace) -> dict[str, Any]:
    values, results = workload(n_users, args.folds, args.share, args.algorithms, args.keys)
    settings = Bootstrap(n_resamples=args.resamples)
    comparisons = Comparisons(unit="users")
    row: dict[str, Any] = {"users": n_users}
    row["folds"], folds_rows = best_of(args.repeat, lambda: paired_rows(
        fold_pairs(results, None, comparisons), settings, unit="folds"))
    row["users pairs"], pairs = best_of(args.repeat, lambda: user_pairs(
        values, comparisons.pairs, None))
    n = len(pairs[0].x)
    x = np.column_stack([p.x for p in pairs])
    y = np.column_stack([p.y for p in pairs])
    d = np.round(x - y, 12)
    row["clusters"] = n
    row["pairs×keys"] = len(pairs)
    row["users CI"], _ = best_of(args.repeat, lambda: paired_intervals(x, y, d, settings))
    whole, users_rows = best_of(args.repeat, lambda: paired_rows(pairs, settings, unit="users"))
    row["users tests"] = max(whole - row["users CI"], 0.0)
    row["table"], _ = best_of(args.repeat, lambda: finish(
        [*folds_rows, *users_rows], SIGNIFICANCE_COLUMNS, ["stratum", "metric", "k"], "holm"))
    row["two-level"], _ = best_of(args.repeat, lambda: two_level_summary(values, settings))
    row["total"] = (row["folds"] + row["users pairs"] + whole + row["table"]
                    + row["two-level"])
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", default="500,2000,8000",
                        help="comma-separated numbers of users")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--share", type=float, default=0.3,
                        help="share of the users eligible in each fold")
    parser.add_argument("--algorithms", type=int, default=7)
    parser.add_argument("--keys", type=int, default=13, help="(metric, k) per user")
    parser.add_argument("--resamples", type=int, default=9999)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    pairs = len(list(combinations(range(args.algorithms), 2)))
    print(f"{args.folds} folds, {args.share:.0%} of the users in each, {args.algorithms} "
          f"algorithms ({pairs} pairs), {args.keys} keys, B = {args.resamples}, tests: "
          f"{', '.join(TESTS)}; seconds, best of {args.repeat}")
    rows = [measure(int(n), args) for n in args.users.split(",")]
    table = pd.DataFrame(rows)
    table["ms/pair·key (CI)"] = 1000 * table["users CI"] / table["pairs×keys"]
    with pd.option_context("display.float_format", "{:.3f}".format, "display.width", 160):
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
