"""Rolling mode: each run evaluates the complete windows that appeared since the previous run.

The window start t_0 is fixed by ``--start`` (without it, the series' first run fixes t_0 so that
it evaluates the last ``--folds`` complete windows, and later runs keep it); the width tΔ by
``--window``. A run re-reads the log and evaluates every window [t_f, t_f + tΔ) with
t_f + tΔ + lag ≤ t_max + 1 s (the complete ones; ``--lag``, 0 by default, leaves time for late
events to arrive before a window is evaluated) that the series has not evaluated yet::

    t_0        t_1        t_2        t_3        t_4   t_max
    [  f0    )[  f1    )[  f2    )[  f3    )[  f4 ..│        run 1: f0..f3 complete
    [  f0    )[  f1    )[  f2    )[  f3    )[  f4    )[  f5 ..│  run 2: only f4 is new

After the first run ``--folds`` no longer matters: the number of folds grows with the data.
Units are content-addressed (:mod:`evaluators.units.unit`): a window's key covers only the
transactions before its end, so a run finds every earlier window's unit in the store and computes
only the new windows. ``<output>/rolling.json`` records how far the series got::

    {"key": ..., "start": t_0, "width_s": tΔ, "n_folds": n, "previous_n_folds": n before this
     run, "horizon": t_0 + n·tΔ,
     "prefix_fingerprint": hash of every transaction before the horizon,
     "prefix_rows": their count, "first_event": the log's first timestamp}

The results of the evaluated folds depend only on transactions before the horizon. If those
changed (rewritten history, late events inserted before the horizon, a different configuration),
the series starts over: the MLflow run record is dropped and a new parent run begins (the changed
windows get new unit keys by themselves; no unit is deleted). A log that lost transactions before
the horizon, or gained some before its first event, is an error instead
(:func:`lost_or_corrupt`): a partial export or a row cut short must not split the series.
Otherwise the same MLflow parent run and child runs receive the new steps, so the MLflow UI
shows one growing time series per algorithm.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweval.data.durations import parse_duration, parse_time
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.data.timestamps import iso_utc
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.plan import Plan, make_plan, run_key
from sweval.evaluators.run.specs import window_spec
from sweval.evaluators.state import ROLLING, TRACKING

_log = logging.getLogger(__name__)

STATE_FILE = ROLLING.name


def rolling_key(config: EvalConfig) -> str:
    """The key of a rolling series (its MLflow parent run and ``rolling.json``): the run key
    (:func:`~evaluators.run.plan.run_key`) with the fold count and the data left out: both
    grow with the series."""
    from sweval.evaluators.config.text import parse_variant

    names = [parse_variant(entry)[0] for entry in config.algorithms]
    return run_key(config.model_copy(update={"folds": 1}), "", names, kind="rolling")


def prefix_fingerprint(log: InteractionLog, horizon: int) -> str:
    """A content hash (raw ids, times, policies) of every transaction before ``horizon``.

    Codes are not hashed: they may shift when new ids arrive, while raw ids do not.
    """
    end = log.position(horizon)
    digest = hashlib.sha256(str(end).encode())
    columns: list[Any] = [
        np.asarray(log.user_ids)[log.user[:end]],
        np.asarray(log.item_ids)[log.item[:end]],
        log.timestamp[:end],
    ]
    if log.policy is not None and log.policy_ids is not None:
        columns.append(np.asarray(log.policy_ids)[log.policy[:end]])
    for column in columns:
        digest.update(pd.util.hash_array(np.asarray(column)).tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class RollingStep:
    """One rolling run: the plan over every complete window, and what was there before."""

    plan: Plan
    previous_folds: int

    @property
    def new_folds(self) -> list[int]:
        return [fold.index for fold in self.plan.folds if fold.index >= self.previous_folds]


def plan_rolling(config: EvalConfig, log: InteractionLog) -> RollingStep | None:
    """The plan of this rolling run, or None when no window is complete yet.

    Without ``config.start``, the first run of a series fixes t_0 so that it evaluates the last
    ``config.folds`` complete windows; later runs keep that t_0 (from ``rolling.json``).

    Resets the output directory's series (MLflow record, state) when the configuration
    or the data before the previous horizon changed. The new series keeps the old one's t_0
    when its windows have the same width, so it covers the same windows (their unchanged units
    reused) and more: a restart never shortens the history.

    Raises:
        SwevalError: an unusable output directory.
    """
    spec = window_spec(config)
    lag = parse_duration(config.lag, option="--lag") if config.lag is not None else 0
    output = Path(config.output)
    key = rolling_key(config)
    state = read_state(output)
    if not state and _tracked_series(output) == key:  # rolling.json deleted or unreadable
        _log.warning("rolling: %s is missing or unreadable; starting a new series in %s",
                     output / STATE_FILE, output)
        reset(output)  # its MLflow record too: the old parent's steps are other windows
    kept_start = (int(state["start"]) if "start" in state
                  and int(state.get("width_s", -1)) == spec.width_s else None)
    if state and state.get("key") != key:
        _log.warning("rolling: the configuration changed; starting a new series in %s%s", output,
                     f" from the same start, {iso_utc(kept_start)}" if kept_start is not None
                     and config.start is None else "")
        reset(output)
        state = {}
    if config.start is not None:
        t0 = parse_time(config.start)
    elif kept_start is not None:
        t0 = kept_start
    else:  # the last `folds` complete windows, aligned to multiples of the width since 1970
        t0 = (log.t_max + 1 - lag) // spec.width_s * spec.width_s - config.folds * spec.width_s
    reached = (log.t_max + 1 - t0) // spec.width_s  # windows the log has reached the end of
    n_folds = (log.t_max + 1 - lag - t0) // spec.width_s  # ... and past it by the lag
    previous = 0
    if state:
        same = (
            int(state.get("start", t0)) == t0
            and int(state.get("n_folds", 0)) <= reached
            and prefix_fingerprint(log, int(state["horizon"])) == state.get("prefix_fingerprint")
        )
        if same:
            previous = int(state["n_folds"])
            n_folds = max(n_folds, previous)  # a lag raised since keeps what was evaluated
        else:
            horizon = state.get("horizon")
            lost = lost_or_corrupt(state, log, reached, output)
            if lost is not None:
                raise SwevalError(f"{log.source}: {lost}")
            counts = ""
            if horizon is not None and "prefix_rows" in state:
                counts = (f" ({log.position(int(horizon)):,} transactions before it now, "
                          f"{int(state['prefix_rows']):,} at the last run)")
            _log.warning(
                "rolling: the data before %s changed%s; starting a new series in %s%s",
                iso_utc(int(horizon)) if horizon is not None else "the last evaluated window's end",
                counts, output,
                f" from the same start, {iso_utc(t0)}" if config.start is None else "",
            )
            reset(output)
    if n_folds < 1:
        _log.warning(
            "rolling: no complete %s window since %s yet (last event at %s)",
            config.window, t0, log.t_max,
        )
        return None
    effective = config.model_copy(update={"folds": int(n_folds), "start": str(t0)})
    plan = make_plan(effective, log)
    return RollingStep(plan=replace(plan, key=key), previous_folds=previous)


#: How many suspicious transactions an error names.
SHOWN_TRANSACTIONS = 3


def lost_or_corrupt(state: dict[str, Any], log: InteractionLog, reached: int,
                    output: Path) -> str | None:
    """Why the log, changed before the series' horizon, looks broken rather than revised, or
    None. A revision (late events, rewritten history) starts a new series; these stop the run,
    since a new series would split the MLflow history for good over a bad export:

    - the log ends before the horizon (``reached``: the windows whose end the log reaches),
      or holds fewer transactions before it than at the last run: transactions were lost (a
      partial export, a file being rewritten);
    - transactions dated before the log's first event at the last run: a row cut short while
      being written (``64,231,88974`` for ``...,889740880``) reads as an event in 1970.
    """
    horizon = int(state["horizon"])
    remedy = (f" If the log is right as it is, delete {ROLLING.path(output)} and "
              f"{TRACKING.path(output)} to start a new series on it (a new MLflow parent run; "
              "no unit is deleted).")
    if reached < int(state.get("n_folds", 0)):
        return (f"the log now ends at {iso_utc(log.t_max)}, before the end of the windows the "
                f"rolling series has evaluated ({iso_utc(horizon)}): it lost its latest "
                f"transactions (a partial export?).{remedy}")
    if "prefix_rows" in state and log.position(horizon) < int(state["prefix_rows"]):
        return (f"{log.position(horizon):,} transactions before {iso_utc(horizon)}, "
                f"{int(state['prefix_rows']):,} at the rolling series' last run: the log lost "
                f"transactions it had evaluated (a partial export?).{remedy}")
    first = state.get("first_event")
    if first is not None and log.t_min < int(first):
        early = log.position(int(first))
        shown = "; ".join(
            f"(user {log.user_ids[log.user[i]]}, item {log.item_ids[log.item[i]]}, "
            f"{iso_utc(int(log.timestamp[i]))})" for i in range(min(early, SHOWN_TRANSACTIONS)))
        return (f"{early:,} transaction(s) dated before the log's first event at the rolling "
                f"series' last run ({iso_utc(int(first))}): {shown}. A row cut short while the "
                f"file was written, a wrong time unit, or older history added?{remedy}")
    return None


def record(step: RollingStep) -> None:
    """Write ``rolling.json`` after a successful run."""
    plan = step.plan
    spec = window_spec(plan.config)
    t0 = parse_time(str(plan.config.start))
    horizon = t0 + plan.config.folds * spec.width_s
    state = {
        "key": plan.key,
        "start": t0,
        "width_s": spec.width_s,
        "n_folds": plan.config.folds,
        "previous_n_folds": step.previous_folds,  # what the series held before this run
        "horizon": horizon,
        "prefix_fingerprint": prefix_fingerprint(plan.log, horizon),
        "prefix_rows": plan.log.position(horizon),
        "first_event": plan.log.t_min,
        "data_fingerprint": plan.log.fingerprint(),
    }
    ROLLING.write(plan.config.output, state)


def progress_line(state: dict[str, Any], skipped: Iterable[int] = ()) -> str:
    """What the last run added to the series (from the ``rolling.json`` it wrote; ``skipped``:
    the folds skipped for too few eligible users)::

        rolling: 2 new windows evaluated (folds 6-7, 1 skipped); the series holds 8, up to ...
        rolling: no new complete window since the last run; the series holds 8, up to ...
    """
    n_folds = int(state["n_folds"])
    previous = int(state.get("previous_n_folds", 0))
    held = f"the series holds {n_folds}, up to {iso_utc(int(state['horizon']))}"
    if n_folds <= previous:
        return f"rolling: no new complete window since the last run; {held}."
    new = n_folds - previous
    folds = f"fold {previous}" if new == 1 else f"folds {previous}-{n_folds - 1}"
    n_skipped = sum(1 for fold in set(skipped) if previous <= fold < n_folds)
    if n_skipped:
        folds += ", skipped" if new == 1 else f", {n_skipped} skipped"
    return f"rolling: {new} new window{'s' if new > 1 else ''} evaluated ({folds}); {held}."


def read_state(output: Path) -> dict[str, Any]:
    """The series' ``rolling.json`` in ``output`` (empty without one)."""
    return ROLLING.read(output)


def _tracked_series(output: Path) -> str | None:
    """The key of the run whose MLflow record ``output`` holds (``tracking.json``), if any."""
    key = TRACKING.read(output).get("key")
    return key if isinstance(key, str) else None


def reset(output: Path) -> None:
    """Forget a rolling series: its MLflow run record and its state (units stay in the store)."""
    try:
        ROLLING.remove(output)
        TRACKING.remove(output)
    except OSError as exc:
        raise SwevalError(f"{output}: cannot reset the rolling series ({exc}).") from exc
