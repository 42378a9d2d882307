"""The ``sweval`` console script: the warm process's child runs the command when it can
(:mod:`flows.warm_client`, standard library only), else this process runs it, exactly as
:func:`flows.cli.entry_point` always has."""

from __future__ import annotations

import sys


def entry_point() -> None:
    from sweval.flows.warm_client import run_in_warm_process

    status = run_in_warm_process(sys.argv)
    if status is not None:
        sys.exit(status)
    from sweval.flows.cli import entry_point as run_here

    run_here()
