"""Running a configured evaluation: plan, compute missing units with a progress bar, write outputs.

This is the in-process path. The Prefect flow (``flows/sliding_window.py``) composes the same
library functions (``evaluators.run``) as tasks.
"""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from evaluators.config import EvalConfig
from evaluators.run import Outputs, collect, make_plan, run_units, write_outputs


def execute(config: EvalConfig) -> Outputs:
    """Evaluate ``config`` in this process, resuming from finished units, and write the outputs."""
    plan = make_plan(config)
    store = plan.store()
    todo = [unit for unit in plan.units if not store.has(*unit)]
    with Progress(
        TextColumn("[bold]evaluating[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not config.progress,
        transient=True,
    ) as progress:
        task = progress.add_task(config.dataset_name, total=len(todo))
        run_units(plan, store, progress=lambda n: progress.advance(task, n))
    outputs = collect(plan, store)
    write_outputs(plan, outputs)
    return outputs
