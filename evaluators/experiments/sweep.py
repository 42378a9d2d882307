"""One configuration run once per value of a listed option (``--window 1D,3D,7D``,
``--train-window 30D,90D,all``): each value's run in its own folder of the sweep's output
directory, which stays locked while the sweep runs (:mod:`evaluators.experiments.widths`,
:mod:`evaluators.experiments.history`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def in_locked_directory(directory: str | Path | None, command: str,
                        work: Callable[[Path | None], T]) -> T:
    """``work(None)`` without a directory; else ``work(directory)`` while this command holds
    the directory's output lock (another run writing there is refused)."""
    if directory is None:
        return work(None)
    from sweval.evaluators.units.locks import output_lock

    with output_lock(directory, command=command):
        return work(Path(directory))


def run_each(config: Any, values: Sequence[str], update_of: Callable[[str], dict[str, Any]],
             folder_of: Callable[[str], str], run: Callable[[Any], Any],
             target: Path | None) -> dict[str, Any]:
    """value → ``run(config updated by update_of(value))``, in the order of ``values``; with
    ``target``, each run's ``output`` is ``target / folder_of(value)``."""
    runs = {}
    for value in values:
        update = update_of(value)
        if target is not None:
            update["output"] = str(target / folder_of(value))
        runs[value] = run(config.model_copy(update=update))
    return runs
