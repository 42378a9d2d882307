"""Units that failed: what is recorded of one (:class:`UnitFailure`), the error that stops a
command at a failed unit (:class:`AlgorithmFailed`), and the error of a run that finished with
some units failed (:class:`UnitsFailed`, exit status 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sweval.data.errors import SwevalError


@dataclass(frozen=True)
class UnitFailure:
    """A unit whose algorithm raised: the run goes on without it and reports it at the end.

    Attributes:
        fold: the split's index.
        label: the algorithm configuration's label.
        key: the unit's key.
        stratum: the split's stratum (``all`` unless stratified).
        error: ``ExceptionType: message``.
        traceback: the formatted traceback, for the log.
    """

    fold: int
    label: str
    key: str
    stratum: str
    error: str
    traceback: str

    def describe(self) -> str:
        stratum = "" if self.stratum == "all" else f", stratum {self.stratum}"
        return f"fold {self.fold}{stratum}, {self.label}: {self.error}"


class AlgorithmFailed(SwevalError):
    """An algorithm raised while one unit was fitted or ranked (its :class:`UnitFailure`).

    A run (:func:`evaluators.run.plan.run_fold`) records it and goes on; anywhere else (``sweval
    compare``, ``--tune-sampler tpe``) it stops the command as a user error naming the unit.
    """

    def __init__(self, failure: UnitFailure) -> None:
        super().__init__(failure)
        self.failure = failure

    def __str__(self) -> str:
        return f"unit failed ({self.failure.describe()})"


class UnitsFailed(SwevalError):
    """A run that finished with some units failed: the others' results are written; the
    command exits with status :attr:`exit_code` (3; user errors exit with 2). Its message
    counts them: the summary above it lists them (``failed:``), the log has their tracebacks."""

    exit_code = 3

    def __init__(self, failures: Sequence[UnitFailure]) -> None:
        self.failures = tuple(failures)
        super().__init__(
            f"{len(self.failures)} unit(s) failed and are left out of the results (listed "
            "above; tracebacks in the log)."
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.failures,))
