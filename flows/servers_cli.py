"""``sweval up``, ``sweval down``, ``sweval status``: the local servers of :mod:`flows.servers`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from sweval.flows import servers

_err = Console(stderr=True, highlight=False, soft_wrap=True)
_out = Console(highlight=False, soft_wrap=True)

_LABEL = {"prefect": "Prefect", "mlflow": "MLflow"}


def up(
    prefect_port: Annotated[int, typer.Option(help="Port of the Prefect server (UI and API) on 127.0.0.1.")] = servers.DEFAULT_PREFECT_PORT,
    mlflow_port: Annotated[int, typer.Option(help="Port of the MLflow server (UI and tracking) on 127.0.0.1.")] = servers.DEFAULT_MLFLOW_PORT,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for both servers to answer.")] = servers.START_TIMEOUT_S,
) -> None:
    started, new = servers.up(prefect_port, mlflow_port, timeout=timeout,
                              say=lambda line: _err.print(line))
    _err.print("started:" if new else "already up (stop with `sweval down`):")
    for server in started:
        _out.print(f"{_LABEL[server.name]:8} {server.url}   (pid {server.pid}, log {server.log})")


def down() -> None:
    stopped = servers.down()
    if not stopped:
        _err.print("no servers of `sweval up` are recorded: nothing to stop.")
        return
    for server, running in stopped:
        what = "stopped" if running else "was not running"
        _out.print(f"{_LABEL[server.name]:8} {server.url}   (pid {server.pid}) {what}")


def status() -> None:
    found = servers.status()
    if not found:
        _out.print("not up (start the servers with `sweval up`)")
        raise typer.Exit(1)
    for server, alive, answering in found:
        state = "up" if answering else ("not answering" if alive else "down (process gone)")
        _out.print(f"{_LABEL[server.name]:8} {server.url}   pid {server.pid}   {state}")
    if not all(answering for _, _, answering in found):
        _err.print("restart them with `sweval down` and `sweval up` (logs: "
                   + ", ".join(server.log for server, _, _ in found) + ")")
        raise typer.Exit(1)



# Typer keeps a docstring's line breaks: the help texts are built from one-line paragraphs.
up.__doc__ = "\n\n".join([
    "Start a Prefect server and an MLflow server in the background (127.0.0.1): every later "
    "[bold]sweval run[/bold] uses them (no temporary server to start) and both UIs stay open.",
    "They keep their data where a plain run does (Prefect's database in PREFECT_HOME, the MLflow "
    "store of MLFLOW_TRACKING_URI, else $SWEVAL_HOME/mlflow.db). An explicit PREFECT_API_URL, "
    "MLFLOW_TRACKING_URI or --tracking-uri still wins. Stop them with [bold]sweval down[/bold].",
])
down.__doc__ = (
    "Stop the servers of [bold]sweval up[/bold] (each process group: SIGTERM, then SIGKILL "
    "after 10 s) and forget them."
)
status.__doc__ = (
    "Show the servers of [bold]sweval up[/bold]: URL, pid, and whether each answers (exit "
    "status 0 when both answer, 1 otherwise)."
)
