"""``leakage``: the leakage-severity experiment (:mod:`evaluators.experiments.leakage`) run
through the one driver, its tables published as one set (the library part of ``sweval leakage``
and :func:`sweval.leakage`).

::

    LeakageRecipe(config, design).plans_of()    P's test users; a split per j = 0..J; for seeded
                                             models the same at j = 0 with seed + 1
    run_protocols(plans, store, executor)    one driver pass, resumable
    severity_tables(...)                     results, future items, % change, ranking, overlap
    write_severity(...)                      results.csv, leakage_splits.csv, future_items.csv,
                                             change.csv, ranking.csv, overlap.csv,
                                             severity.png, leakage.json
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.data.timestamps import minute_utc
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.text import entry_label
from sweval.evaluators.experiments.leakage import (
    LeakageSeverity,
    Severity,
    SeverityDesign,
    reseeded_entry,
    severity_tables,
    with_intrinsic,
)
from sweval.evaluators.experiments.protocol_runs import (
    ProtocolPlan,
    plan_protocol,
    protocol_work,
    run_protocols,
)
from sweval.evaluators.experiments.recipe import DesignRecipe
from sweval.evaluators.metrics.names import shown_k
from sweval.evaluators.run.driver import Executor, Hook
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.run.sources import load_data
from sweval.evaluators.run.work import remember
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.units.store import UnitStore

#: The files a leakage experiment writes.
FILES = ("results.csv", "leakage_splits.csv", "future_items.csv", "change.csv", "ranking.csv",
         "overlap.csv", "severity.png", "leakage.json")


@dataclass(frozen=True)
class LeakageRecipe(DesignRecipe):
    """The experiment's units, planned from the options and the data (here or on a worker)."""

    design: SeverityDesign

    def reseeded(self) -> dict[str, str]:
        """Per seeded model's label, the entry of the same model with seed + 1 (intrinsic
        overlap)."""
        return {entry_label(entry): other for entry in self.config.algorithms
                if (other := reseeded_entry(entry, self.config.params)) is not None}

    def plans_of(self, log: InteractionLog) -> list[ProtocolPlan]:
        """Every j's split, and the reseeded models' j = 0 split."""
        config = self.config
        plans = [plan_protocol(log, LeakageSeverity(self.design, u_min=config.u_min),
                               list(config.algorithms), ks=config.k, params=config.params)]
        if self.reseeded():
            plans.append(plan_protocol(log, LeakageSeverity(replace(self.design, periods=0)),
                                       list(self.reseeded().values()), ks=config.k,
                                       params=config.params))
        return plans



def run_leakage(
    config: EvalConfig,
    design: SeverityDesign,
    *,
    output: str | Path,
    log: InteractionLog | None = None,
    executor: Callable[[LeakageRecipe], Executor] | None = None,
    hooks: Sequence[Hook] = (),
    publish_to: bool = True,
) -> Severity:
    """Run the experiment and publish its tables into ``output``.

    Raises:
        SwevalError: bad options or data (test period outside the log, J too large, fewer
            test users than u_min, ...), a unit that failed, or another command writing to
            ``output``.
    """
    output = Path(output)
    # one command at a time in `output`, and not into another command's output; prune keeps
    # this command's units, from its start
    with output_lock(output, command="leakage"):
        recipe = LeakageRecipe(config, design, str(output), log=log)
        store = recipe.store()
        with store.in_use():
            log = log if log is not None else load_data(config)
            design.check(log)
            recipe = replace(recipe, fingerprint=log.fingerprint())
            plans = recipe.plans_of(log)
            remember(recipe, protocol_work(plans, list(config.k)))
            runs = run_protocols(plans, store, hooks=hooks,
                                 executor=executor(recipe) if executor is not None else None)
            severity = _tables(log, plans, runs, store, config, design, recipe.reseeded())
            if publish_to:
                write_severity(output, severity, design, config)
            return severity


def _tables(log: InteractionLog, plans: list[ProtocolPlan], runs: list[Any], store: UnitStore,
            config: EvalConfig, design: SeverityDesign, reseeded: dict[str, str]) -> Severity:
    run = runs[0]
    if run.results["skipped"].all():  # the test users are the same for every j
        reason = run.results["skip_reason"].iloc[0]
        raise SwevalError(
            f"every j is skipped ({reason}): the test period [{minute_utc(design.test_start)}, "
            f"{minute_utc(design.test_end)}) has too few test users; lower --u-min or choose a "
            "longer --window."
        )

    def lists_of(key: str) -> NDArray[np.int64]:
        return store.load(key, log).items

    protocol = plans[0].protocol
    assert isinstance(protocol, LeakageSeverity)
    severity = severity_tables(log, protocol, run.results, run.units, lists_of, config.k)
    if reseeded:
        severity.overlap = with_intrinsic(severity.overlap, runs[1].units, reseeded, lists_of,
                                          run.units, config.k)
    return severity


def write_severity(output: Path, severity: Severity, design: SeverityDesign,
                   config: EvalConfig) -> None:
    """Publish the experiment's tables, figure and record as one set."""
    from sweval.evaluators.report.figures import figure_png
    from sweval.evaluators.report.leakage_figures import severity_figure

    tables = {"results.csv": severity.results, "leakage_splits.csv": severity.splits,
              "future_items.csv": severity.future, "change.csv": severity.change,
              "ranking.csv": severity.ranking, "overlap.csv": severity.overlap}
    files = {name: frame.to_csv(index=False).encode() for name, frame in tables.items()}
    files["severity.png"] = figure_png(severity_figure(severity.results,
                                                       config.labels, shown_k(config.k)))
    record = {"design": {"test_start": design.test_start, "test_end": design.test_end,
                         "period_s": design.period_s, "periods": design.periods},
              "config": config.model_dump(mode="json")}
    files["leakage.json"] = (json.dumps(record, indent=2) + "\n").encode()
    try:
        publish(output, files, run=config.result_hash(), command="leakage")
    except OSError as exc:
        raise SwevalError(f"{output}: cannot write the tables ({exc}).") from exc
