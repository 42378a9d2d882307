"""Flow runs left RUNNING by a process that was killed, marked CRASHED by the next run into
their output directory.

A process killed outright (SIGKILL, an out-of-memory kill, a power cut) cannot tell Prefect that
its flow run ended, and the flow runs of ``sweval run`` send no heartbeats
(:func:`flows.settings.flow_run_settings`), so Prefect's UI showed such a run RUNNING forever::

    run A   takes <output>/.sweval.lock, adds its flow run id to the record's list ── killed
    run B   takes the lock (the kernel released A's) and reads the list: A's process is gone,
            so if Prefect still has A's flow run RUNNING or PENDING it is set CRASHED, with a
            message naming A's process; ids Prefect has settled leave the list; then B adds
            its own id and resumes A's units as usual

The list outlives runs that do not settle it: ``--no-prefect`` runs and comparisons carry the
lock record's additions over (:func:`evaluators.units.locks.output_lock`), and an id whose state cannot
be read (the API does not answer) stays for the next run. A flow run that Prefect does not know
(another API, a deleted run) leaves the list.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from uuid import UUID

from sweval.evaluators.units.locks import annotate_output_lock

_log = logging.getLogger(__name__)

#: The lock record's field that holds the flow run ids not known to have ended.
FLOW_RUNS_FIELD = "flow_runs"


def settle_flow_runs(output: str | Path, previous: dict[str, Any] | None, current: Any) -> list[str]:
    """Mark CRASHED the flow runs of ``previous`` (the output lock's last record, see
    :func:`evaluators.units.locks.output_lock`) that Prefect still has RUNNING or PENDING, then record
    the ones still unsettled and ``current`` (this run's flow run id) in the lock's record.
    Returns what was done, one line per crashed run."""
    said: list[str] = []
    unsettled: list[str] = []
    recorded = (previous or {}).get(FLOW_RUNS_FIELD) or []
    recorded = [str(flow_run) for flow_run in recorded if str(flow_run) != str(current)] \
        if isinstance(recorded, list) else []
    annotate_output_lock(output, **{FLOW_RUNS_FIELD: [*recorded, str(current)]})  # if killed now
    for flow_run in recorded:
        settled, line = _crash_if_left_running(str(flow_run), previous or {}, current)
        if line is not None:
            said.append(line)
        if not settled:
            unsettled.append(str(flow_run))
    annotate_output_lock(output, **{FLOW_RUNS_FIELD: [*unsettled, str(current)]})
    return said


def _crash_if_left_running(
    flow_run: str, previous: dict[str, Any], current: Any
) -> tuple[bool, str | None]:
    """Whether ``flow_run`` is settled now (ended, crashed here, or unknown to this API), and
    the line to say when it was crashed here."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.exceptions import ObjectNotFound
    from prefect.states import Crashed

    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(UUID(flow_run))
            if run.state is None or run.state.type not in (StateType.RUNNING, StateType.PENDING):
                return True, None
            client.set_flow_run_state(run.id, Crashed(message=(
                f"its process ended without reporting; found by flow run {current} (the output "
                f"directory's last holder was pid {previous.get('pid')} on "
                f"{previous.get('host')})")), force=True)
    except (ObjectNotFound, ValueError):  # not this API's run (or not an id): nothing to settle
        return True, None
    except Exception as exc:  # noqa: BLE001 (the API refused or did not answer: next time)
        _log.debug("flow run %s left as it is: %s", flow_run, exc)
        return False, None
    return True, (f"flow run {run.name!r} ({flow_run}), left {run.state.type.value} by a "
                  "process that ended without reporting (killed), is marked CRASHED")
