"""MLflow tracking of evaluations: the only module of SW-EVAL that imports :mod:`mlflow`.

Layout in MLflow::

    experiment  sweval/<dataset>                (or --experiment NAME)
    └── parent run  <dataset>-<yyyymmddTHHMM>   one per evaluation (per rolling series)
        params   the result-relevant configuration, flattened (k, window, u_min, algorithms, ...)
        tags     sweval.run_key, sweval.config_hash, sweval.data_fingerprint, sweval.version,
                 mlflow.source.git.commit, prefect.flow_run_id, sweval.als_device, ...
        artifacts  sweval_config.json, results.csv, summary.csv, folds.csv, units.csv, config.json
        ├── child run  <algorithm>                one per algorithm (per algorithm and stratum
        │   params   the algorithm's resolved hyper-parameters   when stratified: "<alg> [<s>]")
        │   metrics  recall_at_10, hit_rate_at_10, ndcg_at_10, r_precision, ... at step = fold
        │            n_eligible and fold_t_start at step = fold (skipped folds too)
        │            mean_recall_at_10, std_recall_at_10, ..., n_folds, n_skipped (summary)
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

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.config import EvalConfig
from sweval.flows.settings import default_tracking_uri, sweval_home

_log = logging.getLogger(__name__)

STATE_FILE = "tracking.json"
#: Config fields that never change results: tags (mutable), not params (write-once).
_ORCHESTRATION_FIELDS = (
    "output", "experiment", "tracking_uri", "task_runner", "dask_address", "workers", "progress",
    "tracking",
)
_MAX_BATCH = 900  # MLflow accepts at most 1000 metrics per log_batch call


# ---------------------------------------------------------------------------------------- naming
def resolve_tracking_uri(config: EvalConfig) -> str:
    """``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the local sqlite store."""
    return config.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()


def experiment_name(config: EvalConfig) -> str:
    """``--experiment``, else ``sweval/<dataset>``."""
    return config.experiment or f"sweval/{config.dataset_name}"


def metric_key(metric: str, k: Any) -> str:
    """The MLflow key of a metric at a cut-off: ``recall_at_10``; ``r_precision`` has no k."""
    if k is None or (isinstance(k, float) and math.isnan(k)) or k is pd.NA:
        return metric
    return f"{metric}_at_{int(k)}"


def artifact_root(uri: str) -> Path | None:
    """Where experiments created by SW-EVAL keep their artifacts, explicitly (never the CWD).

    A sqlite store keeps them next to the database (``<db dir>/mlartifacts``); a tracking
    server decides itself (None); another database URI uses ``$SWEVAL_HOME/mlartifacts``.
    """
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts"
    if uri.split(":", 1)[0] in ("http", "https", "databricks"):
        return None
    return sweval_home() / "mlartifacts"


def _child_name(algorithm: str, stratum: str) -> str:
    return algorithm if stratum == "all" else f"{algorithm} [{stratum}]"


def _now_ms() -> int:
    return int(time.time() * 1000)


# ------------------------------------------------------------------------------------- the tracker
class Tracker:
    """MLflow logging of one evaluation (one parent run, a child per algorithm and stratum).

    Build it with :meth:`open`; then :meth:`log_rows` as folds finish, :meth:`finish` at the end
    (or :meth:`fail`). Not thread-safe: call it from the flow's thread only.
    """

    def __init__(
        self,
        client: Any,
        *,
        uri: str,
        experiment_id: str,
        parent_run_id: str,
        state_path: Path,
        state: dict[str, Any],
        config: EvalConfig,
    ) -> None:
        self.client = client
        self.uri = uri
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self.state_path = state_path
        self.state = state
        self.config = config
        self.children: dict[tuple[str, str], str] = {}
        self.logged: dict[str, set[int]] = {}
        self.devices_tagged: set[str] = set()
        self.seconds = 0.0  # time spent in MLflow calls, for the report

    # ---------------------------------------------------------------- opening
    @classmethod
    def open(
        cls,
        config: EvalConfig,
        *,
        key: str,
        fingerprint: str,
        source: str,
        mode: str = "batch",
        flow_run_id: str | None = None,
        flow_run_name: str | None = None,
    ) -> Tracker:
        """Create the parent run, or reopen the one recorded in the output directory.

        Args:
            config: the run's configuration.
            key: the run key (units with the same key are the same results).
            fingerprint: the data fingerprint.
            source: where the data came from.
            mode: ``batch`` or ``rolling``.
            flow_run_id, flow_run_name: the Prefect flow run, when there is one.

        Raises:
            SwevalError: the tracking store cannot be reached or written.
        """
        started = time.perf_counter()
        uri = resolve_tracking_uri(config)
        try:
            client = open_client(uri)
            experiment_id = _experiment(client, experiment_name(config), artifact_root(uri))
            state_path = Path(config.output) / STATE_FILE
            state = _read_state(state_path)
            parent = None
            if (
                state.get("key") == key
                and state.get("tracking_uri") == uri
                and state.get("experiment_id") == experiment_id
            ):
                parent = _active_run(client, state.get("parent_run_id"))
            reused = parent is not None
            if parent is None:
                stamp = time.strftime("%Y%m%dT%H%M", time.gmtime())
                prefix = "rolling-" if mode == "rolling" else ""
                parent = client.create_run(
                    experiment_id,
                    run_name=f"{prefix}{config.dataset_name}-{stamp}",
                    tags={"sweval.run_key": key, "sweval.mode": mode},
                )
                state = {
                    "key": key,
                    "tracking_uri": uri,
                    "experiment_id": experiment_id,
                    "parent_run_id": parent.info.run_id,
                    "children": {},
                }
                _write_state(state_path, state)
            tracker = cls(
                client,
                uri=uri,
                experiment_id=experiment_id,
                parent_run_id=parent.info.run_id,
                state_path=state_path,
                state=state,
                config=config,
            )
            if reused:
                client.update_run(parent.info.run_id, status="RUNNING")
                tracker._find_children()
            tracker._describe_parent(
                key=key, fingerprint=fingerprint, source=source, mode=mode,
                flow_run_id=flow_run_id, flow_run_name=flow_run_name,
                existing=dict(parent.data.params) if reused else {},
            )
        except SwevalError:
            raise
        except Exception as exc:
            raise SwevalError(f"MLflow tracking at {uri}: {type(exc).__name__}: {exc}") from exc
        tracker.seconds += time.perf_counter() - started
        _log.info(
            "MLflow: %s parent run %s in experiment %s at %s",
            "reopened" if reused else "created", tracker.parent_run_id, experiment_id, uri,
        )
        return tracker

    @property
    def run_url_hint(self) -> str:
        return f"#/experiments/{self.experiment_id}/runs/{self.parent_run_id}"

    def _describe_parent(
        self,
        *,
        key: str,
        fingerprint: str,
        source: str,
        mode: str,
        flow_run_id: str | None,
        flow_run_name: str | None,
        existing: Mapping[str, str],
    ) -> None:
        config = self.config
        result_fields = config.model_dump(exclude=set(_ORCHESTRATION_FIELDS))
        if mode == "rolling":
            result_fields.pop("folds")  # grows with the data; tag sweval.n_folds instead
        params = _flatten(result_fields)
        tags = {
            "sweval.run_key": key,
            "sweval.config_hash": key if mode == "rolling" else config.result_hash(),
            "sweval.data_fingerprint": fingerprint,
            "sweval.data_source": source,
            "sweval.dataset": config.dataset_name,
            "sweval.mode": mode,
            "sweval.output_dir": str(Path(config.output).resolve()),
            "sweval.version": _package_version(),
            **{
                f"sweval.config.{name}": str(getattr(config, name))
                for name in _ORCHESTRATION_FIELDS
            },
        }
        commit, dirty = _git_commit()
        if commit:
            tags["mlflow.source.git.commit"] = commit
            tags["sweval.git_dirty"] = str(dirty).lower()
        if flow_run_id:
            tags["prefect.flow_run_id"] = str(flow_run_id)
        if flow_run_name:
            tags["prefect.flow_run_name"] = str(flow_run_name)
        self._log_params_and_tags(self.parent_run_id, params, tags, existing)
        self.client.log_dict(
            self.parent_run_id, json.loads(config.to_json()), "sweval_config.json"
        )

    def _log_params_and_tags(
        self,
        run_id: str,
        params: Mapping[str, str],
        tags: Mapping[str, str],
        existing: Mapping[str, str],
    ) -> None:
        from mlflow.entities import Param, RunTag

        new_params = []
        for name, value in params.items():
            if name not in existing:
                new_params.append(Param(name, value))
            elif existing[name] != value:  # params are write-once; the run key says they agree
                _log.warning("MLflow param %s: keeping %r (now %r)", name, existing[name], value)
        tag_list = [RunTag(name, value) for name, value in tags.items()]
        for i in range(0, max(len(new_params), len(tag_list)), 100):
            self.client.log_batch(
                run_id, params=new_params[i : i + 100], tags=tag_list[i : i + 100]
            )

    def _find_children(self) -> None:
        """The children of a reopened parent and the folds each already holds."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}'",
            max_results=1000,
        )
        for run in runs:
            tags = run.data.tags
            if "sweval.algorithm" not in tags:
                continue
            ident = (tags["sweval.algorithm"], tags.get("sweval.stratum", "all"))
            if ident in self.children:  # two children for one algorithm: keep the first
                continue
            self.children[ident] = run.info.run_id
            history = self.client.get_metric_history(run.info.run_id, "n_eligible")
            self.logged[run.info.run_id] = {int(m.step) for m in history}

    def _child(self, algorithm: str, stratum: str) -> str:
        ident = (algorithm, stratum)
        if ident not in self.children:
            run = self.client.create_run(
                self.experiment_id,
                run_name=_child_name(algorithm, stratum),
                tags={
                    "mlflow.parentRunId": self.parent_run_id,
                    "sweval.algorithm": algorithm,
                    "sweval.stratum": stratum,
                    "sweval.run_key": self.state["key"],
                },
            )
            run_id = run.info.run_id
            self.children[ident] = run_id
            self.logged[run_id] = set()
            self._log_params_and_tags(run_id, _algorithm_params(self.config, algorithm), {}, {})
            self.state.setdefault("children", {})[f"{algorithm}|{stratum}"] = run_id
            _write_state(self.state_path, self.state)
        return self.children[ident]

    # ---------------------------------------------------------------- logging
    def log_rows(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Log the stepped metrics of result rows (SPEC §8 rows or ``results.csv`` rows).

        Folds a child already holds are left alone, so calling this twice with the same rows
        (or after a crash) never duplicates a step. Returns how many (child, fold) were logged.
        """
        from mlflow.entities import Metric

        started = time.perf_counter()
        grouped: dict[tuple[str, str], dict[int, list[Mapping[str, Any]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for row in rows:
            grouped[(str(row["algorithm"]), str(row["stratum"]))][int(row["fold"])].append(row)
        n_logged = 0
        try:
            for (algorithm, stratum), folds in grouped.items():
                run_id = self._child(algorithm, stratum)
                done = self.logged[run_id]
                batch: list[Metric] = []
                pending: list[int] = []  # marked done only once MLflow has them
                for fold in sorted(folds):
                    if fold in done:
                        continue
                    metrics = _fold_metrics(fold, folds[fold])
                    if batch and len(batch) + len(metrics) > _MAX_BATCH:
                        self.client.log_batch(run_id, metrics=batch)
                        done.update(pending)
                        batch, pending = [], []
                    batch += metrics
                    pending.append(fold)
                    n_logged += 1
                if batch:
                    self.client.log_batch(run_id, metrics=batch)
                    done.update(pending)
        except Exception as exc:
            raise self._error(exc) from exc
        finally:
            self.seconds += time.perf_counter() - started
        return n_logged

    def set_devices(self, devices: Mapping[str, str]) -> None:
        """Tag where each algorithm ran (``sweval.device`` on the child, ``sweval.als_device``)."""
        started = time.perf_counter()
        for algorithm, device in devices.items():
            if algorithm in self.devices_tagged:
                continue
            self.client.set_tag(self.parent_run_id, f"sweval.device.{algorithm}", device)
            if algorithm == "als":
                self.client.set_tag(self.parent_run_id, "sweval.als_device", device)
            for (name, _stratum), run_id in self.children.items():
                if name == algorithm:
                    self.client.set_tag(run_id, "sweval.device", device)
            self.devices_tagged.add(algorithm)
        self.seconds += time.perf_counter() - started

    def finish(
        self,
        results: pd.DataFrame,
        summary: pd.DataFrame,
        devices: Mapping[str, str],
        files: Iterable[Path] = (),
        *,
        n_folds: int | None = None,
    ) -> None:
        """Reconcile the stepped metrics with the final table, log summaries and artifacts, and
        mark every run FINISHED."""
        from mlflow.entities import Metric

        self.log_rows(results.to_dict("records"))
        self.devices_tagged.clear()
        self.set_devices(devices)
        started = time.perf_counter()
        try:
            now = _now_ms()
            for (algorithm, stratum), run_id in self.children.items():
                part = summary[
                    (summary["algorithm"] == algorithm) & (summary["stratum"] == stratum)
                ]
                metrics = []
                for row in part.to_dict("records"):
                    key = metric_key(row["metric"], row["k"])
                    for stat in ("mean", "std"):
                        if row[stat] is not None and not pd.isna(row[stat]):
                            metrics.append(Metric(f"{stat}_{key}", float(row[stat]), now, 0))
                if len(part):
                    metrics.append(Metric("n_folds", float(part["n_folds"].max()), now, 0))
                    metrics.append(Metric("n_skipped", float(part["n_skipped"].max()), now, 0))
                if metrics:
                    self.client.log_batch(run_id, metrics=metrics)
                mine = results[
                    (results["algorithm"] == algorithm) & (results["stratum"] == stratum)
                ]
                self._log_frame(run_id, per_fold_table(mine), "per_fold.csv")
                self.client.set_terminated(run_id, "FINISHED")
            for path in files:
                if Path(path).exists():
                    self.client.log_artifact(self.parent_run_id, str(path))
            if n_folds is not None:
                self.client.set_tag(self.parent_run_id, "sweval.n_folds", str(n_folds))
            self.client.set_terminated(self.parent_run_id, "FINISHED")
        except Exception as exc:
            raise self._error(exc) from exc
        finally:
            self.seconds += time.perf_counter() - started

    def fail(self, status: str = "FAILED") -> None:
        """Mark the parent run (and open children) FAILED or KILLED; never raises."""
        try:
            for run_id in self.children.values():
                self.client.set_terminated(run_id, status)
            self.client.set_terminated(self.parent_run_id, status)
        except Exception as exc:  # the run's own error matters more
            _log.warning("MLflow: could not mark the run %s: %s", status, exc)

    def _error(self, exc: Exception) -> SwevalError:
        return SwevalError(
            f"MLflow tracking at {self.uri}: {type(exc).__name__}: {exc}. Finished units are kept "
            f"in {self.config.output}; rerun the same command once MLflow is reachable to resume "
            "and upload the rest."
        )

    def _log_frame(self, run_id: str, frame: pd.DataFrame, name: str) -> None:
        with tempfile.TemporaryDirectory(prefix="sweval-mlflow-") as tmp:
            path = Path(tmp) / name
            frame.to_csv(path, index=False, float_format="%.10g")
            self.client.log_artifact(run_id, str(path))


# ------------------------------------------------------------------------------------- helpers
def _fold_metrics(fold: int, rows: list[Mapping[str, Any]]) -> list[Any]:
    """One fold's stepped metrics: every non-skipped value, n_eligible and fold_t_start."""
    from mlflow.entities import Metric

    first = rows[0]
    t_start = int(first["t_start"])
    # MLflow refuses negative timestamps: windows before 1970 keep their real start in
    # fold_t_start and are stamped at the epoch.
    timestamp = max(t_start, 0) * 1000
    metrics = {
        "n_eligible": float(first["n_eligible"]),
        "fold_t_start": float(t_start),
    }
    for row in rows:
        if _truthy(row["skipped"]):
            continue
        value = row["value"]
        if value is None or pd.isna(value):
            continue  # no user in the group: nothing to plot
        metrics[metric_key(row["metric"], row["k"])] = float(value)
    return [Metric(key, value, timestamp, fold) for key, value in metrics.items()]


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1")
    return bool(value)


def per_fold_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per fold, one column per MLflow metric key (an algorithm's slice of the table)."""
    if results.empty:
        return pd.DataFrame()
    frame = results.copy()
    frame["key"] = [metric_key(m, k) for m, k in zip(frame["metric"], frame["k"], strict=True)]
    wide = frame.pivot_table(index="fold", columns="key", values="value", aggfunc="first",
                             dropna=False)
    info = frame.groupby("fold")[["t_start", "t_end", "n_eligible", "skipped"]].first()
    ordered = list(dict.fromkeys(frame["key"]))
    return info.join(wide[[c for c in ordered if c in wide.columns]]).reset_index()


def _flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            flat |= _flatten(value, prefix=f"{key}.")
        elif isinstance(value, list | tuple):
            flat[key] = ",".join(map(str, value))
        else:
            flat[key] = str(value)
    return flat


def _algorithm_params(config: EvalConfig, algorithm: str) -> dict[str, str]:
    from sweval.algorithms.registry import default_params

    try:
        params = default_params(algorithm) | config.params.get(algorithm, {})
    except SwevalError:
        params = dict(config.params.get(algorithm, {}))
    return {"algorithm": algorithm} | _flatten(params)


def _experiment(client: Any, name: str, root: Path | None) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        if experiment.lifecycle_stage == "deleted":
            client.restore_experiment(experiment.experiment_id)
        return str(experiment.experiment_id)
    location = (root / name.replace("/", "_")).resolve().as_uri() if root is not None else None
    try:
        return str(client.create_experiment(name, artifact_location=location))
    except Exception:  # created meanwhile by a concurrent run
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return str(experiment.experiment_id)


def _active_run(client: Any, run_id: str | None) -> Any:
    if not run_id:
        return None
    try:
        run = client.get_run(run_id)
    except Exception:
        return None
    return run if run.info.lifecycle_stage == "active" else None


def _read_state(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_state(path: Path, state: Mapping[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(state, indent=2))
        os.replace(temporary, path)
    except OSError as exc:
        raise SwevalError(f"{path}: cannot record the MLflow run ({exc}).") from exc


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sweval")
    except PackageNotFoundError:
        return "unknown"


def _git_commit() -> tuple[str | None, bool]:
    """The commit of the SW-EVAL checkout, and whether tracked files differ from it."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None, False
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD", "--"],
            capture_output=True, timeout=10,
        ).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None, False
    return head or None, dirty


def open_client(uri: str) -> Any:
    """An ``MlflowClient`` on ``uri`` (a SQLite store's folder is created first).

    MLflow keeps one store object per URI for the process, so the first call pays for importing
    MLflow and for the store's set-up (its schema check, or its creation on the first run) and
    later calls are cheap: :mod:`flows.startup` makes that first call while Prefect's temporary
    server starts.
    """
    from mlflow import MlflowClient

    _quiet_mlflow_logging()
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def _quiet_mlflow_logging() -> None:
    """MLflow and alembic announce database migrations at INFO; keep the terminal for results."""
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)


# ------------------------------------------------------------------------------------- the UI
def server_command(
    uri: str, *, host: str = "127.0.0.1", port: int = 5000, workers: int = 1
) -> list[str]:
    """The ``mlflow server`` command line that shows the store ``uri`` (sqlite) in a browser."""
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", uri,
        "--host", host, "--port", str(port), "--workers", str(workers),
    ]
    root = artifact_root(uri)
    if root is not None:
        command += ["--artifacts-destination", str(root)]
    return command


def server_env() -> dict[str, str]:
    """The environment for :func:`server_command`: no background job consumers."""
    return os.environ | {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
