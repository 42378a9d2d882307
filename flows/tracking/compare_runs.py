"""The MLflow runs of ``sweval compare``: a parent run per comparison, and under it each protocol
logged by a :class:`~flows.tracking.tracker.Tracker` exactly as ``sweval run`` logs an evaluation
(see :mod:`flows.cli.compare`)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.compare_tables import compare_summary, leakage_summary, table2
from sweval.evaluators.experiments.protocol_runs import ProtocolRun
from sweval.evaluators.protocols.holdout import Protocol
from sweval.evaluators.wording import shown_uri
from sweval.flows.tracking.inputs import log_profile
from sweval.flows.tracking.metrics import MAX_BATCH, key_part, metric_key
from sweval.flows.tracking.records import STATE_FILE
from sweval.flows.tracking.tracker import Tracker

if TYPE_CHECKING:
    from sweval.evaluators.experiments.comparison import Comparison

_log = logging.getLogger(__name__)


class ComparisonTracker:
    """The comparison's MLflow runs: a parent; per protocol a :class:`Tracker`."""

    def __init__(self, config: EvalConfig, directory: Path, protocols: list[str],
                 loocv_repeats: int, log: InteractionLog) -> None:
        self.config = config
        self.directory = directory
        self.protocols = protocols
        self.loocv_repeats = loocv_repeats
        self.log = log
        self.client: Any = None
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.trackers: dict[str, Any] = {}

    @classmethod
    def open(cls, config: EvalConfig, directory: Path, protocols: list[str],
             loocv_repeats: int, log: InteractionLog) -> ComparisonTracker:
        return cls(config, directory, protocols, loocv_repeats, log)

    def _key(self) -> str:
        from sweval.evaluators.config.text import parse_variant
        from sweval.evaluators.run.plan import run_key

        names = [parse_variant(entry)[0] for entry in self.config.algorithms]
        return run_key(self.config, self.log.fingerprint(), names, kind="compare",
                       extra={"protocols": self.protocols, "loocv_repeats": self.loocv_repeats})

    def _ensure_parent(self, tracker: Any) -> str:
        """Create (or reopen, same key) the comparison's parent run in the tracker's experiment."""
        if self.parent_run_id is not None:
            return self.parent_run_id
        self.client, self.experiment_id = tracker.client, tracker.experiment_id
        state_path = self.directory / STATE_FILE
        key = self._key()
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("key") == key and state.get("experiment_id") == self.experiment_id:
            try:
                run = self.client.get_run(state["parent_run_id"])
                if run.info.lifecycle_stage == "active":
                    self.parent_run_id = run.info.run_id
                    self.client.update_run(self.parent_run_id, status="RUNNING")
            except Exception:  # deleted meanwhile: start a new one
                self.parent_run_id = None
        if self.parent_run_id is None:
            stamp = time.strftime("%Y%m%dT%H%M", time.gmtime())
            run = self.client.create_run(
                self.experiment_id,
                run_name=f"compare-{self.config.dataset_name}-{stamp}",
                tags={"sweval.mode": "compare", "sweval.run_key": key,
                      "sweval.dataset": self.config.dataset_name,
                      "sweval.data_fingerprint": self.log.fingerprint(),
                      "sweval.output_dir": str(self.directory.resolve())},
            )
            self.parent_run_id = run.info.run_id
            self.directory.mkdir(parents=True, exist_ok=True)
            state_path.write_text(json.dumps({"key": key, "experiment_id": self.experiment_id,
                                              "parent_run_id": self.parent_run_id}, indent=2))
        params = {
            "protocols": ",".join(self.protocols),
            "loocv_repeats": str(self.loocv_repeats),
            "algorithms": ",".join(self.config.algorithms),
            "k": ",".join(map(str, self.config.k)),
            "window": self.config.window, "folds": str(self.config.folds),
            "u_min": str(self.config.u_min), "relevance": self.config.relevance,
            "start": str(self.config.start), "data": str(self.config.data),
        }
        existing = dict(self.client.get_run(self.parent_run_id).data.params)
        from mlflow.entities import Param

        new = [Param(k, v) for k, v in params.items() if k not in existing]
        if new:
            self.client.log_batch(self.parent_run_id, params=new)
        return self.parent_run_id

    def log_protocol(self, protocol: Protocol, run: ProtocolRun, key: str,
                     files: list[Path]) -> None:
        """Log one protocol like ``sweval run`` does, as a child of the comparison run."""
        from mlflow.entities import Metric

        sub = self.config.model_copy(update={"output": str(self.directory / protocol.name)})
        mode = "batch" if protocol.name == "sw-eval" else protocol.name
        tracker = Tracker.open(sub, key=key, fingerprint=self.log.fingerprint(),
                               source=self.log.source, mode=mode,
                               profile=log_profile(self.log))
        self.trackers[protocol.name] = tracker
        parent = self._ensure_parent(tracker)
        client = tracker.client
        try:
            client.set_tag(tracker.parent_run_id, "mlflow.parentRunId", parent)
            client.set_tag(tracker.parent_run_id, "sweval.protocol", protocol.name)
            client.update_run(tracker.parent_run_id,
                              name=f"{protocol.name} ({self.config.dataset_name})")
            for name, value in protocol.describe().items():
                client.set_tag(tracker.parent_run_id, f"sweval.protocol.{name}", str(value))
            results = run.results.drop(columns="protocol")
            summary = compare_summary(run.results).drop(columns="protocol")
            tracker.log_rows(results.to_dict("records"))
            pooled = leakage_summary(run.leakage)
            now = int(time.time() * 1000)
            for (algorithm, _stratum), run_id in tracker.children.items():
                rows = pooled[pooled["algorithm"] == algorithm]
                metrics = []
                for row in rows.itertuples():
                    metrics.append(Metric(metric_key("future_items", row.k),
                                          float(row.n_future), now, 0))
                    if not pd.isna(row.share_future):
                        metrics.append(Metric(metric_key("future_share", row.k),
                                              float(row.share_future), now, 0))
                if metrics:
                    client.log_batch(run_id, metrics=metrics)
                client.set_tag(run_id, "sweval.protocol", protocol.name)
            n_splits = len(run.splits)
            tracker.finish(results, summary, run.devices, files, n_folds=n_splits,
                           comparison_view=False)  # a protocol under the comparison's run
        except SwevalError:
            raise
        except Exception as exc:
            raise SwevalError(shown_uri(f"MLflow tracking: {type(exc).__name__}: {exc}")) from exc

    def finish(self, comparison: Comparison) -> str | None:
        """Log the comparison's metrics and files on the parent run and close it."""
        from mlflow.entities import Metric

        if self.parent_run_id is None:
            return None
        try:
            now = int(time.time() * 1000)
            metrics = []
            for row in comparison.kendall.itertuples():
                if not pd.isna(row.tau):
                    metrics.append(Metric(
                        metric_key(f"kendall_tau_{row.protocol_a}_vs_{row.protocol_b}", row.k),
                        float(row.tau), now, 0))
            for row in comparison.leakage.itertuples():
                base = f"{row.protocol}_{key_part(row.algorithm)}"
                metrics.append(Metric(metric_key(f"future_items_{base}", row.k),
                                      float(row.n_future), now, 0))
                if not pd.isna(row.share_future):
                    metrics.append(Metric(metric_key(f"future_share_{base}", row.k),
                                          float(row.share_future), now, 0))
            summary = table2(comparison.summary)
            for row in summary.itertuples():
                if not pd.isna(row.mean):
                    metrics.append(Metric(
                        metric_key(f"mean_recall_{row.protocol}_{key_part(row.algorithm)}", row.k),
                        float(row.mean), now, 0))
            for lo in range(0, len(metrics), MAX_BATCH):
                self.client.log_batch(self.parent_run_id, metrics=metrics[lo : lo + MAX_BATCH])
            reports = sorted(p.name for p in comparison.directory.glob("report*"))
            for name in ("compare.csv", "compare_summary.csv", "table2.csv", "kendall.csv",
                         "leakage.csv", "leakage_per_split.csv", "significance.csv",
                         "significance_protocols.csv", "compare.txt", "compare.json",
                         *reports):
                path = comparison.directory / name
                if path.exists():
                    self.client.log_artifact(self.parent_run_id, str(path))
            self.client.set_terminated(self.parent_run_id, "FINISHED")
        except Exception as exc:
            raise SwevalError(shown_uri(f"MLflow tracking: {type(exc).__name__}: {exc}")) from exc
        return self.parent_run_id

    def fail(self, status: str) -> None:
        for tracker in self.trackers.values():
            tracker.fail(status)
        if self.parent_run_id is not None:
            try:
                self.client.set_terminated(self.parent_run_id, status)
            except Exception as exc:  # the comparison's own error matters more
                _log.warning("MLflow: could not mark the comparison %s: %s", status, exc)
