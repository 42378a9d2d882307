"""The experiments beside the sliding window, as functions: ``compare()`` of protocols,
``leakage()`` severity, the deployment ``gap()`` and the dataset diagnostics of ``inspect()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from sweval.api.options import call_config, executor_for
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig


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
        executor=lambda recipe: executor_for(workers)), data, config, settings)


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
                           executor=lambda recipe: executor_for(workers))

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
                       executor=lambda recipe: executor_for(workers))

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

    cfg, log = call_config(data, config, None, settings)
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

    cfg, log = call_config(data, config, None, settings)
    if output is not None:
        return run(Path(output), cfg, log)
    with tempfile.TemporaryDirectory(prefix="sweval-") as directory:
        return run(Path(directory) / "out", cfg, log)
