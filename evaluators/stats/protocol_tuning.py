"""``sweval compare --tune``: the timeline's nested tuning beside tuning on a hold-out protocol.

For a hold-out protocol P (LOOCV, a random split, ...) the candidate with the best mean over
P's splits is chosen once, as a study tuned on P would, and then scored under SW-EVAL on the
folds where the nested ``ALGO[tuned]`` (:func:`evaluators.stats.tuning.tune`) has a value::

    ALGO[tuned]         chosen per fold on the windows before it (no future)
    ALGO[tuned on P]    chosen once on P's splits, which mix future and past
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.results import results_frame
from sweval.evaluators.stats.tuning import fold_values, optimism, tune
from sweval.evaluators.stats.tuning_candidates import Search, ordered_labels, searches, tune_metric

#: The hold-out protocols ``sweval compare --tune`` also tunes on (the timeline-blind way).
HOLDOUT_PROTOCOLS = (
    "loocv", "leave-last-one-out", "temporal-user", "random-split", "leave-last-basket",
)
TUNED_ON = "{}[tuned on {}]"
PROTOCOL_TUNING_COLUMNS = [
    "protocol", "algorithm", "candidate", "params", "validation_value", "n_splits", "chosen",
]


def tune_on_protocols(
    sw_eval: pd.DataFrame, others: dict[str, pd.DataFrame], config: EvalConfig,
    found: list[Search] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tuning on a hold-out protocol, evaluated under SW-EVAL (papers/001 §3.1's way).

    For each hold-out protocol P and tuned algorithm: the candidate with the best mean
    ``--tune-metric`` over P's splits (ties to the earlier candidate) is chosen once, and
    ``ALGO[tuned on P]`` is its SW-EVAL series on the folds where ``ALGO[tuned]`` has a value,
    so the two compare on the same folds.

    Args:
        sw_eval: SW-EVAL's results, the nested ``ALGO[tuned]`` rows included.
        others: the hold-out protocols' results, by name.

    Returns:
        The added SW-EVAL rows, and one row per (protocol, algorithm, candidate).
    """
    metric, k = tune_metric(config)
    added, choices = [], []
    for search in searches(config) if found is None else found:
        nested = sw_eval[(sw_eval["algorithm"] == search.label) & (sw_eval["stratum"] == "all")]
        no_value = set(nested.loc[nested["skipped"], "fold"])
        for protocol, results in others.items():
            if protocol not in HOLDOUT_PROTOCOLS:
                continue
            values = fold_values(results, metric, k)
            present = [c for c in search.candidates if c in values]
            if not present:  # e.g. POP-N under LOOCV: not defined there
                continue
            means = values[present].mean()
            chosen = present[int(np.argmax(np.round(means.to_numpy(), 12)))]
            for label, params in zip(search.candidates, search.params, strict=True):
                choices.append({
                    "protocol": protocol, "algorithm": search.label, "candidate": label,
                    "params": json.dumps(params, sort_keys=True),
                    "validation_value": float(means.get(label, np.nan)),
                    "n_splits": int(values[label].notna().sum()) if label in values else 0,
                    "chosen": label == chosen,
                })
            rows = sw_eval[sw_eval["algorithm"] == chosen].copy()
            rows["algorithm"] = TUNED_ON.format(search.name, protocol)
            outside = rows["fold"].isin(no_value) & ~rows["skipped"]
            rows.loc[outside, "value"] = np.nan
            rows.loc[outside, "skipped"] = True
            rows.loc[outside, "skip_reason"] = f"compared on the folds of {search.label}"
            added.append(rows)
    tuned = pd.concat(added, ignore_index=True) if added else sw_eval.iloc[:0]
    return tuned, pd.DataFrame(choices, columns=PROTOCOL_TUNING_COLUMNS)


def tune_comparison(
    sw_eval: pd.DataFrame, others: dict[str, pd.DataFrame], config: EvalConfig,
    found: list[Search] | None = None,
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """``sweval compare --tune``: SW-EVAL's results (with a ``protocol`` column) with
    ``ALGO[tuned]`` (nested on the timeline) and ``ALGO[tuned on P]`` for every hold-out
    protocol P compared, and the tables ``tuning.csv``, ``tuning_protocols.csv`` and
    ``optimism.csv``."""
    nested, choices = tune(sw_eval, config, found)
    results = pd.concat([sw_eval, nested], ignore_index=True)
    on_protocols, protocol_choices = tune_on_protocols(results, others, config, found)
    results = pd.concat([results, on_protocols], ignore_index=True)
    order = list(dict.fromkeys([*ordered_labels(config, found), *results["algorithm"]]))
    results = results_frame(results.drop(columns="protocol").to_dict("records"), order)
    results.insert(0, "protocol", "sw-eval")
    return results, {
        "tuning.csv": choices,
        "tuning_protocols.csv": protocol_choices,
        "optimism.csv": optimism(results, config, found),
    }
