"""SW-EVAL's Python API: the commands as functions that return their tables.

::

    import sweval

    run = sweval.evaluate("movielens-latest-small", window="7D", folds=10, u_min=3,
                          algorithms=["pop", "pop-n", "item-knn"])
    run.summary                       # mean ± std over folds, intervals, Δ% to the best
    run.results                       # one row per (fold, algorithm, stratum, metric, k)
    run.write("runs/ml")              # the files `sweval run --output runs/ml` writes
    run.report("runs/ml")             # and report.html

Every function takes the log as a path (any format ``sweval run --data`` reads, or a bundled
dataset's name) or a pandas DataFrame, and the options of ``sweval run`` as keyword arguments
(``window="7D"``, ``k=[5, 10]``, ``params={"item-knn": {"n_neighbors": 50}}``, ...; every
:class:`~sweval.evaluators.config.model.EvalConfig` field), or a whole ``config=EvalConfig``.

Finished units go to the unit store (``cache=``, else ``$SWEVAL_CACHE``, else the user's cache
directory: :func:`~sweval.evaluators.run.sources.user_store`), so asking again, or asking for one
more algorithm, computes only what is new. Nothing is written elsewhere unless ``output=`` is
given; nothing is logged to MLflow unless ``tracking=True``. ``workers=N`` runs N folds at once
in threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig

__all__ = ["Evaluation", "compare", "datasets", "evaluate", "fetch", "gap", "history_sweep",
           "inspect", "leakage", "load", "widths"]


# ---------------------------------------------------------------------- options
def _config(data: Any, config: EvalConfig | None, output: str | Path | None,
            settings: dict[str, Any]) -> tuple[EvalConfig, InteractionLog | None]:
    """The validated configuration of a call, and the log when ``data`` is a DataFrame."""
    # the fields themselves: a dump masks a tracking URI's password (EvalConfig's records)
    values = {name: getattr(config, name) for name in EvalConfig.model_fields} if config else {}
    values |= settings
    frame = data if isinstance(data, pd.DataFrame) else None
    if data is not None and frame is None:
        values["data"] = str(data)
    values.setdefault("progress", False)
    values.setdefault("tracking", False)
    if output is not None:
        values["output"] = str(output)
    built = EvalConfig.build(**values)
    log = None
    if frame is not None:
        from sweval.evaluators.run.sources import policy_column

        log = InteractionLog.from_frame(
            frame, user_col=built.user_col or "user", item_col=built.item_col or "item",
            time_col=built.time_col or "timestamp",
            policy_col=built.policy_col or policy_column(built), basket_col=built.basket_col,
            time_unit=built.time_unit, dedup=built.dedup, on_invalid=built.on_invalid,
            source=built.data_name or "DataFrame")
    return built, log


def _executor(workers: int | None) -> Any:
    from sweval.evaluators.run.driver import Sequential, Threads

    return Threads(workers) if workers and workers > 1 else Sequential()


# ---------------------------------------------------------------------- evaluate
@dataclass(frozen=True)
class Evaluation:
    """A sliding-window evaluation's tables (the files of ``sweval run``, as DataFrames).

    Attributes:
        config: the configuration it ran with.
        results: ``results.csv``: one row per (fold, algorithm, stratum, metric, k).
        summary: ``summary.csv``: mean, std, folds used and skipped, Δ% to the best, interval.
        folds: ``folds.csv``: per fold, window bounds, sizes, eligible users, skip reason.
        units: ``units.csv``: per (fold, algorithm) unit, device, timings, key, reused.
        significance: ``significance.csv``: paired tests between algorithms, over folds and
            (``test_unit="users"``, the default) over users, with effect sizes and what the
            design can show (``baseline=``, ``correction=``; docs/protocol.md §8).
        significance_strata: ``significance_strata.csv`` (with ``stratify_by``).
        tuning, optimism: ``tuning.csv`` and ``optimism.csv`` (with ``tune``).
        overlap: ``overlap.csv``: the lists' Jaccard overlap.
        per_user: ``per_user.parquet`` (with ``per_user=True``).
        retraining: with ``horizon`` or ``cadence`` (and ``update``), ``.staleness``,
            ``.staleness_summary``, ``.cadence`` and ``.cadence_summary`` (docs/retraining.md).
        devices: where each algorithm ran.
        failed: the units whose algorithm raised (left out of every table).
        n_reused, n_computed: units taken from the store, units computed.
        directory: where the files were written (None: in memory only).
    """

    config: EvalConfig
    results: pd.DataFrame
    summary: pd.DataFrame
    folds: pd.DataFrame
    units: pd.DataFrame
    significance: pd.DataFrame | None = None
    significance_strata: pd.DataFrame | None = None
    tuning: pd.DataFrame | None = None
    optimism: pd.DataFrame | None = None
    overlap: pd.DataFrame | None = None
    per_user: pd.DataFrame | None = None
    retraining: Any = None
    devices: dict[str, str] = field(default_factory=dict)
    failed: tuple[Any, ...] = ()
    n_reused: int = 0
    n_computed: int = 0
    directory: Path | None = None
    _outputs: Any = field(default=None, repr=False, compare=False)
    _plan: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, outputs: Any, plan: Any, directory: Path | None) -> Evaluation:
        return cls(
            config=plan.config, results=outputs.results, summary=outputs.summary,
            folds=outputs.folds, units=outputs.units, significance=outputs.significance,
            significance_strata=outputs.significance_strata, tuning=outputs.tuning,
            optimism=outputs.optimism, overlap=outputs.overlap,
            per_user=(outputs.per_user.table().to_pandas()
                      if outputs.per_user is not None else None),
            retraining=outputs.retraining, devices=dict(outputs.devices),
            failed=tuple(outputs.failed),
            n_reused=outputs.n_reused, n_computed=outputs.n_computed, directory=directory,
            _outputs=outputs, _plan=plan,
        )

    def write(self, directory: str | Path) -> Path:
        """Write the files ``sweval run --output DIRECTORY`` writes (``results.csv``, ...,
        ``config.json``) into a new, empty or SW-EVAL's own directory; returns it.

        Raises:
            SwevalError: a directory SW-EVAL may not write (it holds your files).
        """
        from sweval.evaluators.run.output_dir import claim
        from sweval.evaluators.run.outputs import write_outputs

        if self._plan is None:
            raise SwevalError("this evaluation was read from files: they are written already.")
        target = claim(directory)
        write_outputs(self._plan, replace(self._outputs, directory=target))
        return target

    def report(self, directory: str | Path | None = None) -> Path:
        """Write ``report.html`` and its figures (with the tables they are drawn from) into
        ``directory`` (default: where the tables were written); returns the page's path.

        Raises:
            SwevalError: no directory given for an evaluation kept in memory.
        """
        from sweval.evaluators.report.page import write_report

        if directory is not None and (self.directory is None
                                      or Path(directory).resolve() != self.directory.resolve()):
            target = self.write(directory)
        elif self.directory is not None:
            target = self.directory
        else:
            raise SwevalError("report(directory): this evaluation was kept in memory; name the "
                              "directory to write its tables and report into.")
        return write_report(target, intervals=self.summary)[0]

    def _repr_html_(self) -> str:
        """The mean Recall@k (the first metric without Recall) per algorithm and k."""
        metric = "recall" if "recall" in set(self.summary["metric"]) else self.summary["metric"].iloc[0]
        part = self.summary[(self.summary["stratum"] == "all") & (self.summary["metric"] == metric)]
        table = part.pivot_table(index="algorithm", columns="k", values="mean", sort=False)
        return (f"<p>SW-EVAL: mean {metric} over folds ({self.n_computed} units computed, "
                f"{self.n_reused} reused)</p>" + table.to_html(float_format="%.4f"))


def evaluate(
    data: str | Path | pd.DataFrame | None = None,
    *,
    config: EvalConfig | None = None,
    output: str | Path | None = None,
    workers: int | None = None,
    tracking: bool = False,
    **settings: Any,
) -> Evaluation:
    """Evaluate algorithms with the sliding-window protocol (``sweval run``).

    Args:
        data: the log: a path or bundled dataset name, or a DataFrame (columns ``user``,
            ``item``, ``timestamp``, or those ``user_col`` ... name); None: a generated log.
        config: a whole configuration (``settings`` win over it).
        output: write the files of ``sweval run`` there (default: none are written).
        workers: folds computed at once, in threads (default: one at a time).
        tracking: log the run to MLflow, as ``sweval run`` does.
        settings: any option of ``sweval run``, by its field name (``window``, ``folds``,
            ``k``, ``u_min``, ``algorithms``, ``params``, ``metrics``, ``stratify_by``, ...).

    Returns:
        The tables (:class:`Evaluation`).

    Raises:
        SwevalError: bad data or options, naming the file, column and rows.
    """
    from sweval.evaluators.run.evaluate import evaluate_config
    from sweval.evaluators.units.locks import output_lock

    cfg, log = _config(data, config, output, settings | {"tracking": tracking})
    trackers: list[Any] = []
    plans: list[Any] = []

    def prepared(prepared: Any) -> list[Any]:
        plans.append(prepared.plan)
        if cfg.tracking:
            from sweval.flows.tracking.run_hook import run_tracking

            hook = run_tracking(prepared)
            trackers.extend([hook] if hook is not None else [])
        return trackers

    def run() -> Any:
        return evaluate_config(
            cfg, log=log, executor=_executor(workers), publish=output is not None,
            on_prepared=prepared,
            on_outputs=lambda outputs, report: [hook.finish(outputs, report)
                                                for hook in trackers])

    if output is not None:
        with output_lock(cfg.output):
            outputs = run()
    else:
        outputs = run()
    return Evaluation.of(outputs, plans[0], Path(cfg.output) if output is not None else None)


def history_sweep(
    data: Any = None,
    train_windows: Sequence[str | None] = ("30D", "90D", None),
    *,
    config: EvalConfig | None = None,
    workers: int | None = None,
    **settings: Any,
) -> pd.DataFrame:
    """Recall (and every metric) and fit cost against the length of the training history: the
    run of :func:`evaluate` once per ``--train-window`` in ``train_windows`` (None: all history
    before each window), on the same folds; units shared with earlier runs are reused
    (docs/retraining.md). Returns :func:`evaluators.experiments.history.history_table`'s table,
    in the order given (``loss`` against the last one), then, with two or more lengths, the rows
    of the length chosen per fold on the windows before it (``train_window`` ``"tuned"``;
    ``tune_metric``, ``tune_windows``, ``tune_mode``:
    :mod:`evaluators.experiments.history_tuning`).

    Raises:
        SwevalError: bad data or options, as :func:`evaluate`.
    """
    from sweval.evaluators.experiments.history import ALL_HISTORY, sweep_tables

    runs = {ALL_HISTORY if window is None else window:
            evaluate(data, config=config, workers=workers,
                     **(settings | {"train_window": window}))
            for window in train_windows}
    return sweep_tables(runs, next(iter(runs.values())).config)[0]


def widths(
    data: Any = None,
    windows: Sequence[str] | str = ("1D", "3D", "7D"),
    *,
    config: EvalConfig | None = None,
    output: str | Path | None = None,
    workers: int | None = None,
    tracking: bool = False,
    **settings: Any,
) -> Any:
    """The same algorithms at several window widths (``sweval run --window 1D,3D,7D``): the run
    of :func:`evaluate` once per width, each laid out as ``window=W`` alone lays it out; units
    of windows that coincide are computed once (docs/retraining.md). With ``output``, each
    width's files go to ``<output>/window-<W>/`` and the comparison's beside them.

    Returns:
        :class:`~sweval.evaluators.experiments.widths.Widths`: ``.table`` (``widths.csv``:
        mean, interval and rank per width, algorithm, metric and k), ``.kendall``
        (``widths_kendall.csv``: Kendall's τ between every pair of widths), ``.runs`` (each
        width's :class:`Evaluation`), ``.n_computed``, ``.n_reused``.

    Raises:
        SwevalError: bad data, widths or options (a width listed twice, ``horizon``,
            ``cadence``, several ``train_window``), as :func:`evaluate`.
    """
    from sweval.evaluators.experiments.widths import compare_widths

    listed = windows if isinstance(windows, str) else ",".join(windows)
    cfg, _log = _config(data, config, output, settings | {"tracking": tracking,
                                                          "window": listed})
    found = compare_widths(cfg, lambda width: evaluate(
        data, config=width, workers=workers, tracking=tracking,
        output=width.output if output is not None else None), directory=output)
    if tracking and found.directory is not None:
        from sweval.evaluators.experiments.widths import FILES, run_directory
        from sweval.flows.tracking.sweeps import log_sweep, width_metrics

        log_sweep(cfg, "window", {w: found.directory / run_directory(w) for w in found.runs},
                  [found.directory / name for name in FILES],
                  {w: width_metrics(found.kendall, w) for w in found.runs})
    return found


def load(directory: str | Path) -> Evaluation:
    """The tables a run wrote into ``directory`` (checked to be one run's set).

    Raises:
        SwevalError: no run's tables there, or files of two runs mixed.
    """
    from sweval.evaluators.run.output_dir import verify

    directory = Path(directory)
    verify(directory)
    try:
        record = (directory / "config.json").read_text(encoding="utf-8")
        import json

        config = EvalConfig.build(**json.loads(record)["config"])
        frames = {name: pd.read_csv(directory / f"{name}.csv")
                  for name in ("results", "summary", "folds", "units")}
    except (OSError, ValueError, KeyError) as exc:
        raise SwevalError(f"{directory}: not the output of `sweval run` ({exc}).") from exc
    optional = {name: pd.read_csv(directory / f"{name}.csv")
                for name in ("significance", "significance_strata", "tuning", "optimism",
                             "overlap") if (directory / f"{name}.csv").exists()}
    per_user = (pd.read_parquet(directory / "per_user.parquet")
                if (directory / "per_user.parquet").exists() else None)
    return Evaluation(config=config, **frames, **optional, per_user=per_user,
                      directory=directory)


# ---------------------------------------------------------------------- the experiments
def compare(
    data: str | Path | pd.DataFrame | None = None,
    *,
    protocols: tuple[str, ...] | list[str] = ("sw-eval", "loocv", "leave-last-one-out"),
    loocv_repeats: int = 10,
    split_ratio: float = 0.2,
    split_seed: int = 0,
    rank_metric: str = "recall",
    output: str | Path | None = None,
    workers: int | None = None,
    config: EvalConfig | None = None,
    **settings: Any,
) -> Any:
    """Compare evaluation protocols on one log (``sweval compare``): every algorithm under
    every protocol, Table 2 per protocol, Kendall's τ, the leakage diagnostic.

    ``output`` is where its files go (default: a temporary directory, removed once the
    comparison is read). Returns a :class:`~sweval.evaluators.experiments.comparison.Comparison`
    (``.results`` is ``compare.csv``, ``.summary``, ``.kendall``, ``.leakage``,
    ``.significance``, ``.runs`` per protocol).
    """
    from sweval.evaluators.experiments.compare import run_compare
    from sweval.evaluators.experiments.compare_plan import CompareOptions

    options = CompareOptions(tuple(protocols), loocv_repeats, split_ratio, split_seed, rank_metric)
    return _in_directory(output, lambda directory, cfg, log: run_compare(
        cfg, options, output=directory, log=log,
        executor=lambda recipe: _executor(workers)), data, config, settings)


def leakage(
    data: str | Path | pd.DataFrame | None = None,
    *,
    test_start: str | int,
    periods: int = 2,
    output: str | Path | None = None,
    workers: int | None = None,
    config: EvalConfig | None = None,
    **settings: Any,
) -> Any:
    """The leakage-severity experiment (``sweval leakage``): the same test users, scored by
    models trained with 0..``periods`` later periods of future data. Returns a
    :class:`~sweval.evaluators.experiments.leakage.Severity` (``.results``, ``.future``,
    ``.change``, ``.ranking``, ``.overlap``)."""
    from sweval.data.durations import parse_duration, parse_time
    from sweval.evaluators.experiments.leakage import SeverityDesign
    from sweval.evaluators.experiments.leakage_run import run_leakage

    def run(directory: Path, cfg: EvalConfig, log: InteractionLog | None) -> Any:
        design = SeverityDesign(test_start=parse_time(str(test_start)),
                                period_s=parse_duration(cfg.window), periods=periods)
        return run_leakage(cfg, design, output=directory, log=log,
                           executor=lambda recipe: _executor(workers))

    return _in_directory(output, run, data, config, settings)


def gap(
    data: str | Path | pd.DataFrame | None = None,
    *,
    split_ratio: float = 0.2,
    split_seed: int = 0,
    output: str | Path | None = None,
    workers: int | None = None,
    config: EvalConfig | None = None,
    **settings: Any,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The validation-to-deployment gap (``sweval gap``): each algorithm validated three ways
    before T (``start``, default the start of the last window), then deployed on
    [T, T + window). Returns (the gap table, the long results of the four sets)."""
    from sweval.data.durations import parse_duration, parse_time
    from sweval.evaluators.experiments.gap import GapDesign, run_gap
    from sweval.evaluators.protocols.windows import WindowSpec
    from sweval.evaluators.run.sources import load_data
    from sweval.evaluators.run.specs import window_spec

    def run(directory: Path, cfg: EvalConfig, log: InteractionLog | None) -> Any:
        width = parse_duration(cfg.window)
        log = log if log is not None else load_data(cfg)
        start = (parse_time(cfg.start) if cfg.start is not None
                 else WindowSpec(width_s=width, n_folds=1).first_start(log.t_max))
        design = GapDesign(deploy_start=start, width_s=width, share=split_ratio, seed=split_seed,
                           train_window_s=window_spec(cfg).train_window_s,
                           relevance=cfg.relevance)
        return run_gap(cfg, design, output=directory, log=log,
                       executor=lambda recipe: _executor(workers))

    return _in_directory(output, run, data, config, settings)


def inspect(
    data: str | Path | pd.DataFrame | None = None,
    *,
    windows: tuple[str, ...] | list[str] = ("1h", "1D", "7D", "30D"),
    window: str = "7D",
    u_min: int = 100,
    output: str | Path | None = None,
    config: EvalConfig | None = None,
    **settings: Any,
) -> Any:
    """Dataset diagnostics (``sweval inspect``): usable folds per window width, users' and
    items' active time, new items per window. Returns the inspection (``.eligibility``,
    ``.active``, ``.activity``, ``.facts``); with ``output``, also ``inspect.html``."""
    from sweval.data.durations import parse_duration
    from sweval.evaluators.report.inspect_page import inspect_log, write_inspection
    from sweval.evaluators.run.sources import load_data

    cfg, log = _config(data, config, None, settings)
    log = log if log is not None else load_data(cfg)
    if len(log) == 0:
        raise SwevalError(f"{log.source}: the log is empty.")
    widths = [(w, parse_duration(w, option="windows")) for w in windows]
    inspection = inspect_log(log, widths, (window, parse_duration(window, option="window")),
                             u_min)
    if output is not None:
        write_inspection(inspection, Path(output))
    return inspection


def _in_directory(output: str | Path | None, run: Any, data: Any, config: EvalConfig | None,
                  settings: dict[str, Any]) -> Any:
    """``run(directory, config, log)`` writing into ``output``, else into a temporary
    directory removed afterwards (the units stay in the store)."""
    import tempfile

    cfg, log = _config(data, config, None, settings)
    if output is not None:
        return run(Path(output), cfg, log)
    with tempfile.TemporaryDirectory(prefix="sweval-") as directory:
        return run(Path(directory) / "out", cfg, log)


# ---------------------------------------------------------------------- datasets
def datasets() -> pd.DataFrame:
    """The datasets to try SW-EVAL on (``sweval datasets list``): one row each, ``name``,
    ``here`` (``bundled``, ``fetched`` or ``no``), ``title``, ``source``, ``directory``."""
    from sweval.data.datasets import DATASETS
    from sweval.data.loaders import BUNDLED, BUNDLED_DIR

    rows = [{"name": name, "here": "bundled", "title": "MovieLens latest-small (GroupLens)",
             "source": "bundled", "directory": str((BUNDLED_DIR / relative).parent)}
            for name, (relative, _fmt) in BUNDLED.items()]
    rows += [{"name": name, "here": "fetched" if found.fetched else "no", "title": found.title,
              "source": found.url, "directory": str(found.directory)}
             for name, found in DATASETS.items()]
    return pd.DataFrame(rows)


def fetch(name: str, *, accept_licence: bool = False, source: str | Path | None = None) -> Path:
    """Download a public dataset (``sweval datasets fetch NAME``), check its SHA-256 and store
    it in the user's cache directory; then ``evaluate(NAME, ...)`` reads it. Returns its folder.

    Args:
        name: the dataset (:func:`datasets`).
        accept_licence: True once you have read its terms (printed by a call without it).
        source: a copy to take instead of the publisher's address (a path or a URL).

    Raises:
        SwevalError: the terms not accepted (they are printed), a failed download, or a
            checksum that differs.
    """
    from sweval.data.datasets import dataset, licence_text
    from sweval.data.datasets import fetch as fetch_dataset

    found = dataset(name)
    if found.fetched:
        return found.directory
    if not accept_licence:
        print(licence_text(name))
        raise SwevalError(f"{name}: read its terms (above), then call "
                          f"sweval.fetch({name!r}, accept_licence=True).")
    return fetch_dataset(name, source=None if source is None else str(source), say=print)
