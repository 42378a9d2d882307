"""The plan of a comparison: its options (:class:`CompareOptions`), every protocol built with
the run's options and planned as protocol plans
(:class:`~evaluators.experiments.protocol_runs.ProtocolPlan`) on the log and, with
``--stratify-by``, on each policy's sub-log (:func:`plan_compare`), and the recipe that makes
the same work again in another process (:class:`CompareRecipe`); run by
:mod:`evaluators.experiments.compare`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field, replace

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.protocol_runs import ProtocolPlan, plan_protocol, protocol_work
from sweval.evaluators.protocols.holdout import (
    LOOCV,
    GivenSplits,
    LeaveLastBasket,
    LeaveLastOneOut,
    RandomSplit,
    SlidingWindow,
    TemporalGlobal,
    TemporalUser,
    check_loocv_repeats,
    check_split_seed,
    for_stratum,
    parse_protocols,
)
from sweval.evaluators.protocols.holdout import Protocol as EvalProtocol
from sweval.evaluators.run.plan import Plan, make_plan, run_key
from sweval.evaluators.run.sources import unit_store
from sweval.evaluators.run.specs import window_spec
from sweval.evaluators.run.work import Work
from sweval.evaluators.units.store import UnitStore

_log = logging.getLogger(__name__)

#: Metrics a ranking can use (one value per k).
RANK_METRICS = ("recall", "hit_rate", "ndcg")


@dataclass(frozen=True)
class CompareOptions:
    """What ``compare`` adds to ``sweval run``'s options.

    Attributes:
        protocols: the protocols, in the order given (:data:`evaluators.protocols.holdout.PROTOCOLS`).
        loocv_repeats: LOOCV repetitions (seeds 0..n−1).
        split_ratio, split_seed: ``random-split`` and ``temporal-user``'s per-user test share,
            ``random-split``'s seed.
        rank_metric: the metric of the rankings, Kendall's τ and the rank shifts.
    """

    protocols: tuple[str, ...] = ("sw-eval", "loocv", "leave-last-one-out")
    loocv_repeats: int = 10
    split_ratio: float = 0.2
    split_seed: int = 0
    rank_metric: str = "recall"

    def check(self) -> CompareOptions:
        """The options, validated (before anything is fitted).

        Raises:
            SwevalError: an unknown or repeated protocol, or an option out of its range.
        """
        protocols = tuple(parse_protocols(list(self.protocols)))
        check_loocv_repeats(self.loocv_repeats)
        check_split_seed(self.split_seed)
        if self.rank_metric not in RANK_METRICS:
            raise SwevalError(
                f"--rank-metric {self.rank_metric!r}: one of {', '.join(RANK_METRICS)}.")
        return replace(self, protocols=protocols)



@dataclass
class ComparePlan:
    """Every protocol's plan: the run's plan (``sw-eval``'s folds, the algorithms), and per
    protocol its main plan and, with ``--stratify-by``, one per policy."""

    plan: Plan
    protocols: dict[str, EvalProtocol]
    keys: dict[str, str]
    main: dict[str, ProtocolPlan]
    strata: dict[str, list[ProtocolPlan]]

    @property
    def plans(self) -> list[ProtocolPlan]:
        return [plan for name in self.main
                for plan in (self.main[name], *self.strata.get(name, []))]

    def work(self) -> Work:
        return protocol_work(self.plans, list(self.plan.config.k))


def build_protocol(name: str, config: EvalConfig, options: CompareOptions,
                   plan: Plan) -> EvalProtocol:
    """The protocol ``name`` with the options of ``config`` (u_min, relevance, start, ...)."""
    if name == "sw-eval":
        return SlidingWindow(plan.folds, config.relevance, splits=plan.splits)
    if name == "loocv":
        return LOOCV(repeats=options.loocv_repeats, u_min=config.u_min)
    if name == "leave-last-one-out":
        return LeaveLastOneOut(u_min=config.u_min)
    if name == "temporal-global":
        spec = window_spec(config)
        return TemporalGlobal(start=spec.start, train_window_s=spec.train_window_s,
                              u_min=config.u_min, relevance=config.relevance)
    if name == "random-split":
        return RandomSplit(share=options.split_ratio, seed=options.split_seed, u_min=config.u_min)
    if name == "temporal-user":
        return TemporalUser(share=options.split_ratio, u_min=config.u_min)
    if name == "leave-last-basket":
        return LeaveLastBasket(u_min=config.u_min)
    raise SwevalError(f"unknown protocol {name!r}")


def protocol_key(protocol: EvalProtocol, config: EvalConfig, fingerprint: str) -> str:
    """A protocol's ``config_hash``: its run key (:func:`~evaluators.run.plan.run_key`) with
    the protocol's parameters."""
    from sweval.evaluators.config.text import parse_variant

    names = [parse_variant(entry)[0] for entry in config.algorithms]
    return run_key(config, fingerprint, names, kind=protocol.name,
                   extra={"params": protocol.describe()})


def plan_compare(config: EvalConfig, options: CompareOptions,
                 log: InteractionLog | None = None) -> ComparePlan:
    """Plan every protocol of the comparison (see :class:`ComparePlan`).

    Raises:
        SwevalError: bad options or data (a basket protocol without baskets, ...).
    """
    if config.cold_users or config.stratify_by == "returning":
        raise SwevalError(
            "--cold-users / --stratify-by returning: compare's hold-out protocols have no "
            "first-time users (every evaluated user has training data); run `sweval run "
            "--cold-users` for SW-EVAL alone, or compare with --stratify-by user-history."
        )
    if config.repeats:
        raise SwevalError(
            "--repeats: compare's hold-out protocols rank unseen items only; run `sweval run "
            "--repeats` for SW-EVAL's windows with repeat consumption."
        )
    plan = make_plan(config, log)
    log = plan.log
    if "leave-last-basket" in options.protocols and log.basket is None:
        raise SwevalError(
            f"{log.source}: --protocols leave-last-basket needs the basket or session of "
            "each transaction; name its column with --basket-col."
        )
    names = [spec.label for spec in plan.specs]  # --tune's candidates are variants too
    protocols = {name: build_protocol(name, config, options, plan) for name in options.protocols}
    keys = {name: plan.key if name == "sw-eval" else
            protocol_key(protocol, config, log.fingerprint())
            for name, protocol in protocols.items()}
    main, strata = {}, {}
    users = plan.strata.users if plan.strata is not None else None
    for name, protocol in protocols.items():
        main[name] = plan_protocol(log, protocol, names, ks=config.k, params=config.params,
                                   config_hash=keys[name], user_strata=users,
                                   u_min=config.u_min)
        if plan.strata is not None and plan.strata.mode != "users":
            strata[name] = _stratum_plans(plan, protocol, names, keys[name])
    return ComparePlan(plan=plan, protocols=protocols, keys=keys, main=main, strata=strata)


def _stratum_plans(plan: Plan, protocol: EvalProtocol, names: list[str],
                   key: str) -> list[ProtocolPlan]:
    """The protocol on each policy's sub-log (SPEC §6 mode ``subset``); ``sw-eval``'s strata
    are the run's, so their units are those of ``sweval run --stratify-by``. A stratum the
    protocol cannot cut (no data of that policy after the cut-off) is left out, with a
    warning."""
    assert plan.strata is not None
    config = plan.config
    plans = []
    for label in plan.strata.labels:
        if protocol.name == "sw-eval":
            stratum: EvalProtocol = GivenSplits("sw-eval", plan.stratum_splits[label])
        else:
            stratum = for_stratum(protocol, plan.log)
        try:
            plans.append(plan_protocol(plan.strata.logs[label], stratum, names, ks=config.k,
                                       params=config.params, config_hash=key, stratum=label))
        except SwevalError as exc:
            _log.warning("%s, stratum %s: not evaluated (%s)", protocol.name, label, exc)
    return plans


@dataclass(frozen=True)
class CompareRecipe:
    """A comparison's work, made again in another process (a Dask worker)."""

    config: EvalConfig
    options: CompareOptions
    fingerprint: str
    #: the log itself when the caller gave one (a DataFrame of the Python API): a worker cannot
    #: load it from ``config``, so it travels with the recipe
    log: InteractionLog | None = field(default=None, compare=False, repr=False)

    def cache_key(self) -> str:
        text = json.dumps([self.config.model_copy(update={"progress": False}).model_dump_json(),
                           repr(self.options), self.fingerprint])
        return hashlib.sha256(text.encode()).hexdigest()

    def store(self) -> UnitStore:
        return unit_store(self.config)

    def work(self) -> Work:
        planned = plan_compare(self.config, self.options, self.log)
        if planned.plan.log.fingerprint() != self.fingerprint:
            raise SwevalError(f"{self.config.data}: the data changed while the comparison ran; "
                              "rerun to start over.")
        return planned.work()
