"""One MLflow logged model per algorithm configuration of a run: a record, no weights.

MLflow 3 ranks "models" across runs in an experiment's Models tab (and
``MlflowClient.search_logged_models(order_by=...)``). SW-EVAL fits a fresh model on every fold
and keeps none, so what it records is the configuration itself::

    logged model  <label>                 one per algorithm child (stratum "all") of a run
        model_type   sweval-configuration
        source run   the child run; also logged as the child's output (step 0)
        params       the configuration's resolved hyper-parameters (as the child's params)
        tags         sweval.algorithm, sweval.run_key, sweval.data_fingerprint, sweval.window
        metrics      every fold's metrics at step = fold, stamped with the fold's window start
                     and linked to the fold's dataset ("<data> fold <f>", its digest); the
                     summaries (mean_<key>, ci_low_<key>, ...) linked to the whole log
        status       PENDING while the run computes, READY when it finished (FAILED otherwise)

The metrics are the child run's own ``log_batch`` metrics carrying ``model_id``,
``dataset_name`` and ``dataset_digest`` (MLflow stores those links with the model's metrics),
so they cost no extra call. A store that cannot hold logged models (an MLflow 2 server) gets
none: the runs are logged as before and a warning says why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

_log = logging.getLogger(__name__)

#: The logged models' type.
MODEL_TYPE = "sweval-configuration"


def create_model(
    client: Any, experiment_id: str, run_id: str, label: str, params: Mapping[str, str],
    tags: Mapping[str, str],
) -> str | None:
    """Create the logged model of one configuration, its source and output the child run
    ``run_id``; returns its id, or None when the store refused (logged as a warning)."""
    from mlflow.entities import LoggedModelOutput

    try:
        model = client.create_logged_model(
            experiment_id, name=_model_name(label), source_run_id=run_id,
            params=dict(params), tags=dict(tags), model_type=MODEL_TYPE,
        )
        client.log_outputs(run_id, [LoggedModelOutput(model.model_id, 0)])
    except Exception as exc:  # noqa: BLE001 (the runs are logged without it)
        _log.warning("MLflow: no logged model for %s (%s: %s)", label, type(exc).__name__, exc)
        return None
    return str(model.model_id)


def model_of(tracker: Any, algorithm: str, stratum: str, run_id: str) -> str | None:
    """The logged model of a child run of ``tracker``: the one its output's state
    (``tracking.json``) records, else a new one (recorded there); None for a stratum other than
    ``all`` or a comparison's runs."""
    from sweval.flows.tracking.records import algorithm_params, write_state

    if stratum != "all" or tracker.mode not in ("batch", "rolling"):
        return None
    recorded = tracker.state.setdefault("models", {})
    name = f"{algorithm}|{stratum}"
    if name not in recorded:
        tags = {"sweval.algorithm": algorithm, "sweval.run_key": tracker.state["key"],
                "sweval.data_fingerprint": tracker.fingerprint,
                "sweval.window": str(tracker.config.window)}
        recorded[name] = create_model(tracker.client, tracker.experiment_id, run_id, algorithm,
                                      algorithm_params(tracker.config, algorithm), tags)
        write_state(tracker.state_path, tracker.state)
    return recorded[name]


def _model_name(label: str) -> str:
    """A model name MLflow accepts (no ``/ : . %`` or quotes): the label with those replaced by
    ``_`` (``my_pkg.models:CoVisit(days=1.5)`` → ``my_pkg_models_CoVisit(days=1_5)``); the
    exact label is the model's ``sweval.algorithm`` tag."""
    return "".join("_" if c in "/:.%\"'" else c for c in label)


def finalize_models(client: Any, model_ids: Mapping[Any, str | None], status: str) -> None:
    """Mark the models READY (or FAILED); a model the store no longer has is skipped."""
    for model_id in model_ids.values():
        if model_id is None:
            continue
        try:
            client.finalize_logged_model(model_id, status)
        except Exception as exc:  # noqa: BLE001 (the runs' own status matters more)
            _log.warning("MLflow: logged model %s not marked %s: %s", model_id, status, exc)


def linked(metrics: list[Any], model_id: str | None, dataset: tuple[str, str] | None) -> list[Any]:
    """``metrics`` carrying ``model_id`` and the (name, digest) of their dataset."""
    if model_id is None:
        return metrics
    from mlflow.entities import Metric

    name, digest = dataset if dataset is not None else (None, None)
    return [Metric(m.key, m.value, m.timestamp, m.step, model_id=model_id, dataset_name=name,
                   dataset_digest=digest) for m in metrics]
