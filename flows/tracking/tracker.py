"""The MLflow logging of one evaluation: :class:`Tracker` (see :mod:`flows.tracking` for the
layout of the runs and how a rerun resumes)."""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.wording import shown_uri
from sweval.flows.tracking.client import said, stopped_answering
from sweval.flows.tracking.finish import finish_children, finish_parent
from sweval.flows.tracking.inputs import fold_dataset
from sweval.flows.tracking.metrics import MAX_BATCH, fold_metrics, parent_device_tags
from sweval.flows.tracking.models import finalize_models, linked, model_of
from sweval.flows.tracking.records import algorithm_params, write_state

_log = logging.getLogger(__name__)


#: Seconds of a stopped command's time kept for its exit when marking child runs KILLED
#: (:meth:`Tracker.fail`): Prefect's flow run reported crashed, the temporary server stopped.
STOP_RESERVE_S = 1.0
#: Child runs per request when a reopened parent's children are listed (MLflow's most).
SEARCH_PAGE = 1000


def _child_name(algorithm: str, stratum: str) -> str:
    return algorithm if stratum == "all" else f"{algorithm} [{stratum}]"


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
        mode: str = "batch",
        fingerprint: str = "",
        source: str = "",
        data_input: Any = None,
        run_name: str = "",
    ) -> None:
        self.client = client
        self.uri = uri
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self.state_path = state_path
        self.state = state
        self.config = config
        self.mode = mode
        self.fingerprint = fingerprint
        self.source = source
        self.data_input = data_input  # the log as an mlflow DatasetInput, on every run
        self.run_name = run_name
        self.system_metrics: Any = None  # MLflow's SystemMetricsMonitor (--system-metrics)
        self.children: dict[tuple[str, str], str] = {}
        #: each configuration's logged model (stratum "all"; None where the store refused one)
        self.models: dict[tuple[str, str], str | None] = {}
        self.logged: dict[str, set[int]] = {}
        #: a reopened child's summary values (step 0) as logged: a rerun that does not change
        #: one logs it no second time
        self.summaries: dict[str, dict[str, float]] = {}
        self.devices_tagged: set[str] = set()
        self.children_tagged: set[str] = set()  # children with their ``sweval.device`` tag
        self.state_changed = False  # children created since the state file was written
        self.unsent_params: dict[str, dict[str, str]] = {}  # a new child's, sent with its metrics
        self.artifact_uris: dict[str, str] = {}  # a child's, so logging a file needs no lookup
        self.seconds = 0.0  # time spent in MLflow calls, for the report
        self.broken: Exception | None = None  # a call that failed (after MLflow's retries)

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
        profile: Mapping[str, Any] | None = None,
    ) -> Tracker:
        """Create the parent run, or reopen the one recorded in the output directory.

        Args:
            config: the run's configuration.
            key: the run key (units with the same key are the same results).
            fingerprint: the data fingerprint.
            source: where the data came from.
            mode: ``batch`` or ``rolling``.
            flow_run_id, flow_run_name: the Prefect flow run, when there is one.
            profile: the log's size and time span (:func:`flows.tracking.inputs.log_profile`),
                shown with the dataset.

        Raises:
            SilentTracker: a tracking server that accepts connections and does not answer.
            SwevalError: the tracking store cannot be reached or written.
        """
        from sweval.flows.tracking.opening import open_tracker

        return open_tracker(cls, config, key=key, fingerprint=fingerprint, source=source,
                            mode=mode, flow_run_id=flow_run_id, flow_run_name=flow_run_name,
                            profile=profile)

    @property
    def run_url_hint(self) -> str:
        return f"#/experiments/{self.experiment_id}/runs/{self.parent_run_id}"

    def start_system_metrics(self, *, resume: bool) -> None:
        """MLflow's system metrics (``system/cpu_utilization_percentage``, ...) on the parent
        run, sampled by a thread of MLflow until :meth:`finish` or :meth:`fail`."""
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        self.system_metrics = SystemMetricsMonitor(
            self.parent_run_id, resume_logging=resume, tracking_uri=self.uri
        )
        self.system_metrics.start()

    def stop_system_metrics(self) -> None:
        if self.system_metrics is not None:
            self.system_metrics.finish()
            self.system_metrics = None

    def describe_parent(
        self, params: Mapping[str, str], tags: Mapping[str, str], existing: Mapping[str, str]
    ) -> None:
        """Log the parent run's params (those not in ``existing``), tags and configuration."""
        self._log_params_and_tags(self.parent_run_id, params, tags, existing)
        self.client.log_dict(
            self.parent_run_id, json.loads(self.config.to_json()), "sweval_config.json"
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

    def find_children(self) -> None:
        """The children of a reopened parent and the folds each already holds."""
        runs: list[Any] = []
        token = None
        while True:  # page by page: 500 strata × 2 algorithms are more than one page
            page = self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}'",
                max_results=SEARCH_PAGE, page_token=token,
            )
            runs += page
            token = page.token
            if not token:
                break
        for run in runs:
            tags = run.data.tags
            if "sweval.algorithm" not in tags:
                continue
            ident = (tags["sweval.algorithm"], tags.get("sweval.stratum", "all"))
            if ident in self.children:  # two children for one algorithm: keep the first
                continue
            self.children[ident] = run.info.run_id
            self.artifact_uris[run.info.run_id] = run.info.artifact_uri
            history = self.client.get_metric_history(run.info.run_id, "n_eligible")
            self.logged[run.info.run_id] = {int(m.step) for m in history}
            self.summaries[run.info.run_id] = dict(run.data.metrics)
            params = algorithm_params(self.config, ident[0])
            missing = {name: value for name, value in params.items()
                       if name not in run.data.params}  # made, then stopped before its first batch
            if missing:
                self.unsent_params[run.info.run_id] = missing

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
            self.artifact_uris[run_id] = run.info.artifact_uri
            self.logged[run_id] = set()
            self.unsent_params[run_id] = algorithm_params(self.config, algorithm)
            self.state.setdefault("children", {})[f"{algorithm}|{stratum}"] = run_id
            self.state_changed = True
        return self.children[ident]

    def _model(self, algorithm: str, stratum: str, run_id: str) -> str | None:
        """The logged model of a configuration (:func:`flows.tracking.models.model_of`)."""
        ident = (algorithm, stratum)
        if ident not in self.models:
            self.models[ident] = model_of(self, algorithm, stratum, run_id)
        return self.models[ident]

    # ---------------------------------------------------------------- logging
    def log_rows(self, rows: Iterable[Mapping[str, Any]],
                 devices: Mapping[str, str] | None = None) -> int:
        """Log the stepped metrics of result rows (SPEC §8 rows or ``results.csv`` rows), and
        tag each child not tagged yet with its algorithm's device, from ``devices``, in the
        same call (:meth:`set_devices` then tags the rest).

        Folds a child already holds are left alone, so calling this twice with the same rows
        (or after a crash) never duplicates a step. Returns how many (child, fold) were logged.
        """
        from mlflow.entities import Metric, RunTag

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
                model_id = self._model(algorithm, stratum, run_id)
                done = self.logged[run_id]
                batch: list[Metric] = []
                pending: list[int] = []  # marked done only once MLflow has them
                for fold in sorted(folds):
                    if fold in done:
                        continue
                    first = folds[fold][0]
                    metrics = linked(fold_metrics(fold, folds[fold]), model_id, fold_dataset(
                        self.config, self.fingerprint, fold, int(first["t_start"]),
                        int(first["t_end"]), stratum))
                    if batch and len(batch) + len(metrics) > MAX_BATCH:
                        self._log_batch(run_id, batch, [])
                        done.update(pending)
                        batch, pending = [], []
                    batch += metrics
                    pending.append(fold)
                    n_logged += 1
                if batch:
                    device = (devices or {}).get(algorithm)
                    tags = ([RunTag("sweval.device", device)]
                            if device is not None and run_id not in self.children_tagged else [])
                    self._log_batch(run_id, batch, tags)
                    done.update(pending)
                    if tags:
                        self.children_tagged.add(run_id)
                if run_id in self.unsent_params:  # no batch to go with
                    self._log_params_and_tags(run_id, self.unsent_params.pop(run_id), {}, {})
        except Exception as exc:
            raise self._error(exc) from exc
        finally:
            if self.state_changed:  # the children created: one write, not one a child
                write_state(self.state_path, self.state)
                self.state_changed = False
            self.seconds += time.perf_counter() - started
        return n_logged

    def _log_batch(self, run_id: str, metrics: list[Any], tags: list[Any]) -> None:
        """One ``log_batch`` of a child's metrics and tags, with its params when it has not
        sent them yet (a request less a child; MLflow takes at most 100 params a call and
        1,000 values in all, and metrics come at most :data:`MAX_BATCH` at a time)."""
        from mlflow.entities import Param

        params = self.unsent_params.get(run_id, {})
        if len(params) > 100 - len(tags):
            params = {}  # sent on their own, after the batches
        self.client.log_batch(run_id, metrics=metrics, tags=tags,
                              params=[Param(name, value) for name, value in params.items()])
        if params:
            del self.unsent_params[run_id]

    def set_devices(self, devices: Mapping[str, str]) -> None:
        """Tag where each algorithm ran (``sweval.device`` on the child, ``sweval.als_device``)."""
        started = time.perf_counter()
        for algorithm, device in devices.items():
            if algorithm in self.devices_tagged:
                continue
            for key, value in parent_device_tags({algorithm: device}):
                self.client.set_tag(self.parent_run_id, key, value)
            for (name, _stratum), run_id in self.children.items():
                if name == algorithm and run_id not in self.children_tagged:
                    self.client.set_tag(run_id, "sweval.device", device)
                    self.children_tagged.add(run_id)
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
        comparison_view: bool = True,
        late_files: Callable[[], Iterable[Path]] = tuple,
    ) -> None:
        """Reconcile the stepped metrics with the final table, log summaries, fold inputs,
        artifacts and the description, mark every run FINISHED and (``comparison_view``) point
        the experiment's saved view ``sweval-latest`` at this evaluation. ``late_files`` gives
        the artifacts that may still be being written when this starts (the report): it is
        called just before they are logged. Each child's summaries and device tag go in one
        ``log_batch``, the parent's tags in another (each call a round trip to the server)."""
        self.log_rows(results.to_dict("records"))
        started = time.perf_counter()
        files = [Path(path) for path in files]
        try:
            finish_children(self, results, summary, devices, files)
            finish_parent(self, summary, devices, files, late_files, n_folds=n_folds,
                          comparison_view=comparison_view)
        except Exception as exc:
            raise self._error(exc) from exc
        finally:
            self.seconds += time.perf_counter() - started

    def fail(self, status: str = "FAILED") -> None:
        """Mark the parent run, then its open children, FAILED or KILLED; never raises. Not
        after a call of this run failed: a server that is gone would hold every one of these
        calls for its retries (the runs stay RUNNING; the next run of the command resumes them).

        A stopped command has seconds to end (:func:`flows.processes.seconds_left`) and each
        child costs a request (2.5-25 ms on local SQLite: 2.5 s or more for 1,000 children), so
        the parent goes first, then children while :data:`STOP_RESERVE_S` is left; one warning
        counts the rest (they stay RUNNING until the rerun resumes them)."""
        if self.broken is not None:
            _log.warning("MLflow: the runs are not marked %s: %s did not answer earlier (%s)",
                         status, shown_uri(self.uri), type(self.broken).__name__)
            return
        from sweval.flows.processes import seconds_left

        try:
            self.stop_system_metrics()
            self.client.set_terminated(self.parent_run_id, status)
            children = list(self.children.values())
            for done, run_id in enumerate(children):
                left = seconds_left()
                if left is not None and left < STOP_RESERVE_S:
                    _log.warning("MLflow: %d of %d child runs not marked %s (the command was "
                                 "stopped); rerun the same command to resume them",
                                 len(children) - done, len(children), status)
                    return
                self.client.set_terminated(run_id, status)
            finalize_models(self.client, self.models, "FAILED")
        except Exception as exc:  # the run's own error matters more
            _log.warning("MLflow: could not mark the run %s: %s", status, shown_uri(str(exc)))

    def _error(self, exc: Exception) -> SwevalError:
        self.broken = exc
        mute = stopped_answering(self.uri, exc)
        what = str(mute).removesuffix(".") if mute is not None else shown_uri(
            f"MLflow tracking at {self.uri}: {said(exc)}")
        return SwevalError(shown_uri(
            f"{what}. Finished units are kept "
            f"in {self.config.output}; rerun the same command once MLflow is reachable to resume "
            "and upload the rest."
        ))
