"""Flow runs left RUNNING by a process that was killed, marked CRASHED by the next run into
their output directory.

A process killed outright (SIGKILL, an out-of-memory kill, a power cut) cannot tell Prefect that
its flow run ended, and the flow runs of ``sweval run`` send no heartbeats
(:func:`flows.settings.flow_run_settings`), so Prefect's UI showed such a run RUNNING forever::

    run A   takes <output>/.sweval.lock, records its flow run id in it ── killed (RUNNING stays)
    run B   takes the lock (the kernel released A's) and reads A's record: A's process is gone,
            so if Prefect still has A's flow run RUNNING or PENDING, it is set CRASHED, with a
            message naming A's process; then B resumes A's units as usual

A flow run that Prefect does not know (another API, a deleted run) is left alone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from uuid import UUID

from sweval.evaluators.locks import annotate_output_lock

_log = logging.getLogger(__name__)

#: The record's field that holds the flow run id.
FLOW_RUN_FIELD = "flow_run"


def record_flow_run(output: str | Path, flow_run_id: Any) -> None:
    """Write this flow run's id into the output directory's lock record (held by this run)."""
    annotate_output_lock(output, **{FLOW_RUN_FIELD: str(flow_run_id)})


def crash_left_running(previous: dict[str, Any] | None, current: Any) -> str | None:
    """Mark the flow run of ``previous`` (the output lock's last record, see
    :func:`evaluators.locks.output_lock`) CRASHED when Prefect still has it RUNNING or PENDING;
    ``current`` is this run's flow run id. Returns what was done, in words, or None."""
    recorded = (previous or {}).get(FLOW_RUN_FIELD)
    if not recorded or recorded == str(current):
        return None
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(UUID(recorded))
            if run.state is None or run.state.type not in (StateType.RUNNING, StateType.PENDING):
                return None
            client.set_flow_run_state(run.id, Crashed(message=(
                f"its process (pid {previous.get('pid')} on {previous.get('host')}) ended "
                f"without reporting; found by flow run {current}")), force=True)
    except Exception as exc:  # noqa: BLE001 (not this API's run, or the API refused: leave it)
        _log.debug("flow run %s left as it is: %s", recorded, exc)
        return None
    return (f"flow run {run.name!r} ({recorded}), left {run.state.type.value} by a process that "
            "ended without reporting (killed), is marked CRASHED")
