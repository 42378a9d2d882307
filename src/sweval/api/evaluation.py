"""``sweval.evaluate()`` and its sweeps: a sliding-window evaluation's tables as an
:class:`Evaluation` (and ``load()`` of a run's files), ``history_sweep()`` over training-history
lengths and ``widths()`` over window widths."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.api.options import call_config, executor_for
from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig


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
        metrics = self.summary["metric"]
        metric = "recall" if "recall" in set(metrics) else metrics.iloc[0]
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

    cfg, log = call_config(data, config, output, settings | {"tracking": tracking})
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
            cfg, log=log, executor=executor_for(workers), publish=output is not None,
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
    cfg, _log = call_config(data, config, output, settings | {"tracking": tracking,
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
