"""What the statistics cost inside ``sweval compare`` once every unit is stored: one table, run
on demand (not a test).

Runs ``sweval.compare`` (the same composition as ``sweval compare``) into a fresh unit store to
fill it, then again with every unit reused, once per ``--test-unit`` (``folds``: the folds'
rows alone; ``users``: the users' rows too, the default). Each reused run is timed plain (the
best wall seconds of ``--repeat``), then once under ``cProfile``, where the *statistics* are
the cumulative time of every function of ``evaluators/stats/`` called from outside that
package (its entry points: the significance tables, the summary's intervals, the overlap, ...),
so nested calls are counted once::

    .venv/bin/python -m benchmarks.compare_stats                        # MovieLens latest-small
    .venv/bin/python -m benchmarks.compare_stats --scale 0.66 --window 1D --folds 30
    .venv/bin/python -m benchmarks.compare_stats --top 15               # the costliest entries
    PYTHONPATH=/tmp/old/src .venv/bin/python benchmarks/compare_stats.py --test-units default
                                                  # an earlier version (git archive of it)

The profiler slows pure-Python code more than numpy's, so the share it gives the statistics is
an estimate; the plain wall time is the number to compare.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: this folder must not shadow the package
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import sweval  # noqa: E402

def stats_directory() -> str:
    """The directory of ``evaluators/stats/`` as the profiler names its files."""
    import sweval.evaluators.stats.significance as significance

    return str(Path(significance.__file__).resolve().parent)


def statistics_time(profile: pstats.Stats, top: int) -> tuple[float, list[tuple[float, str]]]:
    """Seconds spent in ``evaluators/stats/`` (the cumulative time of its functions called
    from outside it), and the ``top`` costliest of those entry points."""
    inside = stats_directory()
    entries = []
    for (filename, line, name), (_cc, _nc, _tt, cumulative, callers) in profile.stats.items():
        if not str(Path(filename).resolve()).startswith(inside):
            continue
        outside = [caller for caller in callers
                   if not str(Path(caller[0]).resolve()).startswith(inside)]
        if not outside:
            continue
        share = sum(callers[caller][3] for caller in outside)  # cumulative time via outside
        entries.append((share, f"{Path(filename).name}:{line} {name}"))
    entries.sort(reverse=True)
    return sum(share for share, _ in entries), entries[:top]


def run_compare(settings: dict[str, Any], store: Path, output: Path, test_unit: str) -> Any:
    """``sweval.compare`` into ``output`` with the store ``store``; ``test_unit`` "default"
    passes none (an earlier version without the option)."""
    unit = {} if test_unit == "default" else {"test_unit": test_unit}
    return sweval.compare(settings["data"], cache=str(store), output=output, progress=False,
                          **unit, **{key: value for key, value in settings.items()
                                     if key != "data"})


def measure(settings: dict[str, Any], store: Path, root: Path, test_unit: str,
            top: int, repeat: int) -> dict[str, Any]:
    """Reused runs plain (the best wall time of ``repeat``), then one under the profiler."""
    walls = []
    for attempt in range(repeat):
        clock = time.perf_counter()
        comparison = run_compare(settings, store, root / f"{test_unit}-plain{attempt}",
                                 test_unit)
        walls.append(time.perf_counter() - clock)
    wall = min(walls)
    profiler = cProfile.Profile()
    clock = time.perf_counter()
    profiler.enable()
    run_compare(settings, store, root / f"{test_unit}-profiled", test_unit)
    profiler.disable()
    profiled = time.perf_counter() - clock
    in_stats, entries = statistics_time(pstats.Stats(profiler), top)
    rows = 0 if comparison.significance is None else len(comparison.significance)
    return {"wall": wall, "profiled": profiled, "stats": in_stats, "entries": entries,
            "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="movielens-latest-small",
                        help="a bundled or fetched dataset, or a file (default: %(default)s)")
    parser.add_argument("--scale", type=float, help="a generated log of this scale instead")
    parser.add_argument("--window", default="7D")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--algorithms", default="pop,pop-n,item-knn,user-knn,svd,als")
    parser.add_argument("--protocols", default="sw-eval,loocv,leave-last-one-out")
    parser.add_argument("--bootstrap", type=int, default=9999)
    parser.add_argument("--test-units", default="folds,users",
                        help="'default' alone times a version without --test-unit")
    parser.add_argument("--repeat", type=int, default=2, help="plain runs; the best is shown")
    parser.add_argument("--top", type=int, default=8, help="costliest statistics entries shown")
    args = parser.parse_args()
    settings: dict[str, Any] = {
        "data": None if args.scale else args.data, "window": args.window, "folds": args.folds,
        "algorithms": args.algorithms.split(","), "protocols": args.protocols.split(","),
        "bootstrap": args.bootstrap, "u_min": 1,
    }
    if args.scale:
        settings["scale"] = args.scale
    with tempfile.TemporaryDirectory(prefix="sweval-compare-stats-") as directory:
        root = Path(directory)
        store = root / "units"
        clock = time.perf_counter()
        units = args.test_units.split(",")
        run_compare(settings, store, root / "fill", units[-1])
        fill = time.perf_counter() - clock
        results = {unit: measure(settings, store, root, unit, args.top, args.repeat)
                   for unit in units}
    source = f"generated log, scale {args.scale}" if args.scale else args.data
    print(f"sweval compare, {source}, --window {args.window} --folds {args.folds}, "
          f"{len(settings['algorithms'])} algorithms × {len(settings['protocols'])} protocols, "
          f"B = {args.bootstrap}; first run (computing every unit): {fill:.1f} s")
    print(f"{'--test-unit':12} {'rows':>6} {'wall s':>8} {'profiled s':>11} "
          f"{'statistics s':>13} {'share':>6}")
    for unit, r in results.items():
        print(f"{unit:12} {r['rows']:6d} {r['wall']:8.2f} {r['profiled']:11.2f} "
              f"{r['stats']:13.2f} {r['stats'] / r['profiled']:6.0%}")
    for unit, r in results.items():
        print(f"\ncostliest statistics entries, --test-unit {unit} (profiled s):")
        for seconds, where in r["entries"]:
            print(f"  {seconds:7.2f}  {where}")


if __name__ == "__main__":
    main()
