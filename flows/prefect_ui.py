"""What a run shows in Prefect's UI: its flow-run name and its summary table artifact.

A flow run is named after the data, the window and the configurations evaluated, so that a plain
run and a run of a user's own model on the same data can be told apart in the runs list::

    ml-100k-w7D · pop+item-knn+CoVisit          (a plugin without alias: its class name)
    ml-100k-w7D-rolling · cv+pop                (a scheduled rolling run; aliases as typed)
    generated-s1-seed0-w7D · pop+item-knn+ease+3 more

Each finished run publishes a table artifact with the summary (stratum ``all``: one row per
configuration and metric, the mean over the folds and its bootstrap interval). Its key is
stable for an output directory (``sweval-<data>-<8 hex of the output's absolute path>``), so
the runs of a scheduled deployment, which write to one output, build that key's history in the
Artifacts page; two outputs of the same data get two keys.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any

import pandas as pd

from sweval.evaluators.config.model import EvalConfig

_log = logging.getLogger(__name__)

#: The longest list of configurations a flow-run name spells out.
NAME_LABELS_WIDTH = 48

#: The summary's columns in the artifact, in this order.
ARTIFACT_COLUMNS = ("algorithm", "metric", "k", "mean", "ci_low", "ci_high", "n_folds")


def short_label(label: str) -> str:
    """A configuration's label as a flow-run name shows it: the label, except that an import
    path loses its module (``my_pkg.models:CoVisit(days=1)`` → ``CoVisit(days=1)``)."""
    head, paren, rest = label.partition("(")
    if ":" in head:
        head = head.rsplit(":", 1)[1]
    return head + paren + rest


def flow_run_name(config: EvalConfig, rolling: bool = False) -> str:
    """``<data>-w<window>[-rolling] · <label>+<label>...``, the labels cut to
    :data:`NAME_LABELS_WIDTH` characters with ``+N more``."""
    labels = [short_label(label) for label in config.labels]
    shown: list[str] = []
    for index, label in enumerate(labels):
        rest = len(labels) - index - 1
        more = f"+{rest} more" if rest else ""
        if shown and len("+".join([*shown, label])) + len(more) > NAME_LABELS_WIDTH:
            shown.append(f"{len(labels) - index} more")
            break
        shown.append(label)
    head = f"{config.dataset_name}-w{config.window}" + ("-rolling" if rolling else "")
    return f"{head} · {'+'.join(shown)}"


def artifact_key(config: EvalConfig) -> str:
    """The summary artifact's key: ``sweval-<data>-<hash>``, lowercase letters, digits and
    dashes (what Prefect accepts), the hash the first 8 hex digits of the sha256 of the output
    directory's absolute path."""
    data = re.sub(r"[^a-z0-9]+", "-", config.dataset_name.lower()).strip("-")[:40] or "data"
    where = hashlib.sha256(str(Path(config.output).resolve()).encode()).hexdigest()[:8]
    return f"sweval-{data}-{where}"


def summary_table(summary: pd.DataFrame) -> list[dict[str, Any]]:
    """The artifact's rows: the summary's stratum ``all``, values rounded to 4 decimals (a
    missing interval is an empty cell)."""
    if summary.empty:
        return []
    part = summary[summary["stratum"] == "all"]
    rows = []
    for record in part.to_dict("records"):
        row: dict[str, Any] = {}
        for column in ARTIFACT_COLUMNS:
            value = record.get(column)
            if value is None or (isinstance(value, float) and pd.isna(value)):
                row[column] = ""
            elif column == "k":
                row[column] = str(int(value))
            elif column == "n_folds":
                row[column] = int(value)
            elif isinstance(value, float):
                row[column] = round(value, 4)
            else:
                row[column] = str(value)
        rows.append(row)
    return rows


def artifact_description(config: EvalConfig, outputs: Any, rolling: bool = False) -> str:
    """The artifact's Markdown description: the data, the window, the units and the output."""
    kind = "rolling run" if rolling else "run"
    return (
        f"SW-EVAL {kind} of **{config.dataset_name}**, window {config.window}: "
        f"{outputs.n_computed} units computed, {outputs.n_reused} reused. "
        f"Mean over the folds with its bootstrap interval (stratum `all`). "
        f"Tables in `{outputs.directory}`."
    )


def publish_summary(config: EvalConfig, outputs: Any, rolling: bool = False) -> str | None:
    """Create the run's summary table artifact (in a flow run); returns its key, or None when
    Prefect refused it (logged: the evaluation's tables are written either way)."""
    from prefect.artifacts import create_table_artifact

    key = artifact_key(config)
    try:
        create_table_artifact(
            table=summary_table(outputs.summary), key=key,
            description=artifact_description(config, outputs, rolling),
        )
    except Exception as exc:  # noqa: BLE001 (the UI's table never fails a finished run)
        _log.warning("Prefect: the summary artifact %s was not created: %s", key, exc)
        return None
    return key
