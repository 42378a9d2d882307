"""Progress while units are computed: a bar with the time left on a terminal, plain lines
elsewhere (a file, a CI log).

::

    terminal      evaluating movielens  ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━  42/60  0:00:12  0:00:05 left
    otherwise     evaluating movielens: 42/60 units (fold 21 of 30 done), 0:12 elapsed, about 0:05 left
                  (one line at most every PLAIN_PERIOD_S seconds, and one when all are done)

The estimate is the elapsed time per finished unit times the units left: rough while few are
done, and units of different algorithms cost different times.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.driver import Driver, Hook
from sweval.evaluators.run.work import Job, Outcome

#: Seconds between two plain progress lines.
PLAIN_PERIOD_S = 5.0


def clock(seconds: float) -> str:
    """``1:05:09`` / ``2:03``: hours only when there are some."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


class ProgressHook(Hook):
    """Progress over the units a run computes (see the module docstring).

    Args:
        config: the run's options (``--progress``, the data's name).
        label: what is being done, before the data's name.
        stream: where plain lines go (default: standard error).
        period_s: seconds between two plain lines.
    """

    def __init__(self, config: EvalConfig, *, label: str = "evaluating",
                 stream: IO[str] | None = None, period_s: float = PLAIN_PERIOD_S) -> None:
        self.enabled = config.progress
        self.name = config.dataset_name
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.period_s = period_s
        self.total = self.done = self.jobs = self.jobs_done = 0
        self.started_at = self.printed_at = 0.0
        self.bar: Any = None
        self.task: Any = None

    def started(self, driver: Driver) -> None:
        jobs = driver.jobs()
        self.total = sum(len(job.labels) for job in jobs)
        self.jobs = len(jobs)
        self.started_at = self.printed_at = time.monotonic()
        if not self.enabled or not self.total:
            return
        if self.stream.isatty():
            self.bar = _rich_bar(self.label)
            self.bar.start()
            self.task = self.bar.add_task(self.name, total=self.total)
        else:
            self._line()

    def job_done(self, driver: Driver, job: Job, outcome: Outcome) -> None:
        self.done += len(job.labels)
        self.jobs_done += 1
        if self.bar is not None:
            self.bar.advance(self.task, len(job.labels))
        elif self.enabled and time.monotonic() - self.printed_at >= self.period_s:
            self._line()

    def finished(self, driver: Driver) -> None:
        if self.bar is None and self.enabled and self.total:
            self._line()
        self._stop()

    def failed(self, driver: Driver, exc: BaseException) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def _line(self) -> None:
        """One plain progress line."""
        elapsed = time.monotonic() - self.started_at
        left = ""
        if 0 < self.done < self.total:
            left = f", about {clock(elapsed / self.done * (self.total - self.done))} left"
        print(f"{self.label} {self.name}: {self.done}/{self.total} units ({self.jobs_done} of "
              f"{self.jobs} folds done), {clock(elapsed)} elapsed{left}", file=self.stream,
              flush=True)
        self.printed_at = time.monotonic()


def _rich_bar(label: str) -> Any:
    """A transient rich progress display: label, bar, done/total, elapsed and time left."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from sweval.flows.cli.terminal import table_console

    return Progress(
        TextColumn(f"[bold]{label}[/bold] {{task.description}}"), BarColumn(),
        MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("left"),
        console=table_console(stderr=True), transient=True,
    )
