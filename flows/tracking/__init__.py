"""MLflow tracking of evaluations: the only code of SW-EVAL that imports :mod:`mlflow`.

Modules::

    client.py        the tracking URI, the experiment, an MlflowClient, a run (the store)
    tracker.py       Tracker: the runs of one evaluation (sweval run, and each compared protocol)
    compare_runs.py  ComparisonTracker: the parent run of a comparison (sweval compare)
    metrics.py       result rows as MLflow metrics (keys, one fold's batch, per-fold tables)
    records.py       the run record tracking.json, flattened params, the code's provenance,
                     the params and tags of a parent run and of an algorithm's child run
    server.py        the ``mlflow server`` command of ``sweval ui``, its environment, and the
                     address it opens (the latest evaluation's comparison chart)
    inputs.py        the runs' inputs as mlflow.data datasets (the log, each fold's window)
    note.py          the parent run's description: the summary table, the protocol in words
    view.py          the experiment's saved view "sweval-latest" (the latest evaluation's charts)
                     and the UI addresses that open it

MLflow itself is imported inside the functions that call it (about 1 s), never at import time.

Layout in MLflow::

    experiment  sweval/<dataset>                (or --experiment NAME)
    tags         mlflow.experimentKind = custom_model_development,
                 mlflow.sharedViewState.sweval-latest (the saved view of the latest evaluation)
    └── parent run  <dataset>-<yyyymmddTHHMM>   one per evaluation (per rolling series)
        params   the result-relevant configuration, flattened (k, window, u_min, algorithms, ...)
        tags     sweval.run_key, sweval.config_hash, sweval.data_fingerprint, sweval.version,
                 mlflow.source.git.commit, prefect.flow_run_id, sweval.als_device, ...,
                 mlflow.note.content (the description: summary table, protocol in words)
        inputs   the log (dataset <dataset>, digest = data fingerprint, context evaluation)
        metrics  system/... with --system-metrics (MLflow's system metrics monitor)
        artifacts  sweval_config.json, results.csv, summary.csv, folds.csv, units.csv, config.json,
                   significance.csv (significance_strata.csv when stratified)
        ├── child run  <algorithm>                one per algorithm (per algorithm and stratum
        │   params   the algorithm's resolved hyper-parameters   when stratified: "<alg> [<s>]")
        │   metrics  recall_at_10, hit_rate_at_10, ndcg_at_10, r_precision, ... at step = fold
        │            n_eligible and fold_t_start at step = fold (skipped folds too)
        │            mean_recall_at_10, std_recall_at_10, ..., n_folds, n_skipped (summary)
        │            ci_low_recall_at_10, ci_high_recall_at_10, ... (its bootstrap interval)
        │   inputs   the log; each fold's window ("<dataset> fold <f>", context its dates)
        │   artifacts  per_fold.csv (this child's metrics, one row per fold)
        └── ...

Each stepped metric's timestamp is the fold's window start, so the MLflow UI can plot a metric
against the fold index ("Step") or against calendar time ("Time (wall)").

Every write goes through :class:`MlflowClient` with explicit run ids, from the flow's own thread
(MLflow's "active run" is thread-local and is never used here).

Resume: the parent run's id is recorded in ``<output>/tracking.json`` with the run key. A rerun
with the same key (same result-relevant configuration and data) reopens that parent run, finds its
children, reads which folds each child already holds (the steps of ``n_eligible``) and logs only
the missing ones; every fold's metrics go in one ``log_batch`` call, so a fold is either complete
in MLflow or absent. A rerun after a crash therefore completes the same runs instead of leaving
a half-filled duplicate, and the final reconciliation against ``results.csv`` guarantees that
MLflow holds exactly one step per fold and metric.
"""

from sweval.evaluators.wording import shown_uri
from sweval.flows.tracking.client import (
    artifact_root,
    experiment_name,
    get_run,
    open_client,
    resolve_tracking_uri,
    resolve_uri,
)
from sweval.flows.tracking.compare_runs import ComparisonTracker
from sweval.flows.tracking.inputs import log_profile
from sweval.flows.tracking.metrics import metric_key
from sweval.flows.tracking.records import STATE_FILE
from sweval.flows.tracking.server import (
    announce_when_ready,
    latest_comparison_url,
    server_command,
    server_env,
)
from sweval.flows.tracking.tracker import Tracker

__all__ = [
    "STATE_FILE",
    "ComparisonTracker",
    "Tracker",
    "announce_when_ready",
    "artifact_root",
    "experiment_name",
    "get_run",
    "latest_comparison_url",
    "log_profile",
    "metric_key",
    "open_client",
    "resolve_tracking_uri",
    "resolve_uri",
    "server_command",
    "server_env",
    "shown_uri",
]
