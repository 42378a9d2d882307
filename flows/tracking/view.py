"""The comparison view of an evaluation in the MLflow UI, and the address that opens it.

MLflow 3's experiment page keeps a named view of its runs table and charts (the "Views" menu) as
an experiment tag ``mlflow.sharedViewState.<id>`` whose value is
``{"name", "createdAt", "updatedAt", "state"}``, ``state`` being the page's state as JSON; the
address ``#/experiments/<id>/runs?viewStateShareKey=<id>`` opens it. At the end of an evaluation
its experiment gets (or has replaced) the view ``sweval-latest``: the evaluation's child runs
(one per algorithm and stratum), grouped by run name so that the chart view draws each as a
line over the folds, every run shown, charts filtered to Recall@k, their x axis the metrics'
timestamps (each fold's window start, :mod:`flows.tracking.metrics`), so it reads dates. The address also
asks for the chart view (``compareRunsMode=CHART``) and the "Model training" side of the UI
(``workflowType=machine_learning``: MLflow 3.17 chooses between the GenAI and the model training
pages by this switch, the experiment tag ``mlflow.experimentKind`` only names the kind).
"""

from __future__ import annotations

import json
import time
import urllib.parse
from typing import Any

#: The saved view an evaluation leaves in its experiment (the latest one replaces it).
VIEW_ID = "sweval-latest"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_ID}"


def view_state(parent_run_id: str) -> dict[str, Any]:
    """The runs page's state: the children of ``parent_run_id``, a group (and so a line) per
    child, all of them visible, the charts of Recall@k per fold (one per k)."""
    return {
        "searchFilter": f"tags.`mlflow.parentRunId` = '{parent_run_id}'",
        "groupBy": {
            "aggregateFunction": "average",
            "groupByKeys": [{"mode": "tag", "groupByData": "mlflow.runName"}],
        },
        "runsHiddenMode": "SHOW_ALL",
        "chartsSearchFilter": "^recall_at_",  # a regular expression: the per-fold lines
        # the x axis of every line chart: the metrics' timestamps, each fold's window start
        "globalLineChartConfig": {"xAxisKey": "time", "lineSmoothness": 0,
                                  "selectedXAxisMetricKey": ""},
    }


def view_tag_value(parent_run_id: str, run_name: str, now_ms: int | None = None) -> str:
    """The experiment tag's value: the view's envelope around :func:`view_state`."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return json.dumps({
        "name": f"SW-EVAL {run_name}"[:120],
        "createdAt": now_ms,
        "updatedAt": now_ms,
        "state": json.dumps(view_state(parent_run_id)),
    })


def publish_view(client: Any, experiment_id: str, parent_run_id: str, run_name: str) -> None:
    """Point the experiment's ``sweval-latest`` view at the evaluation ``parent_run_id``."""
    client.set_experiment_tag(experiment_id, VIEW_TAG, view_tag_value(parent_run_id, run_name))


def viewed_run(tags: dict[str, str]) -> str | None:
    """The parent run the experiment's ``sweval-latest`` view shows (from its tags), or None."""
    try:
        state = json.loads(json.loads(tags[VIEW_TAG])["state"])
        return str(state["searchFilter"]).rsplit("'", 2)[-2]
    except (KeyError, ValueError, TypeError, IndexError):
        return None


def comparison_url(base: str, experiment_id: str, parent_run_id: str, *,
                   view: bool = True) -> str:
    """The address of the evaluation's comparison charts on the UI at ``base``: its saved view
    when ``view`` (the experiment's ``sweval-latest`` shows this evaluation), else the chart view
    filtered to its children."""
    query = {"workflowType": "machine_learning", "compareRunsMode": "CHART"}
    if view:
        query["viewStateShareKey"] = VIEW_ID
    else:
        query["searchFilter"] = f"tags.`mlflow.parentRunId` = '{parent_run_id}'"
    encoded = urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{encoded}"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    """The address of a run's page (its description, params, inputs, artifacts)."""
    return (f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
            "?workflowType=machine_learning")
