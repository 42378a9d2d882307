"""``per_user.parquet`` (``--per-user``): every per-user metric value of a run, for users' own
analyses (paired tests over users, distributions, joins with user attributes).

One row per (fold, algorithm, stratum, user, metric, k)::

    fold      int64    the fold
    algorithm string   the algorithm's label
    stratum   string   ``all`` or a policy label
    user      raw id   the user as in the input log (text when the ids mix types)
    metric    string   a per-user metric (evaluators.metrics.names.PER_USER)
    k         int64    the cut-off (null for R-precision)
    value     float64  the user's value

The mean of ``value`` over a (fold, algorithm, stratum, metric, k)'s users is that row's
``value`` in ``results.csv``. A tuned series (``ALG[tuned]``) has, on each fold where it has a
value, the rows of the candidate chosen for that fold. Exposure metrics have no per-user value
and are not in the file; skipped folds and groups have no rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from sweval.data.log import InteractionLog
from sweval.evaluators.units.engine import UnitResult
from sweval.evaluators.units.files import id_array

FILE = "per_user.parquet"


@dataclass
class PerUser:
    """The per-user values collected over a run, written by :meth:`write`."""

    parts: list[dict[str, np.ndarray]] = field(default_factory=list)

    def add(
        self, result: UnitResult, log: InteractionLog, *, stratum: str,
        mask: NDArray[np.bool_] | None = None,
    ) -> None:
        """The values of ``result``'s users (or the ``mask``ed ones), ids from ``log``."""
        users = result.users if mask is None else result.users[mask]
        raw = np.asarray(log.user_ids)[users]
        for (metric, k), values in result.values.items():
            chosen = values if mask is None else values[mask]
            n = len(chosen)
            self.parts.append({
                "fold": np.full(n, result.fold, dtype=np.int64),
                "algorithm": np.full(n, result.algorithm, dtype=object),
                "stratum": np.full(n, stratum, dtype=object),
                "user": raw,
                "metric": np.full(n, metric, dtype=object),
                "k": np.full(n, -1 if k is None else k, dtype=np.int64),
                "value": chosen.astype(np.float64),
            })

    def add_relabelled(self, sources: dict[tuple[int, str, str], str]) -> None:
        """Copy the values of every ``(fold, stratum, algorithm)`` in ``sources`` under the
        label it maps to: a tuned series (``ALG[tuned]``) has its chosen candidate's users on
        each fold, in each stratum (which chooses on its own)."""
        for part in list(self.parts):
            if not len(part["fold"]):
                continue
            label = sources.get((int(part["fold"][0]), str(part["stratum"][0]),
                                 str(part["algorithm"][0])))
            if label is not None:
                self.parts.append(part | {"algorithm": np.full(len(part["fold"]), label,
                                                               dtype=object)})

    def table(self) -> pa.Table:
        """The collected rows as an Arrow table (columns of the module docstring)."""
        def column(name: str) -> np.ndarray:
            if not self.parts:
                return np.zeros(0, dtype=np.int64 if name in ("fold", "k") else object)
            return np.concatenate([part[name] for part in self.parts])

        k = column("k")
        return pa.table({
            "fold": pa.array(column("fold"), type=pa.int64()),
            "algorithm": pa.array(column("algorithm"), type=pa.string()),
            "stratum": pa.array(column("stratum"), type=pa.string()),
            "user": id_array(column("user")) if self.parts else pa.array([], type=pa.string()),
            "metric": pa.array(column("metric"), type=pa.string()),
            "k": pa.array(k, type=pa.int64(), mask=k < 0),
            "value": pa.array(column("value"), type=pa.float64()),
        })

    def parquet_bytes(self) -> bytes:
        """The table as the bytes of ``per_user.parquet``."""
        stream = pa.BufferOutputStream()
        pq.write_table(self.table(), stream)
        return stream.getvalue().to_pybytes()
