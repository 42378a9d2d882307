"""What a comparison produced (:class:`Comparison`) and its files: the tables, the Kendall
scatter, ``compare.txt`` and ``compare.json``, published as one set (:func:`write_comparison`;
the files are listed in :mod:`evaluators.experiments.compare`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.compare_plan import CompareOptions
from sweval.evaluators.experiments.compare_tables import rank_shift, table2
from sweval.evaluators.experiments.protocol_runs import ProtocolRun
from sweval.evaluators.metrics.names import shown_k
from sweval.evaluators.run.output_dir import publish

#: The files only some comparisons write (with --tune, with two protocols or more, with users
#: paired between protocols); a comparison that does not write them removes an earlier one's.
OPTIONAL_FILES = ("tuning.csv", "tuning_protocols.csv", "optimism.csv", "overlap_protocols.csv",
                  "kendall_scatter.png", "compare.txt", "report.html")


@dataclass
class Comparison:
    """Everything a comparison produced (see :mod:`evaluators.experiments.compare` for the files).

    Attributes:
        config: the run's configuration (its ``output`` is the ``sw-eval`` sub-directory).
        options: the comparison's own options.
        directory: the comparison's output directory.
        runs: per protocol, its :class:`~evaluators.experiments.protocol_runs.ProtocolRun`.
        results: the long table of every protocol (``compare.csv``).
        summary: per protocol, the macro means with Δ% (``compare_summary.csv``).
        kendall: τ per protocol pair and k, on the rank metric (``kendall.csv``).
        leakage: future items pooled over splits (``leakage.csv``).
        significance: per protocol, the algorithms' paired tests (``significance.csv``).
        protocol_effect: the leads compared between protocols (``significance_protocols.csv``).
        log: the log compared on.
        timings: per protocol, the seconds its units took to compute (built, fitted, ranked,
            measured; 0 for units reused from the store).
        mlflow_run_id: the comparison's MLflow parent run, when tracked.
        overlap: J@k of each protocol's lists against SW-EVAL's (``overlap_protocols.csv``).
        unit_store: the directory of the unit store the comparison used.
    """

    config: EvalConfig
    options: CompareOptions
    directory: Path
    runs: dict[str, ProtocolRun]
    results: pd.DataFrame
    summary: pd.DataFrame
    kendall: pd.DataFrame
    leakage: pd.DataFrame
    log: InteractionLog
    unit_store: Path
    significance: pd.DataFrame = field(default_factory=pd.DataFrame)
    protocol_effect: pd.DataFrame = field(default_factory=pd.DataFrame)
    timings: dict[str, float] = field(default_factory=dict)
    mlflow_run_id: str | None = None
    overlap: pd.DataFrame = field(default_factory=pd.DataFrame)
    tuning_tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def protocols(self) -> list[str]:
        return list(self.options.protocols)

    @property
    def ks(self) -> list[int]:
        return list(self.config.k)

    @property
    def rank_metric(self) -> str:
        return self.options.rank_metric

    @property
    def loocv_repeats(self) -> int:
        return self.options.loocv_repeats

    @property
    def split_ratio(self) -> float:
        return self.options.split_ratio

    @property
    def split_seed(self) -> int:
        return self.options.split_seed

    @property
    def leakage_per_split(self) -> pd.DataFrame:
        return pd.concat([run.leakage for run in self.runs.values()], ignore_index=True)


def tables_of(comparison: Comparison) -> list[str]:
    """The tables and figure the comparison publishes besides ``compare.txt`` and
    ``compare.json`` (see :func:`write_comparison`)."""
    names = [*_frames(comparison)]
    return names + (["kendall_scatter.png"] if len(comparison.protocols) >= 2 else [])


def _frames(comparison: Comparison) -> dict[str, pd.DataFrame]:
    frames = {
        "compare.csv": comparison.results,
        "compare_summary.csv": comparison.summary,
        "table2.csv": table2(comparison.summary),
        "kendall.csv": comparison.kendall,
        "rank_shift.csv": rank_shift(comparison.summary, comparison.protocols,
                                     metric=comparison.rank_metric),
        "leakage.csv": comparison.leakage,
        "leakage_per_split.csv": comparison.leakage_per_split,
        "significance.csv": comparison.significance,
        "significance_protocols.csv": comparison.protocol_effect,
        **comparison.tuning_tables,
    }
    if not comparison.overlap.empty:
        frames["overlap_protocols.csv"] = comparison.overlap
    return frames


def write_comparison(comparison: Comparison, printed: str = "") -> None:
    """Publish the comparison's tables, figure, printed text and record as one set."""
    directory = comparison.directory
    files = {name: frame.to_csv(index=False, float_format="%.10g").encode()
             for name, frame in _frames(comparison).items()}
    scatter = _scatter(comparison)
    if scatter is not None:
        files["kendall_scatter.png"] = scatter
    if printed:
        files["compare.txt"] = printed.encode()
    files["compare.json"] = _record(comparison).encode()
    try:
        publish(directory, files, run=comparison.config.result_hash(), command="compare",
                legacy=OPTIONAL_FILES)
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot write the comparison ({exc}).") from exc


def _scatter(comparison: Comparison) -> bytes | None:
    """``kendall_scatter.png`` (002 Fig. 2) when at least two protocols were compared (drawn
    once per tables: :mod:`evaluators.report.drawn`)."""
    from sweval.evaluators.report.drawn import png
    from sweval.evaluators.units.memo import Memo

    if len(comparison.protocols) < 2:
        return None
    k = shown_k(comparison.ks)
    shown = (comparison.summary, comparison.kendall, comparison.protocols, k,
             comparison.rank_metric)

    def draw() -> Any:  # matplotlib is imported to draw only
        from sweval.evaluators.report.compare_figures import protocol_scatter

        return protocol_scatter(*shown[:4], metric=comparison.rank_metric)

    return png(Memo(comparison.unit_store), "kendall-scatter", shown, draw)


def _record(comparison: Comparison) -> str:
    """``compare.json``: the configuration, the protocols' parameters, the data, devices,
    seconds, the MLflow run and the unit store."""
    from sweval.evaluators.run.specs import algorithm_specs

    log = comparison.log
    options = comparison.options
    record = {
        "config": comparison.config.model_dump(),
        "protocols": {name: run.params for name, run in comparison.runs.items()},
        "loocv_repeats": options.loocv_repeats,
        "split_ratio": options.split_ratio,
        "split_seed": options.split_seed,
        "rank_metric": options.rank_metric,
        "data": {
            "source": log.source, "fingerprint": log.fingerprint(), "n_interactions": len(log),
            "n_users": log.n_users, "n_items": log.n_items, "t_min": log.t_min,
            "t_max": log.t_max,
        },
        "resolved_params": {
            spec.label: spec.canonical for spec in algorithm_specs(comparison.config)
        },
        "devices": {name: device for run in comparison.runs.values()
                    for name, device in run.devices.items()},
        "devices_per_protocol": {name: run.devices for name, run in comparison.runs.items()},
        "seconds": comparison.timings,
        "mlflow_run_id": comparison.mlflow_run_id,
        "unit_store": str(comparison.unit_store.resolve()),
    }
    return json.dumps(record, indent=2,
                      default=lambda v: v.item() if hasattr(v, "item") else str(v))
