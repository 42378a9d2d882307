"""``sweval ui``: the MLflow UI on the local tracking store, on the latest evaluation's chart."""

from __future__ import annotations

from typing import Annotated

import typer

from sweval.data.errors import SwevalError
from sweval.flows.cli.terminal import message_console

console = message_console()


def ui(
    tracking_uri: Annotated[str | None, typer.Option(help="The MLflow store to show. \\[default: $MLFLOW_TRACKING_URI, else sqlite:///$SWEVAL_HOME/mlflow.db]")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 5000,
    browser: Annotated[bool, typer.Option("--browser/--no-browser", help="Open the latest evaluation's comparison chart in the default browser ($BROWSER) once the server answers; its address is printed either way.")] = True,
) -> None:
    """Open the MLflow UI on the local tracking store, on the latest evaluation's chart.

    Starts mlflow server on 127.0.0.1 and opens the run comparison chart of the latest evaluation."""
    from sweval.evaluators.config.model import EvalConfig
    from sweval.flows.processes import run_server, stop_handled
    from sweval.flows.servers import mlflow_server_of, port_holder
    from sweval.flows.tracking import (
        announce_when_ready,
        latest_comparison_url,
        resolve_tracking_uri,
        server_command,
        server_env,
        shown_uri,
    )
    from sweval.flows.tracking.sqlite_store import prepare_sqlite_store

    uri = resolve_tracking_uri(EvalConfig(tracking_uri=tracking_uri))
    if uri.split(":", 1)[0] in ("http", "https"):
        console.print(shown_uri(f"{uri} is a tracking server already: open "
                                + (latest_comparison_url(uri, uri) or uri)), markup=False)
        return
    serving = mlflow_server_of(uri)
    if serving is not None:  # `sweval up`'s server has this store open: no second server
        console.print(f"the MLflow server of `sweval up` serves {shown_uri(uri)}: open "
                      + (latest_comparison_url(uri, serving) or serving), markup=False)
        return
    held = port_holder(port)
    if held is not None:  # else the announcement could point at another server there
        raise SwevalError(f"port {port} on 127.0.0.1 is taken ({held}): stop that process or "
                          "choose another port with --port.")
    from sweval.flows.settings import sweval_home

    log = sweval_home() / "logs" / "mlflow-ui.log"
    console.print(
        f"MLflow UI for {shown_uri(uri)} on http://127.0.0.1:{port} (takes ~20 s to start); "
        f"stop with Ctrl-C; the server's output goes to {log}", markup=False
    )
    prepare_sqlite_store(uri)  # built whole before the server opens it
    announce_when_ready(uri, f"http://127.0.0.1:{port}", browser=browser,
                        say=lambda line: console.print(line, markup=False))
    try:  # Ctrl-C, SIGTERM or SIGHUP stop the server's whole process group
        status = run_server(server_command(uri, port=port), server_env(uri), log=log)
    except KeyboardInterrupt:
        stop_handled()  # the UI's normal end: exit 0
        return
    if status != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise SwevalError(f"the MLflow server exited with status {status}; its last lines "
                          f"({log}): {' | '.join(tail)}")
