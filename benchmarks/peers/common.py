"""Shared by every peer runner: arguments, the shared log, fold bounds, canonical metrics, output.

This module is imported by the peer scripts running in *their own* virtual environments (RecTools,
LensKit, RecPack, Streamsight), so it uses numpy and pandas only and nothing from SW-EVAL.

The contract between the driver (``benchmarks/bench.py``) and a runner::

    <venv python> benchmarks/peers/<peer>_run.py --data LOG.npz --t0 T0 --width W
        --n-folds N --algorithm NAME --out RESULT.json [--budget S] [--params JSON]

``LOG.npz`` (or ``.parquet``) has columns ``user, item, timestamp`` (int64 codes and epoch seconds, already
de-duplicated by SW-EVAL, time-sorted). Fold f tests on [T0 + f·W, T0 + (f+1)·W) and trains on
everything before T0 + f·W (expanding window). The runner times, *inside* the process:

- ``import_s``: from the first line of the script to the end of the peer's imports;
- ``load_s``: reading the log file and building the peer's dataset object;
- ``eval_s``: splitting + fitting + recommending + the peer's native metrics, every fold
  (``eval_cpu_s``: the CPU time of the same sections, all threads of the process);

and writes the top-10 lists it produced so that Recall@10 is computed here the same canonical
way for everybody (SPEC §4): the mean over the eligible users U_f (a training and a test
interaction) of |Rel_u ∩ top10_u| / |Rel_u|. Users of U_f without a list count as 0 (reported as
``missing_users``); lists for users outside U_f are ignored (reported as ``extra_users``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import traceback
from typing import Any

import numpy as np
import pandas as pd

#: Metric cut-offs every tool computes natively (the same work as SW-EVAL's k = 5,10,15,20).
KS = (5, 10, 15, 20)


def fold_parser() -> argparse.ArgumentParser:
    """The arguments of every benchmark child (runners, ``floor.py``, ``sweval_run.py``): the
    shared log and its fold bounds (see above)."""
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--t0", type=int, required=True)
    p.add_argument("--width", type=int, required=True)
    p.add_argument("--n-folds", type=int, required=True)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = fold_parser()
    p.add_argument("--algorithm", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--budget", type=float, default=0.0,
                   help="stop after the fold that crosses this many seconds of eval time "
                        "(0 = run every fold); the total is then extrapolated")
    p.add_argument("--params", default="{}", help="JSON hyper-parameters")
    p.add_argument("--u-min", type=int, default=0)
    return p.parse_args(argv)


def read_log(path: str) -> pd.DataFrame:
    """The shared log: ``.npz`` (arrays user, item, timestamp; no pyarrow needed) or parquet."""
    if path.endswith(".npz"):
        with np.load(path) as arrays:
            return pd.DataFrame({name: arrays[name] for name in ("user", "item", "timestamp")})
    frame = pd.read_parquet(path)
    return frame[["user", "item", "timestamp"]]


def bounds(args: argparse.Namespace) -> list[tuple[int, int]]:
    return [(args.t0 + f * args.width, args.t0 + (f + 1) * args.width) for f in range(args.n_folds)]


class Canon:
    """Canonical eligible users and relevant sets per fold, from the shared log (numpy only)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.user = frame["user"].to_numpy(np.int64)
        self.item = frame["item"].to_numpy(np.int64)
        self.ts = frame["timestamp"].to_numpy(np.int64)
        order = np.argsort(self.ts, kind="stable")
        self.user, self.item, self.ts = self.user[order], self.item[order], self.ts[order]
        self.n_items = int(self.item.max()) + 1
        n_users = int(self.user.max()) + 1
        self.first_ts = np.full(n_users, np.iinfo(np.int64).max)
        np.minimum.at(self.first_ts, self.user, self.ts)

    def fold(self, lo_t: int, hi_t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(eligible users ascending, rel keys sorted = user*n_items+item, |Rel_u| per user)."""
        lo, hi = np.searchsorted(self.ts, [lo_t, hi_t])
        u, i = self.user[lo:hi], self.item[lo:hi]
        keep = self.first_ts[u] < lo_t
        u, i = u[keep], i[keep]
        keys = np.unique(u * self.n_items + i)
        users, sizes = np.unique(keys // self.n_items, return_counts=True)
        return users, keys, sizes

    def recall(self, lo_t: int, hi_t: int, rec_user: np.ndarray, rec_item: np.ndarray,
               rec_rank: np.ndarray, k: int = 10) -> dict[str, Any]:
        """Canonical Recall@k of one fold from long-format lists (rank 0 = best)."""
        users, keys, sizes = self.fold(lo_t, hi_t)
        rec_user = np.asarray(rec_user, dtype=np.int64)
        rec_item = np.asarray(rec_item, dtype=np.int64)
        top = np.asarray(rec_rank) < k
        ru, ri = rec_user[top], rec_item[top]
        rkeys = ru * self.n_items + ri
        hit = np.isin(rkeys, keys)
        listed = np.unique(ru)
        idx = np.searchsorted(users, ru[hit])
        hits = np.bincount(idx, minlength=len(users)).astype(np.float64)
        value = float(np.mean(hits / sizes)) if len(users) else float("nan")
        return {
            "recall10": value,
            "n_eligible": int(len(users)),
            "missing_users": int(len(np.setdiff1d(users, listed))),
            "extra_users": int(len(np.setdiff1d(listed, users))),
        }


class Run:
    """Collects timings and per-fold results; writes the JSON the driver reads."""

    def __init__(self, args: argparse.Namespace, peer: str, version: str, t_start: float) -> None:
        self.args = args
        self.record: dict[str, Any] = {
            "peer": peer, "version": version, "algorithm": args.algorithm,
            "python": sys.version.split()[0], "n_folds": args.n_folds,
            "import_s": time.perf_counter() - t_start, "status": "ok", "folds": [],
            "notes": [],
        }
        self.eval_s = 0.0
        self.eval_cpu_s = 0.0
        self._marks = (0.0, 0.0)

    def begin(self) -> None:
        """Start a timed evaluation section (wall and this process's CPU time, all threads)."""
        self._marks = (time.perf_counter(), time.process_time())

    def end(self) -> None:
        """Close the section opened by :meth:`begin`, adding to ``eval_s`` and ``eval_cpu_s``."""
        wall, cpu = self._marks
        self.eval_s += time.perf_counter() - wall
        self.eval_cpu_s += time.process_time() - cpu

    def note(self, text: str) -> None:
        self.record["notes"].append(text)

    def over_budget(self) -> bool:
        return self.args.budget > 0 and self.eval_s >= self.args.budget

    def stop_at_budget(self) -> bool:
        """:meth:`over_budget`, noting it: the runner then stops after the current fold."""
        if not self.over_budget():
            return False
        self.note(f"stopped after {len(self.record['folds'])} folds (budget "
                  f"{self.args.budget:.0f} s); eval_s_extrapolated = eval_s / folds * n_folds")
        return True

    def finish(self, status: str = "ok") -> None:
        rec = self.record
        rec["eval_s"] = self.eval_s
        rec["eval_cpu_s"] = self.eval_cpu_s
        done = len([f for f in rec["folds"] if "recall10" in f])
        rec["folds_done"] = done
        if status == "ok" and done < self.args.n_folds:
            status = "partial"
        rec["status"] = status
        if 0 < done < self.args.n_folds:
            rec["eval_s_extrapolated"] = self.eval_s / done * self.args.n_folds
            rec["eval_cpu_s_extrapolated"] = self.eval_cpu_s / done * self.args.n_folds
        values = [f["recall10"] for f in rec["folds"]
                  if "recall10" in f and f["recall10"] == f["recall10"]]
        rec["recall10"] = float(np.mean(values)) if values else None
        rec["peak_rss_mb_self"] = peak_rss_mb()
        with open(self.args.out, "w") as handle:
            json.dump(rec, handle, indent=1, default=_default)


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, not inherited across exec)."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def guarded(run: Run, body) -> None:
    """Run ``body()``; on an exception record it (type, message, last frame) and still write."""
    try:
        body()
        run.finish("ok")
    except Exception as exc:  # noqa: BLE001 - a peer failing is a result, not a crash
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        run.record["error"] = f"{type(exc).__name__}: {str(exc)[:300]} ({os.path.basename(tb.filename)}:{tb.lineno})"
        run.finish("error")
