"""``sweval run`` with a list: ``--window 1D,3D,7D`` (the same algorithms at each width:
:mod:`evaluators.experiments.widths`) or ``--train-window 30D,90D,all`` (the training-window
length: :mod:`evaluators.experiments.history`). Each value is an evaluation of its own, run the
way a single value runs (the Prefect flow, or ``--no-prefect``), into ``<output>/window-<W>/``
or ``<output>/train-<L>/``; the comparison's tables are published in ``<output>``, printed, and
added to each value's MLflow run (:mod:`flows.tracking.sweeps`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments import history, history_tuning, widths
from sweval.evaluators.metrics.names import shown_k
from sweval.evaluators.report.tables import metric_label
from sweval.flows.cli.terminal import message_console

console = message_console(stderr=False)


def run_sweep(cfg: EvalConfig, *, rolling: bool, evaluate: Callable[[EvalConfig], Any]) -> None:
    """Run every value of the listed option, print the comparison and track it.

    Raises:
        SwevalError: bad values, options that do not combine, any value's run failing.
        UnitsFailed: some units' algorithms raised (left out of the tables).
    """
    failed: list[Any] = []

    def one(config: EvalConfig) -> Any:
        outputs = evaluate(config)
        failed.extend(outputs.failed)
        console.print(f"  {Path(config.output).name}: computed {outputs.n_computed} unit(s), "
                      f"reused {outputs.n_reused}", markup=False, highlight=False)
        return outputs

    output = Path(cfg.output)
    if widths.listed(cfg.window):
        widths.check_composes(cfg, rolling=rolling)
        found = widths.compare_widths(cfg, one, directory=output)
        console.print(found.text(), markup=False, highlight=False)
        files = [output / name for name in widths.FILES]
        dimension, kendall, runs = "window", found.kendall, found.runs
        folders = {w: output / widths.run_directory(w) for w in runs}
    else:
        history.check_composes(cfg, rolling=rolling)
        table, runs = history.sweep_history(cfg, one, directory=output)
        console.print(history_text(table), markup=False, highlight=False)
        files = [output / name for name in ("history.csv", history_tuning.FILE)
                 if (output / name).exists()]
        dimension, kendall = "train_window", None
        folders = {length: output / history.run_directory(length) for length in runs}
    console.print(f"results: {output} ({', '.join(f.name for f in files)}; each run in "
                  f"{', '.join(folder.name for folder in folders.values())})",
                  markup=False, highlight=False)
    if cfg.tracking:
        from sweval.flows.tracking.sweeps import log_sweep, width_metrics

        metrics = ({value: width_metrics(kendall, value) for value in runs}
                   if kendall is not None else {})
        log_sweep(cfg, dimension, folders, files, metrics)
    if failed:
        from sweval.evaluators.units.failures import UnitsFailed

        raise UnitsFailed(failed)


def history_text(table: pd.DataFrame) -> str:
    """The printed sweep: mean Recall@k (else the first metric) per algorithm and training
    window, with the loss against the last window, and the fit seconds."""
    metrics = list(dict.fromkeys(table["metric"]))
    metric = "recall" if "recall" in metrics else metrics[0]
    rows = table[table["metric"] == metric]
    ks = [int(k) for k in rows["k"].dropna()]
    k = shown_k(ks) if ks else None
    rows = rows[rows["k"].isna()] if k is None else rows[rows["k"] == k]
    cells = rows.assign(cell=[f"{m:.4f} ({loss:+.1%}, {fit:.1f} s)" for m, loss, fit in zip(
        rows["mean"], rows["loss"], rows["fit_s"], strict=True)])
    shown = cells.pivot(index="algorithm", columns="train_window", values="cell").reindex(
        index=list(dict.fromkeys(rows["algorithm"])),
        columns=list(dict.fromkeys(rows["train_window"])))
    lengths = [length for length in shown.columns if length != history_tuning.TUNED_LENGTH]
    tuned = (f"; {history_tuning.TUNED_LENGTH}: the length best on the windows before each "
             f"fold, its fits those of every length" if len(lengths) < len(shown.columns) else "")
    return (f"mean {metric_label(metric, k)} over folds per training window (loss against "
            f"{lengths[-1]}, fit seconds{tuned})\n{shown.to_string(na_rep='-')}\n")
