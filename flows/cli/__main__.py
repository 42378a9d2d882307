"""``python -m sweval.flows.cli``: the ``sweval`` command."""

from sweval.flows.cli.app import entry_point

entry_point()
