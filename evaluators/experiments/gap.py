"""The validation-to-deployment gap (papers/003 §5.3–6, Table 2): how much an offline score
measured before deployment shrinks on the window the model is then deployed into.

::

    time ──────────────────────────────────────────────────────────────────────────▶
          D_T (everything before T): where a team validates            │ deployment
          ───────────────────────────────────────────────────[ T−tΔ, T )[ T, T+tΔ )
                                                               cut-off    test

    traditional   on D_T: a random share r of each user's transactions held out (random-split)
    proportional  on D_T: each user's last share r held out (temporal-user)
    cut-off       on D_T: train t < T − tΔ, test [T − tΔ, T) (temporal-global)
    test          train on D_T, test on the deployment window [T, T + tΔ) (one SW-EVAL fold)

With a training window L (``--train-window``) every training set keeps its last L: D_T is
[T − L, T) for the two hold-out sets and the test, the cut-off set trains on
[T − tΔ − L, T − tΔ). The cut-off set and the test count relevance as ``--relevance`` says
(the hold-out sets hold out transactions: every held-out one is relevant).

For every algorithm, metric and k: each validation's value v, the test value t and the drop
100 · (t / v − 1) %: the number that tells a team how much its offline score will shrink after
deployment. 003's traditional set holds out 20 % of the interactions of *held-out users*; here it
holds out a share of *every* user's interactions (our hold-out protocols keep every user in
training), the other two sets follow 003.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.data.timestamps import minute_utc
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.protocol_runs import (
    ProtocolPlan,
    plan_protocol,
    protocol_work,
    run_protocols,
)
from sweval.evaluators.experiments.recipe import DesignRecipe
from sweval.evaluators.metrics.ranking import Relevance
from sweval.evaluators.protocols.holdout import (
    Protocol,
    RandomSplit,
    SlidingWindow,
    TemporalGlobal,
    TemporalUser,
)
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.run.driver import Executor, Hook
from sweval.evaluators.run.output_dir import publish
from sweval.evaluators.run.sources import load_data
from sweval.evaluators.run.work import remember
from sweval.evaluators.units.locks import output_lock

#: The validation sets, in 003's order, with the protocol each one is.
VALIDATIONS = {"traditional": "random-split", "proportional": "temporal-user",
               "cut-off": "temporal-global"}


@dataclass(frozen=True)
class GapDesign:
    """The deployment window [deploy_start, deploy_start + width_s), the validation share, the
    training window (None: all history) and what counts as relevant in a time window."""

    deploy_start: int
    width_s: int
    share: float = 0.2
    seed: int = 0
    train_window_s: int | None = None
    relevance: Relevance = "all"

    def check(self, log: InteractionLog) -> None:
        """Raises SwevalError when the deployment window or the cut-off window lies outside
        the log."""
        if log.position(self.deploy_start) >= log.position(self.deploy_start + self.width_s):
            raise SwevalError(
                f"{log.source}: the deployment window starting at {minute_utc(self.deploy_start)} "
                f"holds no transaction (the log spans {minute_utc(log.t_min)} to "
                f"{minute_utc(log.t_max)}); choose --start (T) and --window inside the log."
            )
        if self.deploy_start - self.width_s <= log.t_min:
            raise SwevalError(
                f"{log.source}: the cut-off validation window [T − tΔ, T) starts at "
                f"{minute_utc(self.deploy_start - self.width_s)}, not after the first transaction "
                f"({minute_utc(log.t_min)}); choose a later --start or a shorter --window."
            )


def validation_protocols(design: GapDesign, *, u_min: int) -> dict[str, Protocol]:
    """The three validation protocols, each run on its log (:func:`validation_log`)."""
    return {
        "traditional": RandomSplit(share=design.share, seed=design.seed, u_min=u_min),
        "proportional": TemporalUser(share=design.share, u_min=u_min),
        "cut-off": TemporalGlobal(start=design.deploy_start - design.width_s,
                                  train_window_s=design.train_window_s, u_min=u_min,
                                  relevance=design.relevance),
    }


def validation_log(log: InteractionLog, design: GapDesign, name: str) -> InteractionLog:
    """What validation ``name`` may see: the transactions before the deployment window (D_T);
    for a hold-out set with a training window, only its last L, [T − L, T) (the cut-off set
    applies L to its own training set)."""
    before = log.timestamp < design.deploy_start
    if design.train_window_s is not None and name != "cut-off":
        before &= log.timestamp >= design.deploy_start - design.train_window_s
    return log.restrict(before)


def deployment_protocol(log: InteractionLog, design: GapDesign, *, u_min: int) -> Protocol:
    """The deployment test: one SW-EVAL fold, train on D_T (its last L with a training
    window), test on [T, T + tΔ)."""
    spec = WindowSpec(width_s=design.width_s, n_folds=1, start=design.deploy_start,
                      train_window_s=design.train_window_s)
    return SlidingWindow.from_spec(log, spec, u_min=u_min, relevance=design.relevance)


def gap_table(validation: dict[str, pd.DataFrame], test: pd.DataFrame) -> pd.DataFrame:
    """003 Table 2: per algorithm, metric, k and validation set, its value, the test value and
    the drop in % (NaN where a value is missing or the validation value is 0).

    Args:
        validation: per validation name, its long results table (one split).
        test: the deployment fold's long results table.
    """
    def values(frame: pd.DataFrame) -> pd.Series:
        rows = frame[(frame["stratum"] == "all") & ~frame["skipped"].astype(bool)]
        return rows.groupby(["algorithm", "metric", "k"], dropna=False, sort=False)["value"].mean()

    deployed = values(test)
    parts = []
    for name, frame in validation.items():
        valid = values(frame)
        both = pd.concat({"validation_value": valid, "test_value": deployed}, axis=1)
        both = both[both["validation_value"].notna()]
        both.insert(0, "validation", name)
        parts.append(both)
    table = pd.concat(parts).reset_index()
    ratio = table["test_value"] / table["validation_value"].where(table["validation_value"] != 0)
    table["drop_pct"] = 100.0 * (ratio - 1.0)
    return table[["algorithm", "metric", "k", "validation", "validation_value", "test_value",
                  "drop_pct"]]


def skipped_sets(results: pd.DataFrame) -> dict[str, str]:
    """The sets (validations and ``test``) whose split was skipped, with the reason (u_min)."""
    found = {}
    for name, rows in results[results["stratum"] == "all"].groupby("set", sort=False):
        if rows["skipped"].all():
            found[str(name)] = str(rows["skip_reason"].iloc[0])
    return found


def unsupported_cells(results: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(algorithm, set, reason) of the algorithms a set does not evaluate although its split
    was not skipped (POP-N under a random hold-out: its reason from ``skip_reason``)."""
    rows = results[(results["stratum"] == "all") & results["skipped"].astype(bool)]
    skipped = skipped_sets(results)
    found = rows[~rows["set"].isin(list(skipped))].drop_duplicates(["algorithm", "set"])
    return [(str(r.algorithm), str(r.set), str(r.skip_reason)) for r in found.itertuples()]


def gap_notes(results: pd.DataFrame) -> list[str]:
    """Why cells of the gap table are empty, a line each: a skipped validation set
    ("val cut-off: skipped (n_eligible=3 < u_min=5), so its columns are empty") and an
    algorithm a set does not define ("pop-n under val traditional: ...")."""
    notes = [f"val {name}: skipped ({reason}), so its columns are empty"
             for name, reason in skipped_sets(results).items() if name != "test"]
    notes += [f"{algorithm} under {'val ' if name != 'test' else ''}{name}: {reason}"
              for algorithm, name, reason in unsupported_cells(results)]
    return notes


# ---------------------------------------------------------------------- the experiment
@dataclass(frozen=True)
class GapRecipe(DesignRecipe):
    """The experiment's units, planned from the options and the data (here or on a worker):
    each validation on the data before T, the deployment on [T, T + tΔ)."""

    design: GapDesign

    def plans(self, log: InteractionLog) -> dict[str, ProtocolPlan]:
        """Per set (the validations, then ``test``), its plan."""
        config = self.config
        algorithms = list(config.algorithms)
        plans = {name: plan_protocol(validation_log(log, self.design, name), protocol,
                                     algorithms, ks=config.k, params=config.params)
                 for name, protocol in validation_protocols(self.design,
                                                            u_min=config.u_min).items()}
        plans["test"] = plan_protocol(log, deployment_protocol(log, self.design,
                                                               u_min=config.u_min),
                                      algorithms, ks=config.k, params=config.params)
        return plans

    def plans_of(self, log: InteractionLog) -> list[ProtocolPlan]:
        return list(self.plans(log).values())


def run_gap(
    config: EvalConfig,
    design: GapDesign,
    *,
    output: str | Path,
    log: InteractionLog | None = None,
    executor: Callable[[GapRecipe], Executor] | None = None,
    hooks: Sequence[Hook] = (),
    publish_to: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validate, deploy and publish the tables into ``output``: (gap table, long results of
    the four sets, with a ``set`` column).

    Raises:
        SwevalError: bad options or data (windows outside the log, ratio outside (0, 1), ...),
            a unit that failed, or another command writing to ``output``.
    """
    output = Path(output)
    # one command at a time in `output`, and not into another command's output; prune keeps
    # this command's units, from its start
    with output_lock(output, command="gap"):
        recipe = GapRecipe(config, design, str(output), log=log)
        store = recipe.store()
        with store.in_use():
            log = log if log is not None else load_data(config)
            design.check(log)
            recipe = replace(recipe, fingerprint=log.fingerprint())
            plans = recipe.plans(log)
            remember(recipe, protocol_work(list(plans.values()), list(config.k)))
            runs = run_protocols(list(plans.values()), store, hooks=hooks,
                                 executor=executor(recipe) if executor is not None else None)
            sets = {name: run.results for name, run in zip(plans, runs, strict=True)}
            gap = gap_table({name: sets[name] for name in VALIDATIONS}, sets["test"])
            results = pd.concat([frame.assign(set=name) for name, frame in sets.items()],
                                ignore_index=True)
            if publish_to:
                _write(output, gap, results, design, config, log.fingerprint())
            return gap, results


def _write(output: Path, gap: pd.DataFrame, results: pd.DataFrame, design: GapDesign,
           config: EvalConfig, fingerprint: str) -> None:
    """Publish ``gap.csv``, ``results.csv`` and ``gap.json`` as one set."""
    record = {"deploy_start": design.deploy_start, "window_s": design.width_s,
              "share": design.share, "seed": design.seed,
              "train_window_s": design.train_window_s, "relevance": design.relevance,
              "validations": VALIDATIONS, "config": config.model_dump(mode="json"),
              "data_fingerprint": fingerprint}
    try:
        publish(output, {
            "gap.csv": gap.to_csv(index=False, float_format="%.10g").encode(),
            "results.csv": results.to_csv(index=False, float_format="%.10g").encode(),
            "gap.json": (json.dumps(record, indent=2) + "\n").encode(),
        }, run=config.result_hash(), command="gap")
    except OSError as exc:
        raise SwevalError(f"{output}: cannot write the tables ({exc}).") from exc
