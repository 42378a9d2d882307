"""SW-EVAL's JSON state files, read and written one way.

=================  ==============================  =============================================
file               where                           what it records
=================  ==============================  =============================================
``rolling.json``   a rolling series' output        how far the series got (evaluators.run.rolling)
``tracking.json``  a tracked run's output          its MLflow store, experiment and run ids
``servers.json``   ``$SWEVAL_HOME``                the servers ``sweval up`` started
=================  ==============================  =============================================

A state file is replaced whole (temporary file, then rename), and read as an empty record when
it is missing, unreadable or not a JSON object: state is a help, never a reason to stop.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError


@dataclass(frozen=True)
class StateFile:
    """One kind of state file: its name, and what it records (for messages)."""

    name: str
    what: str

    def path(self, directory: str | Path) -> Path:
        return Path(directory) / self.name

    def read(self, directory: str | Path) -> dict[str, Any]:
        """The record in ``directory``; empty when missing or unreadable."""
        try:
            record = json.loads(self.path(directory).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}

    def write(self, directory: str | Path, record: dict[str, Any]) -> None:
        """Replace the record in ``directory`` whole.

        Raises:
            SwevalError: it cannot be written (naming the file and what it records).
        """
        from sweval.evaluators.units.files import atomic_write_text

        path = self.path(directory)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(record, indent=2, default=str))
        except OSError as exc:
            raise SwevalError(f"{path}: cannot record {self.what} ({exc}).") from exc

    def remove(self, directory: str | Path) -> None:
        """Forget the record (nothing when there is none)."""
        with contextlib.suppress(FileNotFoundError):
            self.path(directory).unlink()


ROLLING = StateFile("rolling.json", "the rolling series' progress")
TRACKING = StateFile("tracking.json", "the MLflow run")
SERVERS = StateFile("servers.json", "the servers of `sweval up`")
