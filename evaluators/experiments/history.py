"""How much history to train on: the training-window length as a swept dimension.

Each length L is the same run with ``--train-window L`` (the model of fold f is fitted on the
transactions in [t_f − L, t_f); ``None``: all history before t_f, the default), on the same
folds, windows and eligible users: only the training data change, so the rows are paired by
fold. :func:`history_table` joins the runs' tables, per (train window, algorithm, metric, k)::

    mean, ci_low, ci_high, n_folds   the run's summary.csv row (all users)
    n_train                          mean training transactions per used fold (folds.csv)
    fit_s                            total fit seconds over the folds (units.csv; stored units
                                     keep the seconds of their fit)
    loss                             mean / mean of the longest history − 1
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.experiments.sweep import in_locked_directory, run_each

_log = logging.getLogger(__name__)

#: The label of the default training window: all history before each window.
ALL_HISTORY = "all"
HISTORY_COLUMNS = ["train_window", "algorithm", "metric", "k", "mean", "ci_low", "ci_high",
                   "n_folds", "n_train", "fit_s", "loss"]


def history_table(runs: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (train window, algorithm, metric, k) of ``runs`` (label → an object with
    the ``summary``, ``units`` and ``folds`` tables of a run, e.g. :class:`sweval.Evaluation`),
    in the order of ``runs``; ``loss`` is against the last label's run (the longest history
    when the labels run from short to long, ``all`` last)."""
    parts = []
    for label, run in runs.items():
        summary = run.summary[run.summary["stratum"] == "all"]
        used = run.folds[~run.folds["skipped"].astype(bool)]
        costs = run.units.groupby("algorithm", sort=False)[["fit_s"]].sum()
        part = summary[["algorithm", "metric", "k", "mean", "ci_low", "ci_high",
                        "n_folds"]].copy()
        part.insert(0, "train_window", label)
        part["n_train"] = float(used["n_train"].mean()) if len(used) else float("nan")
        part = part.join(costs, on="algorithm")
        parts.append(part)
    table = pd.concat(parts, ignore_index=True)
    longest = table[table["train_window"] == list(runs)[-1]].set_index(
        ["algorithm", "metric", "k"])["mean"]
    reference = longest.reindex(pd.MultiIndex.from_frame(table[["algorithm", "metric", "k"]]))
    table["loss"] = table["mean"].to_numpy() / reference.to_numpy() - 1
    return table[HISTORY_COLUMNS]


def parse_train_windows(text: str) -> list[str]:
    """The lengths of ``--train-window 30D,90D,all`` (``all``: all history), each checked.

    Raises:
        SwevalError: a length that is not a duration nor ``all``, or one listed twice.
    """
    from sweval.data.durations import parse_duration
    from sweval.evaluators.experiments.widths import split_list

    lengths = split_list(text, "--train-window")
    for length in lengths:
        if length != ALL_HISTORY:
            parse_duration(length, option="--train-window")
    return lengths


def check_composes(config: Any, *, rolling: bool = False) -> None:
    """Refuse what a sweep of training windows does not combine with.

    Raises:
        SwevalError: ``--rolling`` (a series is one configuration's), or a list of
            ``--window`` too (one swept dimension at a time).
    """
    from sweval.evaluators.experiments.widths import listed

    given = [name for name, on in (("--rolling", rolling),
                                   ("--window with several widths", listed(config.window)))
             if on]
    if given:
        raise SwevalError(f"--train-window {config.train_window}: several lengths do not "
                          f"combine with {', '.join(given)} (one swept dimension at a time; a "
                          "rolling series is one configuration's). Run each on its own.")


def run_directory(length: str) -> str:
    """The folder of one training window's run inside the sweep's output directory."""
    return f"train-{length}"


def sweep_history(config: Any, run: Callable[[Any], Any], *,
                  directory: str | Path | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run ``config`` once per length of its ``--train-window`` list (``all``: the default, all
    history): the table of :func:`history_table` (``loss`` against the last length) and each
    length's run. With ``directory`` (claimed first), each length's files go to
    ``train-<length>/`` and ``history.csv`` is published beside them.

    Raises:
        SwevalError: bad lengths, options that do not combine (:func:`check_composes`), an
            output directory SW-EVAL may not write, or any error of a length's run.
    """
    lengths = parse_train_windows(config.train_window)
    check_composes(config)
    return in_locked_directory(directory, "run-history",
                               lambda target: _sweep(config, lengths, run, target))


def _sweep(config: Any, lengths: list[str], run: Callable[[Any], Any],
           target: Path | None) -> Any:
    """The work of the sweep above, its output directory (if any) locked."""
    runs = run_each(config, lengths,
                    lambda length: {"train_window": None if length == ALL_HISTORY else length},
                    run_directory, run, target)
    table, choices = sweep_tables(runs, config)
    if target is not None:
        from sweval.evaluators.experiments.history_tuning import FILE
        from sweval.evaluators.run.output_dir import publish

        files = {"history.csv": table}
        if choices is not None:
            files[FILE] = choices
        data = {name: frame.to_csv(index=False, float_format="%.10g").encode()
                for name, frame in files.items()}
        if config.report:
            data |= _report(table, config, lengths)
        try:
            publish(target, data, run=config.result_hash(), command="run-history")
        except OSError as exc:
            raise SwevalError(f"{target}: cannot write history.csv ({exc}).") from exc
    return table, runs


def sweep_tables(runs: Mapping[str, Any],
                 config: Any) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """:func:`history_table` of ``runs`` with the tuned series' rows added (``train_window``
    ``tuned``: the length chosen per fold on the windows before it,
    :mod:`evaluators.experiments.history_tuning`) and the choices; without them (None, and a
    warning saying why) where ``--tune-metric`` is not a metric the runs compute."""
    from sweval.evaluators.experiments.history_tuning import tuned_history

    table = history_table(runs)
    if len(runs) < 2:
        return table, None
    try:
        rows, choices = tuned_history(runs, config)
    except SwevalError as exc:
        _log.warning("no tuned training window in history.csv: %s", exc)
        return table, None
    return pd.concat([table, rows], ignore_index=True), choices


def _report(table: pd.DataFrame, config: Any, lengths: list[str]) -> dict[str, bytes]:
    """``report.html`` and its figure (:mod:`evaluators.report.history`), at the metric and k
    the terminal shows (Recall, else the first metric; k 10 if computed)."""
    from sweval.evaluators.metrics.names import shown_k
    from sweval.evaluators.report.history import history_figure, history_page

    metrics = list(dict.fromkeys(table["metric"]))
    metric = "recall" if "recall" in metrics else metrics[0]
    ks = [int(k) for k in table.loc[table["metric"] == metric, "k"].dropna()]
    k = shown_k(ks) if ks else None
    figure = history_figure(table, metric, k)
    page = history_page(table, metric, k, figure=figure,
                        links={length: f"{run_directory(length)}/report.html"
                               for length in lengths},
                        title=f"SW-EVAL training history — {config.dataset_name}")
    return {figure.file_name: figure.png, "report.html": page.encode()}
