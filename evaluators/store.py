"""Persisting finished units so that a crashed or killed run resumes where it stopped.

Layout under the output directory::

    units/manifest.json            {"key": <config hash + data fingerprint>}
    units/f0003__item-knn.json     rows and timings of one finished (fold, algorithm) unit

Each unit file is written to a temporary name and renamed into place, so a kill leaves either
the whole unit or nothing. A manifest whose key differs from the current run's (the config,
the data or the evaluation code changed: :func:`code_fingerprint`) makes the store start fresh.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from sweval.data.errors import SwevalError

_log = logging.getLogger(__name__)

#: The packages whose code can change a number in the results.
_RESULT_PACKAGES = ("algorithms", "data", "evaluators")


@functools.cache
def code_fingerprint(root: Path = Path(__file__).resolve().parents[1]) -> str:
    """A hash of the source of every module that computes results (part of every run key).

    Units finished by other code (an upgrade, a local fix) are then recomputed, never mixed
    with new ones in one table.
    """
    digest = hashlib.sha256()
    for package in _RESULT_PACKAGES:
        for path in sorted((root / package).glob("*.py")):
            digest.update(f"{package}/{path.name}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


class UnitStore:
    """Finished units of one run configuration, on disk."""

    def __init__(self, output_dir: str | Path, key: str) -> None:
        self.directory = Path(output_dir) / "units"
        self.key = key
        manifest = self.directory / "manifest.json"
        try:
            if manifest.exists() and json.loads(manifest.read_text()).get("key") != key:
                _log.info("configuration or data changed: discarding %s", self.directory)
                shutil.rmtree(self.directory)
            self.directory.mkdir(parents=True, exist_ok=True)
            if not manifest.exists():
                atomic_write_text(manifest, json.dumps({"key": key}))
        except OSError as exc:
            raise SwevalError(f"{self.directory}: cannot prepare the output directory ({exc}).") from exc

    def _path(self, fold: int, algorithm: str) -> Path:
        return self.directory / f"f{fold:04d}__{algorithm}.json"

    def has(self, fold: int, algorithm: str) -> bool:
        return self._path(fold, algorithm).exists()

    def save(self, fold: int, algorithm: str, payload: dict[str, Any]) -> None:
        """Persist one finished unit (rows, device, timings) atomically."""
        text = json.dumps(_clean(payload), sort_keys=True)
        try:
            atomic_write_text(self._path(fold, algorithm), text)
        except OSError as exc:
            raise SwevalError(
                f"{self.directory}: cannot write results ({exc}); finished units so far are kept, "
                "rerun the same command once the problem is fixed to resume."
            ) from exc

    def load(self, fold: int, algorithm: str) -> dict[str, Any]:
        return _restore(json.loads(self._path(fold, algorithm).read_text()))

    def finished(self) -> list[tuple[int, str]]:
        """(fold, algorithm) of every finished unit."""
        units = []
        for path in sorted(self.directory.glob("f*__*.json")):
            fold, algorithm = path.stem.split("__", 1)
            units.append((int(fold[1:]), algorithm))
        return units


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(stream)`` on a temporary file beside ``path``, then rename it into place.

    A crash or a full disk leaves either the old file, or the new one whole, never a truncated
    one; the temporary file is removed when the write fails.
    """
    handle_fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    temporary = Path(name)  # unique per writer: threads of one process may save concurrently
    try:
        os.fchmod(handle_fd, 0o644)  # mkstemp's 0600 would make results unreadable to others
        with os.fdopen(handle_fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write` of ``text`` in UTF-8."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def _clean(value: Any) -> Any:
    """JSON cannot hold NaN portably: store it as null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value


def _restore(payload: dict[str, Any]) -> dict[str, Any]:
    for row in payload.get("rows", []):
        if row.get("value") is None:
            row["value"] = math.nan
    return payload
