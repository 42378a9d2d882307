"""``sweval datasets``: the public datasets to try SW-EVAL on, fetched on request only.

::

    sweval datasets list                            bundled and fetchable datasets, which are here
    sweval datasets fetch movielens-100k            licence shown and accepted, then downloaded,
                                                    SHA-256 checked, stored (data.datasets)
    sweval datasets fetch NAME --from ml-100k.zip   a copy downloaded by other means, checked too

A fetched dataset is then named like a bundled one: ``sweval run --data movielens-100k``.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from sweval.data.errors import SwevalError
from sweval.flows.cli.terminal import message_console, table_console

app = typer.Typer(help="List the datasets to try SW-EVAL on, and fetch the public ones "
                  "(nothing is downloaded unless asked).", no_args_is_help=True)


@app.command("list")
def list_datasets() -> None:
    """The bundled dataset and the public ones `fetch` downloads: which are here, and where."""
    from sweval.data.datasets import DATASETS
    from sweval.data.loaders import BUNDLED, BUNDLED_DIR
    from sweval.data.user_dirs import data_home

    table = Table(title="datasets (use one with --data NAME)")
    for column in ("name", "here", "what", "source"):
        table.add_column(column, overflow="fold")
    for name, (relative, _fmt) in BUNDLED.items():
        table.add_row(name, "bundled", "GroupLens MovieLens latest-small (research use)",
                      escape(str(BUNDLED_DIR / relative).rsplit("/", 1)[0]))
    for name, dataset in DATASETS.items():
        here = "fetched" if dataset.fetched else f"no: sweval datasets fetch {name}"
        table.add_row(name, escape(here), escape(dataset.title), escape(dataset.url))
    console = table_console()
    console.print(table)
    console.print(f"fetched datasets are kept in {data_home()} ($SWEVAL_DATA_DIR chooses "
                  "another)", markup=False, highlight=False)


@app.command("fetch")
def fetch(
    name: Annotated[str, typer.Argument(help="The dataset (sweval datasets list).")],
    source: Annotated[str | None, typer.Option(
        "--from", help="A copy to take instead of the publisher's address: a path or a URL "
        "(checked against the same SHA-256).", show_default=False)] = None,
    accept_licence: Annotated[bool, typer.Option(
        "--accept-licence", help="Accept the dataset's terms (printed first) without being "
        "asked: for scripts, after reading them.")] = False,
) -> None:
    """Show the dataset's licence, ask to accept it, then download it, check its SHA-256 and store it in the user's cache directory; then `--data NAME` reads it."""  # noqa: E501 (one paragraph: rich reflows it)
    from sweval.data.datasets import dataset, licence_text
    from sweval.data.datasets import fetch as fetch_dataset

    found = dataset(name)
    console = message_console(stderr=False)
    if found.fetched:
        console.print(f"{name}: already fetched, in {found.directory}", markup=False)
        return
    console.print(licence_text(name), markup=False, highlight=False)
    if not accept_licence:
        if not sys.stdin.isatty():
            raise SwevalError(f"{name}: its terms (above) must be accepted first: answer yes "
                              "in a terminal, or add --accept-licence once you have read them.")
        if not typer.confirm(f"Fetch {name} under these terms?", default=False):
            console.print("nothing downloaded", markup=False)
            raise typer.Exit(1)
    fetch_dataset(name, source=source, say=lambda line: console.print(line, markup=False,
                                                                      highlight=False))
    console.print(f"use it with --data {name}", markup=False, highlight=False)
