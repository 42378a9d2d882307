"""Running a configured evaluation in this process, without Prefect (``sweval run --no-prefect``).

The same driver as the flow (:mod:`flows.pipeline`): plan once, compute the folds that miss
units (one after the other, with a progress bar), write the outputs, and optionally log to MLflow
exactly as the flow does. Useful where no Prefect API can start, and in library-level tests.
"""

from __future__ import annotations

import logging

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.units.locks import output_lock
from sweval.evaluators.run.outputs import Outputs
from sweval.evaluators.run.plan import unit_store
from sweval.flows.pipeline import Evaluation, compute_fold, open_tracker, prepare
from sweval.flows.cli.summary import progress_bar

_log = logging.getLogger(__name__)


def execute(config: EvalConfig, *, rolling: bool = False, tracking: bool = False) -> Outputs | None:
    """Evaluate ``config`` in this process, resuming from finished units, and write the outputs.

    Args:
        config: the run's configuration.
        rolling: evaluate only the complete windows not evaluated yet (see :mod:`flows.rolling`).
        tracking: log to MLflow (when ``config.tracking`` is also true).

    Returns:
        The written tables; None when a rolling run found no complete window.

    Raises:
        SwevalError: any problem with the data or the options, or another run writing to
            ``config.output`` (:func:`evaluators.units.locks.output_lock`).
    """
    with output_lock(config.output), unit_store(config).in_use():
        return _execute(config, rolling=rolling, tracking=tracking)


def _execute(config: EvalConfig, *, rolling: bool, tracking: bool) -> Outputs | None:
    """:func:`execute`'s work, with the output directory locked."""
    prepared = prepare(config, rolling=rolling)
    if prepared is None:
        return None
    tracker = open_tracker(prepared) if tracking else None
    evaluation = Evaluation(prepared, tracker=tracker)
    try:
        evaluation.start()
        _log.info("%s", evaluation.log_line())
        jobs = evaluation.jobs()
        with progress_bar(config, sum(len(j.names) for j in jobs)) as advance:
            evaluation.progress = advance
            for job in jobs:
                payloads = compute_fold(**evaluation.job_parameters(job))
                evaluation.accept(job, payloads)
        outputs = evaluation.outputs()
        evaluation.finish(outputs)
    except BaseException as exc:
        evaluation.fail(exc)
        raise
    return outputs
