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
_PORT_HELP = ("Port of the {} server (UI and API) on 127.0.0.1. \\[default: {}; after servers "
              "that died, the port they had]")


def up(
    prefect_port: Annotated[int | None, typer.Option(help=_PORT_HELP.format("Prefect", 4200), show_default=False)] = None,
    mlflow_port: Annotated[int | None, typer.Option(help=_PORT_HELP.format("MLflow", 5000), show_default=False)] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for both servers to answer.")] = servers.START_TIMEOUT_S,
) -> None:
    asked = {"prefect": prefect_port, "mlflow": mlflow_port}
    urls, new = servers.up(asked, timeout=timeout, say=_err.print)
    _err.print("started:" if new else "already up (stop with `sweval down`):")
    for name, url in urls.items():
        port = asked[name]
        if not new and port is not None and not url.endswith(f":{port}"):
            _err.print(f"--{name}-port {port} is not used: the {_LABEL[name]} server is up at "
                       f"{url} (`sweval down` first to move it).")
        _out.print(f"{_LABEL[name]:8} {url}")


def down(
    force: Annotated[bool, typer.Option("--force", help="Stop them even while sweval commands use them: those commands then fail; their finished units are kept.")] = False,
) -> None:
    from sweval.evaluators.units.locks import describe_registrants, registrants

    users = registrants(servers.users_folder())
    if users and servers.recorded() and not force:
        raise SwevalError(
            f"{len(users)} sweval command{'s are' if len(users) > 1 else ' is'} using the "
            f"servers: {describe_registrants(users)}. Stopping them now would fail "
            f"{'those commands' if len(users) > 1 else 'it'} (finished units are kept). Wait "
            "for them to finish or stop them, or `sweval down --force`.")
    stopped = servers.down()
    if not stopped:
        _err.print("no servers of `sweval up` are recorded: nothing to stop.")
    for name, running in stopped.items():
        _out.print(f"{_LABEL[name]:8} {'stopped' if running else 'was not running'}")


def status() -> None:
    from sweval.evaluators.units.locks import registrants

    found = servers.status()
    for name, (url, answering) in found.items():
        _out.print(f"{_LABEL[name]:8} {url}   {'up' if answering else 'not answering'}")
    for user in registrants(servers.users_folder()):
        _out.print(f"in use by pid {user['pid']}: {user['command']} (started {user['started']})")
    if not found:
        _out.print("not up (start the servers with `sweval up`)")
    if not found or not all(answering for _, answering in found.values()):
        raise typer.Exit(1)


# Typer keeps a docstring's line breaks: the help texts are built from one-line paragraphs.
up.__doc__ = (
    "Start a Prefect server and an MLflow server in the background (127.0.0.1): every later "
    "sweval command uses them and both UIs stay open.\n\n"
    "They keep their data where a plain run does (Prefect's database in PREFECT_HOME, the MLflow "
    "store of MLFLOW_TRACKING_URI, else $SWEVAL_HOME/mlflow.db). An explicit PREFECT_API_URL, "
    "MLFLOW_TRACKING_URI or --tracking-uri still wins. Stop them with [bold]sweval down[/bold].")
down.__doc__ = (
    "Stop the servers of [bold]sweval up[/bold] (SIGTERM, then SIGKILL after 10 s).\n\n"
    "While sweval commands use the servers (a run, a comparison, [bold]sweval serve[/bold]), "
    "it names them and stops nothing, unless --force.")
status.__doc__ = (
    "Show the servers of [bold]sweval up[/bold] and whether each answers.\n\n"
    "Exit status 0 when the recorded servers all answer; 1 when nothing is up, or when one is "
    "not answering: `sweval status >/dev/null || sweval up` starts what is missing.")
