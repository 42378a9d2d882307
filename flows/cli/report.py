"""``sweval report DIR_OR_RUN_ID``: the HTML report and PNG figures of a finished run.

Given an output directory of ``sweval run`` / ``sweval compare``, the report is written into it
(``report.html`` + ``report-*.png``; see :mod:`evaluators.report.page`); of ``sweval gap``, the gap's
own page (:mod:`evaluators.report.gap_page`). Given an MLflow run id, the
run's artifacts are downloaded into a temporary directory (the parent run's, when the id is a
child run without results), the report is built from them into ``--output`` and, unless
``--no-log-artifacts``, logged back to that run under ``report/``.

The MLflow store is opened through :mod:`flows.tracking` (which imports MLflow when a run id is
given): ``sweval report DIR`` does not need it.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from sweval.data.errors import SwevalError
from sweval.flows.cli.terminal import message_console

console = message_console(markup=False)  # paths print as they are

RUN_ID = re.compile(r"[0-9a-f]{32}")
RESULT_FILES = ("compare.csv", "results.csv")
ARTIFACT_PATH = "report"


def report(
    target: Annotated[str, typer.Argument(help="Output directory of `sweval run`, `compare` or `gap`, or an MLflow run id.", show_default=False)],
    metrics: Annotated[str, typer.Option(help="Comma-separated metrics to report: recall, hit_rate, ndcg, r_precision, any other metric the run measured (--metrics), or all.")] = "recall",
    k: Annotated[int | None, typer.Option(help="k of the over-time figures. (default: 10, else the middle k)", show_default=False)] = None,
    output: Annotated[Path | None, typer.Option(help="Where to write the report. (default: the directory itself; for a run id, runs/report-RUN_ID)", show_default=False)] = None,
    tracking_uri: Annotated[str | None, typer.Option(help="MLflow tracking URI, for a run id. (default: $MLFLOW_TRACKING_URI, else sqlite:///$SWEVAL_HOME/mlflow.db)", show_default=False)] = None,
    log_artifacts: Annotated[bool, typer.Option("--log-artifacts/--no-log-artifacts", help="For a run id: log the report to that run as artifacts under report/.")] = True,
) -> None:
    """Write the HTML report (paper-style tables, Recall@k against k, Recall@k per fold) + PNGs."""
    from sweval.evaluators.report.gap_page import is_gap_output, write_gap_report
    from sweval.evaluators.report.page import write_report

    chosen = [m.strip() for m in metrics.split(",") if m.strip()] or ["recall"]
    path = Path(target)
    if path.exists() or not RUN_ID.fullmatch(target):
        if not path.is_dir():
            raise SwevalError(
                f"{target}: no such directory (nor an MLflow run id: 32 hex digits)."
            )
        if is_gap_output(path):
            written = write_gap_report(path, metrics=chosen, k=k, destination=output)
        else:
            written = write_report(path, metrics=chosen, k=k, destination=output)
    else:
        written = report_from_run(
            target, metrics=chosen, k=k, destination=output or Path("runs") / f"report-{target}",
            tracking_uri=tracking_uri, log_to_run=log_artifacts,
        )
    console.print(f"report: {written[0]}")
    for png in written[1:]:
        console.print(f"  figure: {png}", style="dim")


def report_from_run(
    run_id: str,
    *,
    metrics: Sequence[str] = ("recall",),
    k: int | None = None,
    destination: Path,
    tracking_uri: str | None = None,
    log_to_run: bool = True,
) -> list[Path]:
    """Download an MLflow run's artifacts, build the report into ``destination`` and (optionally)
    log it back to the run that holds the results.

    Raises:
        SwevalError: unknown run, or neither it nor its parent has a results table.
    """
    from sweval.evaluators.report.page import write_report
    from sweval.flows.tracking import get_run

    client = _client(tracking_uri)
    holder = run_id
    with tempfile.TemporaryDirectory(prefix="sweval-report-") as tmp:
        found = _download_results(client, run_id, Path(tmp) / "run")
        if found is None:
            parent = get_run(client, run_id).data.tags.get("mlflow.parentRunId")
            if parent:
                holder = parent
                found = _download_results(client, parent, Path(tmp) / "parent")
        if found is None:
            raise SwevalError(
                f"MLflow run {run_id}: no results.csv or compare.csv among its artifacts"
                + (" or its parent's" if holder != run_id else "") + "."
            )
        written = write_report(found, metrics=metrics, k=k, destination=destination,
                               origin=f"MLflow run {holder}")
    if log_to_run:
        log_report(holder, written, tracking_uri=tracking_uri)
        console.print(f"logged to MLflow run {holder} under {ARTIFACT_PATH}/", style="dim")
    return written


def log_report(
    run_id: str, paths: Sequence[Path], *, tracking_uri: str | None = None,
    artifact_path: str = ARTIFACT_PATH,
) -> None:
    """Log report files (``write_report``'s return value) to an MLflow run as artifacts."""
    from sweval.flows.tracking import shown_uri

    client = _client(tracking_uri)
    try:
        for path in paths:
            client.log_artifact(run_id, str(path), artifact_path)
    except Exception as exc:  # mlflow raises MlflowException and storage errors alike
        raise SwevalError(
            shown_uri(f"MLflow run {run_id}: cannot log the report ({exc}).")) from exc


def _client(tracking_uri: str | None) -> Any:
    """An ``MlflowClient`` on ``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else SW-EVAL's
    local store (the one ``sweval run`` logs to).

    Raises:
        SwevalError: the store cannot be opened (a server or database that does not answer).
    """
    from sweval.flows.tracking import open_client, resolve_uri, shown_uri
    from sweval.flows.tracking.client import said

    uri = resolve_uri(tracking_uri)
    try:
        return open_client(uri)
    except SwevalError:
        raise
    except Exception as exc:  # mlflow and SQLAlchemy raise their own errors alike
        raise SwevalError(shown_uri(
            f"MLflow tracking at {uri}: {said(exc)}")) from exc


def _download_results(client: Any, run_id: str, into: Path) -> Path | None:
    """Download the run's artifacts; return the shallowest directory holding a results table."""
    from sweval.flows.tracking import get_run, shown_uri

    get_run(client, run_id)  # a clear error for an unknown id
    into.mkdir(parents=True, exist_ok=True)
    try:
        client.download_artifacts(run_id, "", str(into))
    except Exception as exc:  # mlflow raises MlflowException and storage errors alike
        raise SwevalError(
            shown_uri(f"MLflow run {run_id}: cannot download its artifacts ({exc}).")) from exc
    tables = [p for name in RESULT_FILES for p in into.rglob(name)]
    if not tables:
        return None
    return min((p.parent for p in tables), key=lambda p: (len(p.parts), str(p)))
