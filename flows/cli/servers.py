"""``sweval up``, ``sweval down``, ``sweval status``: the local servers of :mod:`flows.servers`."""

from __future__ import annotations

from typing import Annotated

import typer

from sweval.data.errors import SwevalError
from sweval.flows import servers
from sweval.flows.cli.terminal import message_console

# plain text: paths, URLs and the servers' own messages print as they are
_err = message_console(markup=False)
_out = message_console(stderr=False, markup=False)

_LABEL = {"prefect": "Prefect", "mlflow": "MLflow"}


def up(
    prefect_port: Annotated[int | None, typer.Option(help=f"Port of the Prefect server (UI and API) on 127.0.0.1. \\[default: {servers.DEFAULT_PREFECT_PORT}; after servers that died, the port they had]", show_default=False)] = None,
    mlflow_port: Annotated[int | None, typer.Option(help=f"Port of the MLflow server (UI and tracking) on 127.0.0.1. \\[default: {servers.DEFAULT_MLFLOW_PORT}; after servers that died, the port they had]", show_default=False)] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for both servers to answer.")] = servers.START_TIMEOUT_S,
) -> None:
    started, new = servers.up(prefect_port, mlflow_port, timeout=timeout,
                              say=lambda line: _err.print(line))
    _err.print("started:" if new else "already up (stop with `sweval down`):")
    if not new:
        _ports_ignored(started, {"prefect": prefect_port, "mlflow": mlflow_port})
    for server in started:
        _out.print(f"{_LABEL[server.name]:8} {server.url}   (pid {server.pid}, log {server.log})")


def _ports_ignored(running: list[servers.Server], asked: dict[str, int | None]) -> None:
    """Say so when ports given on the command line differ from those of the servers up."""
    for server in running:
        port = asked.get(server.name)
        if port is not None and port != server.port:
            _err.print(f"--{server.name}-port {port} is not used: the {_LABEL[server.name]} "
                       f"server is up on port {server.port} (`sweval down` first to move it).")


def down(
    force: Annotated[bool, typer.Option("--force", help="Stop them even while sweval commands use them: those commands then fail; their finished units are kept.")] = False,
) -> None:
    from sweval.evaluators.units.locks import describe_registrants

    users = servers.server_users()
    if users and servers.recorded_servers(servers.read_state()) and not force:
        raise SwevalError(
            f"{len(users)} sweval command{'s are' if len(users) > 1 else ' is'} using the "
            f"servers: {describe_registrants(users)}. Stopping them now would fail "
            f"{'those commands' if len(users) > 1 else 'it'} (finished units are kept). Wait "
            "for them to finish or stop them, or `sweval down --force`.")
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
    for i, (server, alive, answering) in enumerate(found):
        if answering and not alive:  # a child of the server answers; `down` can still stop it
            state = "answering, but its recorded process is gone"
            found[i] = (server, alive, False)
        else:
            state = "up" if answering else ("not answering" if alive else "down (process gone)")
        _out.print(f"{_LABEL[server.name]:8} {server.url}   pid {server.pid}   {state}")
    for user in servers.server_users():
        _out.print(f"in use by pid {user['pid']}: {user['command']} (started {user['started']})")
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
down.__doc__ = "\n\n".join([
    "Stop the servers of [bold]sweval up[/bold] (each process group: SIGTERM, then SIGKILL "
    "after 10 s) and forget them.",
    "While sweval commands use the servers (a run, a comparison, [bold]sweval serve[/bold]), "
    "it names them and stops nothing, unless --force.",
])
status.__doc__ = (  # Typer keeps a docstring's line breaks: one-line paragraphs
    "Show the servers of [bold]sweval up[/bold]: URL, pid, and whether each answers.\n\n"
    "Exit status 0 when the recorded servers all answer; 1 when nothing is up, or when one is "
    "down, gone or not answering: `sweval status >/dev/null || sweval up` starts what is "
    "missing."
)
