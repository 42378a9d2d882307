"""``sweval algorithms``: every algorithm, built-in and plugin, with its parameters."""

from __future__ import annotations

from rich.markup import escape

from sweval.data.errors import SwevalError
from sweval.flows.cli.logs import setup_logging
from sweval.flows.cli.terminal import message_console, table_console


def algorithms() -> None:
    """List every algorithm, built-in and plugin, with its parameters, defaults and origin.

    The table ends with where device=auto runs ALS and BPR here (the GPU, or the CPU and why) and their default devices (BPR: the CPU, on any machine). Plugins: entry points in the group [bold]sweval.algorithms[/bold]; any other class can be named by its import path (--algorithms pop,my_pkg.models:MyModel). A plugin that cannot be used is reported after the table, with exit status 2."""
    from rich.table import Table

    from sweval.algorithms.implicit_device import OnDevice, cuda_unavailable_reason
    from sweval.algorithms.registry import available

    setup_logging(False)
    found, problems = available()
    table = Table(title="Algorithms (--algorithms NAME, --set NAME.PARAM=VALUE)")
    for column in ("name", "parameters (default)", "origin"):
        table.add_column(column, overflow="fold")
    for name, (cls, origin) in found.items():
        params = "\n".join(
            f"{param}={field.default!r}" + (f": {field.description}" if field.description else "")
            for param, field in cls.Config.model_fields.items()
        )
        table.add_row(escape(name), escape(params) or "—", escape(origin.describe()))
    table_console().print(table)
    on_device = [name for name, (cls, _origin) in found.items() if issubclass(cls, OnDevice)]
    if on_device:
        reason = cuda_unavailable_reason()
        where = "the GPU" if reason is None else f"the CPU here: {reason}"
        defaults = ", ".join(
            f"{name}.device={found[name][0].Config.model_fields['device'].default}"
            for name in on_device
        )
        message_console(stderr=False).print(
            f"device=auto ({', '.join(on_device)}) runs on {where}; defaults: {defaults}",
            markup=False,
        )
    if problems:
        raise SwevalError("\n".join(problems))
