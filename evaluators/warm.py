"""The state that warm-starting models carry from one fold to the next, on disk.

Layout under the output directory (inside the unit store, so it is discarded with it when the
configuration or the data change)::

    units/warm/als__f0007.npz      the state after fitting fold 7 (arrays, global codes)

Fold f starts from the newest state of a fold before f: the previous fitted fold, whatever
ran or crashed in between, so a resumed run computes the same numbers as an uninterrupted
one. Saving fold f's state removes the states older than fold f's predecessor (a rerun of f
still finds it). Files are written atomically (:func:`evaluators.store.atomic_write`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from sweval.algorithms.base import WarmState
from sweval.data.errors import SwevalError
from sweval.evaluators.store import atomic_write

_FILE = re.compile(r"^(?P<algorithm>.+)__f(?P<fold>\d{4,})\.npz$")


class WarmStore:
    """Warm-start states of one run, one file per (algorithm, fold)."""

    def __init__(self, output_dir: str | Path) -> None:
        self.directory = Path(output_dir) / "units" / "warm"

    def _folds(self, algorithm: str) -> list[int]:
        if not self.directory.exists():
            return []
        found = (_FILE.match(path.name) for path in self.directory.iterdir())
        return sorted(int(m["fold"]) for m in found if m and m["algorithm"] == algorithm)

    def _path(self, algorithm: str, fold: int) -> Path:
        return self.directory / f"{algorithm}__f{fold:04d}.npz"

    def load(self, algorithm: str, fold: int) -> WarmState | None:
        """The state of the newest fold before ``fold``, or None (the first fitted fold)."""
        earlier = [f for f in self._folds(algorithm) if f < fold]
        if not earlier:
            return None
        path = self._path(algorithm, earlier[-1])
        try:
            with np.load(path) as arrays:
                return {name: arrays[name] for name in arrays.files}
        except (OSError, ValueError) as exc:
            raise SwevalError(
                f"{path}: unreadable warm-start state ({exc}); delete it to restart that "
                "algorithm's chain cold."
            ) from exc

    def save(self, algorithm: str, fold: int, state: WarmState) -> None:
        """Persist the state after fitting ``fold``; drop states no rerun can need."""
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write(self._path(algorithm, fold), lambda stream: np.savez(stream, **state))
        earlier = [f for f in self._folds(algorithm) if f < fold]
        for old in earlier[:-1]:  # keep fold's predecessor: a rerun of fold starts from it
            self._path(algorithm, old).unlink(missing_ok=True)
