"""The MLflow run of ``sweval leakage`` and ``sweval gap``: one run per output directory, in the
experiment of ``sweval run`` (``sweval/<dataset>``), reopened by a rerun of the same command.

::

    run   <command>-<dataset>-<yyyymmddTHHMM>     tags sweval.mode = <command>, sweval.run_key,
          params  the result-relevant configuration and the experiment's design (flattened)
          metrics per algorithm and k: ``<algorithm>.<metric>_at_<k>`` at step j (leakage: one
                  step per number of future periods in training), or per validation set and the
                  deployment (gap: ``<algorithm>.<set>.<metric>_at_<k>``)
          artifacts every file the command published (tables, figures, its record)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.state import TRACKING
from sweval.evaluators.wording import shown_uri
from sweval.flows.tracking.client import (
    active_run,
    artifact_root,
    backing_store,
    ensure_experiment,
    experiment_name,
    open_client,
    resolve_tracking_uri,
    said,
)
from sweval.flows.tracking.metrics import MAX_BATCH
from sweval.flows.tracking.records import flatten

_log = logging.getLogger(__name__)


class ExperimentTracker:
    """One command's MLflow run (see the module docstring).

    Args:
        config: the command's configuration.
        command: ``leakage`` or ``gap``.
        directory: its output directory (where ``tracking.json`` records the run).
        design: the experiment's own parameters.
        fingerprint: the data fingerprint.
    """

    def __init__(self, config: EvalConfig, command: str, directory: Path,
                 design: Mapping[str, Any], fingerprint: str) -> None:
        self.config = config
        self.command = command
        self.directory = directory
        self.design = dict(design)
        self.fingerprint = fingerprint
        self.uri = resolve_tracking_uri(config)
        self.client: Any = None
        self.run_id: str | None = None

    @property
    def key(self) -> str:
        from sweval.evaluators.config.text import parse_variant
        from sweval.evaluators.run.plan import run_key

        names = [parse_variant(entry)[0] for entry in self.config.algorithms]
        return run_key(self.config, self.fingerprint, names, kind=self.command,
                       extra={"design": self.design})

    def start(self) -> ExperimentTracker:
        """Create the run, or reopen the one this output directory records.

        Raises:
            SwevalError: the tracking store cannot be reached or written.
        """
        try:
            self.client = open_client(self.uri)
            experiment = ensure_experiment(self.client, experiment_name(self.config),
                                           artifact_root(self.uri))
            state = TRACKING.read(self.directory)
            run = None
            store = shown_uri(backing_store(self.uri))  # as recorded: never a password
            if state.get("key") == self.key and state.get("store") == store:
                run = active_run(self.client, state.get("parent_run_id"))
            if run is None:
                stamp = time.strftime("%Y%m%dT%H%M", time.gmtime())
                run = self.client.create_run(
                    experiment, run_name=f"{self.command}-{self.config.dataset_name}-{stamp}",
                    tags={"sweval.mode": self.command, "sweval.run_key": self.key,
                          "sweval.dataset": self.config.dataset_name,
                          "sweval.data_fingerprint": self.fingerprint,
                          "sweval.output_dir": str(self.directory.resolve())})
                TRACKING.write(self.directory, {
                    "key": self.key, "tracking_uri": shown_uri(self.uri), "store": store,
                    "experiment_id": experiment, "parent_run_id": run.info.run_id})
                self.run_id = run.info.run_id
                self._log_params()
            else:
                self.client.update_run(run.info.run_id, status="RUNNING")
            self.run_id = run.info.run_id
        except SwevalError:
            raise
        except Exception as exc:
            raise self._error(exc) from exc
        return self

    def _log_params(self) -> None:
        from mlflow.entities import Param

        values = flatten({"design": self.design}) | {
            "algorithms": ",".join(self.config.algorithms),
            "k": ",".join(map(str, self.config.k)), "window": self.config.window,
            "u_min": str(self.config.u_min), "data": shown_uri(str(self.config.data)),
        }
        params = [Param(key, str(value)[:6000]) for key, value in sorted(values.items())]
        self.client.log_batch(self._run(), params=params[:100])

    def _run(self) -> str:
        if self.run_id is None:
            raise RuntimeError("the run is not started (ExperimentTracker.start)")
        return self.run_id

    def finish(self, metrics: Iterable[tuple[str, float, int]], files: Iterable[Path]) -> None:
        """Log the metrics (key, value, step) and the files, and end the run FINISHED.

        Raises:
            SwevalError: MLflow refused them (the tables are written: rerun to log them).
        """
        from mlflow.entities import Metric

        try:
            now = int(time.time() * 1000)
            batch = [Metric(key, float(value), now, int(step)) for key, value, step in metrics]
            for lo in range(0, len(batch), MAX_BATCH):
                self.client.log_batch(self._run(), metrics=batch[lo : lo + MAX_BATCH])
            for path in files:
                if path.exists():
                    self.client.log_artifact(self._run(), str(path))
            self.client.set_terminated(self._run(), "FINISHED")
        except Exception as exc:
            raise self._error(exc) from exc
        _log.info("MLflow: %s run %s at %s", self.command, self.run_id, shown_uri(self.uri))

    def fail(self, status: str) -> None:
        """End the run ``status`` (FAILED, KILLED); a tracker that cannot is only a warning."""
        if self.run_id is None or self.client is None:
            return
        try:
            self.client.set_terminated(self.run_id, status)
        except Exception as exc:  # the command's own error matters more
            _log.warning("MLflow: could not mark the %s run %s: %s", self.command, status,
                         shown_uri(str(exc)))

    def _error(self, exc: Exception) -> SwevalError:
        return SwevalError(shown_uri(
            f"MLflow tracking at {self.uri}: {said(exc)}; the tables are "
            f"written in {self.directory}: rerun the same command to log them."))
