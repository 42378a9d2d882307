"""Opening an evaluation's MLflow runs: the parent run created, or reopened from the output
directory's state file when the same run key logged there before
(:meth:`flows.tracking.tracker.Tracker.open`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.wording import shown_uri
from sweval.flows.tracking.client import (
    active_run,
    artifact_root,
    backing_store,
    check_answers,
    ensure_experiment,
    experiment_name,
    open_client,
    resolve_tracking_uri,
    said,
    stopped_answering,
)
from sweval.flows.tracking.inputs import log_input
from sweval.flows.tracking.records import (
    STATE_FILE,
    parent_params_and_tags,
    read_state,
    write_state,
)

if TYPE_CHECKING:
    from sweval.flows.tracking.tracker import Tracker

_log = logging.getLogger("sweval.flows.tracking.tracker")


def open_tracker(
    cls: type[Tracker],
    config: EvalConfig,
    *,
    key: str,
    fingerprint: str,
    source: str,
    mode: str,
    flow_run_id: str | None,
    flow_run_name: str | None,
    profile: Mapping[str, Any] | None,
) -> Tracker:
    """:meth:`Tracker.open <flows.tracking.tracker.Tracker.open>`, for ``cls`` (a subclass)."""
    started = time.perf_counter()
    uri = resolve_tracking_uri(config)
    check_answers(uri)  # seconds, not MLflow's minutes of timeouts and retries
    try:
        client = open_client(uri)
        experiment_id = ensure_experiment(client, experiment_name(config), artifact_root(uri))
        state_path = Path(config.output) / STATE_FILE
        state = read_state(state_path)
        parent = None
        if (
            state.get("key") == key
            and state.get("store", state.get("tracking_uri")) == shown_uri(backing_store(uri))
            and state.get("experiment_id") == experiment_id
        ):
            parent = active_run(client, state.get("parent_run_id"))
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
                "tracking_uri": shown_uri(uri),  # never a password in a file
                "store": shown_uri(backing_store(uri)),
                "experiment_id": experiment_id,
                "parent_run_id": parent.info.run_id,
                "children": {},
            }
            write_state(state_path, state)
        tracker = cls(
            client,
            uri=uri,
            experiment_id=experiment_id,
            parent_run_id=parent.info.run_id,
            state_path=state_path,
            state=state,
            config=config,
            mode=mode,
            fingerprint=fingerprint,
            source=source,
            data_input=log_input(config, fingerprint=fingerprint, source=source,
                                 profile=profile),
            run_name=parent.info.run_name or "",
        )
        if reused:
            client.update_run(parent.info.run_id, status="RUNNING")
            tracker.find_children()
            if state.get("tracking_uri") != shown_uri(uri):  # the same store, reached
                state["tracking_uri"] = shown_uri(uri)  # another way (`sweval up`'s server)
                write_state(state_path, state)
        params, tags = parent_params_and_tags(
            config, key=key, fingerprint=fingerprint, source=source, mode=mode,
            flow_run_id=flow_run_id, flow_run_name=flow_run_name,
        )
        tracker.describe_parent(params, tags, dict(parent.data.params) if reused else {})
        client.log_inputs(tracker.parent_run_id, datasets=[tracker.data_input])
        if config.system_metrics:
            tracker.start_system_metrics(resume=reused)
    except SwevalError:
        raise
    except Exception as exc:  # a server that went mute since check_answers: deferred too
        raise stopped_answering(uri, exc) or SwevalError(
            shown_uri(f"MLflow tracking at {uri}: {said(exc)}")) from exc
    tracker.seconds += time.perf_counter() - started
    _log.info(
        "MLflow: %s parent run %s in experiment %s at %s",
        "reopened" if reused else "created", tracker.parent_run_id, experiment_id,
        shown_uri(uri),
    )
    return tracker
