"""SW-EVAL stage by stage, in a child process of the driver (so its peak RSS is its own).

Runs the same library functions as ``sweval run``: ``load_log`` → ``make_plan`` → the driver
(``evaluators.run.driver``: one job per fold, each unit saved in a fresh unit store as it
finishes and measured) → ``tables`` → ``write_outputs``, and times every stage:

- ``import_s``: importing SW-EVAL (from the first line of this script);
- ``kernel_load_s``: numba's start-up and the loading of the compiled kernels from its disk
  cache, forced here by running each kernel on a toy case (:func:`load_kernels`). A real run
  pays it inside the first unit of kNN, SVD or ALS (POP and POP-N never load them); it is a
  per-process start-up cost like the imports, so it is measured and reported on its own;
- ``load_s``: ``load_log`` of the shared file (read + validate + sort + de-duplicate + encode);
- ``plan_s``: ``make_plan`` with the loaded log (fold bounds, eligible users);
- ``train_data_s``: building each fold's training CSR (``Fold.train_data``, timed by wrapping it);
- per algorithm: ``fit``, ``recommend`` (the engine's own ``units.csv`` timings), ``metrics``
  (measured in ``collect``) and
  ``unit_wall``/``unit_cpu`` (wall and CPU time of the whole unit, measured between ``on_unit`` callbacks, so it also
  covers the relevant sets, result rows and anything else the engine does per unit);
- ``persist_s``: ``UnitStore.save`` of every unit (lists as Parquet, the unit record);
- ``als_library_fit_s`` (with ALS): time inside implicit's own ``fit`` calls, this process
  (:func:`time_library_fits`): the floor measured without cross-process noise;
- ``collect_s`` and ``write_s``: assembling and writing the result tables.

``engine_s`` = plan + every fold's job (persisting included) + collect (the work after the data is loaded
and before files are written); ``engine_cpu_s`` is the process CPU time of the same span (the
benchmark machine may be shared: CPU time is the contention-robust figure). Usage (from the repository root)::

    .venv/bin/python benchmarks/sweval_run.py --data LOG.parquet --t0 T0 --width W --n-folds N \
        --algorithms pop,pop-n --u-min 100 --out result.json
"""

import time

T_START = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import numpy as np  # noqa: E402
from common import fold_parser, peak_rss_mb  # noqa: E402

from sweval.data.loaders import load_log  # noqa: E402
from sweval.evaluators.config.model import EvalConfig  # noqa: E402
from sweval.evaluators.protocols import folds as folds_module  # noqa: E402
from sweval.evaluators.run.driver import Driver, Hook  # noqa: E402
from sweval.evaluators.run.evaluate import Prepared  # noqa: E402
from sweval.evaluators.run.outputs import tables, write_outputs  # noqa: E402
from sweval.evaluators.run.plan import make_plan  # noqa: E402
from sweval.evaluators.run.sources import unit_store  # noqa: E402

IMPORT_S = time.perf_counter() - T_START


def load_kernels() -> None:
    """Load every compiled kernel by running it on a toy case (through the real helpers, so the
    same specialisations — index dtypes, array layouts — get loaded as in the run)."""
    import scipy.sparse as sp

    from sweval.algorithms.knn import top_cosines
    from sweval.algorithms.ranking import top_k_of_product, top_k_unseen

    matrix = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 1]], dtype=np.float32))
    rows = np.arange(2, dtype=np.int64)
    sizes = np.diff(matrix.indptr).astype(np.float64)
    top_k_unseen(np.ones((2, 3)), matrix, rows, 2)
    top_k_of_product(matrix, matrix.T.tocsr(), matrix, rows, 2, snap=True)
    top_cosines(rows, matrix, matrix.T.tocsr(), sizes, sizes, 1)


def time_library_fits(clock: list[float]) -> None:
    """Sum into ``clock`` ([wall, CPU]) the time spent inside implicit's CPU ALS ``fit``.

    The in-process floor: the library's own fit calls, timed in the same process and the same
    machine state as the SW-EVAL run around them. Comparing with bare fits in another process
    (``floor.py``) mixes in the ±30 % by which implicit's fits vary between processes here.
    The wrapper only reads two clocks around the call.
    """
    import implicit.cpu.als

    cls = implicit.cpu.als.AlternatingLeastSquares
    original = cls.fit

    def timed_fit(self, *args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return original(self, *args, **kwargs)
        finally:
            clock[0] += time.perf_counter() - wall
            clock[1] += time.process_time() - cpu

    cls.fit = timed_fit


def main() -> None:
    p = fold_parser()
    p.add_argument("--algorithms", required=True)
    p.add_argument("--u-min", type=int, default=100)
    p.add_argument("--params", default="{}", help="JSON {algorithm: {param: value}}")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    names = args.algorithms.split(",")
    record: dict = {"tool": "sweval", "algorithms": names, "import_s": IMPORT_S}

    # Time every training-matrix build (evaluate_fold builds one per fold and shares it).
    train_clock = [0.0, 0.0]  # wall, CPU
    original = folds_module.Fold.train_data

    def timed_train_data(self, log):  # noqa: ANN001
        clock, cpu = time.perf_counter(), time.process_time()
        try:
            return original(self, log)
        finally:
            train_clock[0] += time.perf_counter() - clock
            train_clock[1] += time.process_time() - cpu

    folds_module.Fold.train_data = timed_train_data

    record["kernel_load_s"] = 0.0
    if set(names) - {"pop", "pop-n"}:
        clock = time.perf_counter()
        load_kernels()
        record["kernel_load_s"] = time.perf_counter() - clock
    library_fit = [0.0, 0.0]  # wall, CPU inside implicit's ALS fit calls
    if "als" in names:
        time_library_fits(library_fit)

    clock = time.perf_counter()
    log = load_log(args.data)
    record["load_s"] = time.perf_counter() - clock
    record["data"] = {"n_interactions": len(log), "n_users": log.n_users, "n_items": log.n_items}

    with tempfile.TemporaryDirectory(prefix="sweval-bench-") as output:
        config = EvalConfig.build(
            data=args.data, window=f"{args.width}s", folds=args.n_folds, start=str(args.t0),
            algorithms=names, u_min=args.u_min, params=json.loads(args.params),
            tracking=False, progress=False, output=output,
        )
        engine_cpu = time.process_time()
        clock = time.perf_counter()
        plan = make_plan(config, log)
        record["plan_s"] = time.perf_counter() - clock
        store = unit_store(config)
        save = store.save
        persist = 0.0

        marks: list[tuple[float, float, str, dict]] = []

        def timed_save(key, lists, log, record):  # noqa: ANN001, ANN202
            """Save a unit, timed; its end marks the end of the unit (compute_unit saves it
            last)."""
            nonlocal persist
            clock = time.perf_counter()
            try:
                return save(key, lists, log, record)
            finally:
                persist += time.perf_counter() - clock
                marks.append((time.perf_counter(), time.process_time(), record["label"],
                              lists.timings))

        store.save = timed_save  # type: ignore[method-assign]

        per_algo = {n: {"fit": 0.0, "recommend": 0.0, "metrics": 0.0, "unit_wall": 0.0,
                        "unit_cpu": 0.0} for n in names}
        per_fold_wall = []

        class FoldClock(Hook):
            """Per fold: its wall time, and each unit's wall and CPU time (between marks)."""

            def started(self, driver):  # noqa: ANN001, ANN202
                self.clock = (time.perf_counter(), time.process_time())
                self.train = list(train_clock)

            def job_done(self, driver, job, outcome):  # noqa: ANN001, ANN202
                fold_train = [train_clock[0] - self.train[0], train_clock[1] - self.train[1]]
                starts = [self.clock] + [mark[:2] for mark in marks[:-1]]
                for start, (wall, cpu, name, timings) in zip(starts, marks):
                    first = name == names[0]
                    per_algo[name]["unit_wall"] += wall - start[0] - (fold_train[0] if first else 0)
                    per_algo[name]["unit_cpu"] += cpu - start[1] - (fold_train[1] if first else 0)
                    for stage in ("fit", "recommend"):
                        per_algo[name][stage] += timings[stage]
                per_fold_wall.append(time.perf_counter() - self.clock[0])
                marks.clear()
                self.started(driver)

        work = Prepared(plan=plan).work
        clock = time.perf_counter()
        driver = Driver(work, store, hooks=[FoldClock()])
        driver.hooks[0].started(driver)
        for job, outcome in driver.executor.run(driver, driver.jobs()):
            assert not isinstance(outcome, BaseException), outcome
            driver.accept(job, outcome)
        evaluate_total = time.perf_counter() - clock

        clock = time.perf_counter()
        outputs = tables(plan, driver.collect(), work.measurer, directory=Path(config.output),
                         unit_store=store.directory)
        record["collect_s"] = time.perf_counter() - clock
        for name, seconds in outputs.units.groupby("algorithm")["metrics_s"].sum().items():
            per_algo[name]["metrics"] = float(seconds)
        record["engine_cpu_s"] = time.process_time() - engine_cpu
        clock = time.perf_counter()
        write_outputs(plan, outputs)
        record["write_s"] = time.perf_counter() - clock

    record["train_data_s"] = train_clock[0]
    record["train_data_cpu_s"] = train_clock[1]
    record["evaluate_s"] = evaluate_total
    record["persist_s"] = persist
    if "als" in names:
        record["als_library_fit_s"], record["als_library_fit_cpu_s"] = library_fit
    record["engine_s"] = record["plan_s"] + evaluate_total + record["collect_s"]
    record["per_algorithm"] = per_algo
    record["per_fold_wall"] = per_fold_wall
    record["n_folds_used"] = int(sum(not f.skipped for f in plan.folds))
    record["eligible_per_fold"] = [int(f.n_eligible) for f in plan.folds]
    results = outputs.results
    recall = results[(results["metric"] == "recall") & (results["stratum"] == "all")
                     & ~results["skipped"].astype(bool)]
    sel = recall[recall["k"] == 10]
    value_col = "value" if "value" in sel.columns else sel.columns[-1]
    record["recall10_per_fold"] = {
        name: [float(v) for v in sel[sel["algorithm"] == name].sort_values("fold")[value_col]]
        for name in names
    }
    record["recall10"] = {
        name: float(np.nanmean(values)) if values else None
        for name, values in record["recall10_per_fold"].items()
    }
    record["recall_at_k"] = {  # macro mean over folds, every k
        name: {int(k): float(group[value_col].mean())
               for k, group in recall[recall["algorithm"] == name].groupby("k")}
        for name in names
    }
    record["devices"] = outputs.devices
    record["peak_rss_mb_self"] = peak_rss_mb()
    Path(args.out).write_text(json.dumps(record, indent=1, default=str))


if __name__ == "__main__":
    main()
