"""The immutable interaction log every evaluation reads from.

An :class:`InteractionLog` holds transactions (u, i, t[, π]) as parallel numpy arrays, sorted by
(timestamp, input row order) and de-duplicated once, at construction (SPEC §1). Raw ids are
encoded as integer *codes* whose order is the SPEC §3 tie-break order of the ids (numeric order
when every id is an integer, string order otherwise), so "ties by item id ascending" is simply
"ties by code ascending" everywhere downstream. The encoding is :mod:`sweval.data.ids`, the
timestamp normalisation :mod:`sweval.data.timestamps`; this module validates, sorts and
de-duplicates, and holds the log's views, fingerprints and per-user order.

Because the arrays are time-sorted, the training data of a fold, D_t = {t' < t}, is the prefix
``[0, position(t))`` and a test window [t0, t1) is the slice ``[position(t0), position(t1))``:
folds are views, never copies.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sweval.data.errors import SwevalError, file_rows, first_rows
from sweval.data.ids import encode_ids
from sweval.data.timestamps import normalise_timestamps, warn_isolated_ends

_log = logging.getLogger(__name__)

Dedup = Literal["first", "none"]
OnInvalid = Literal["error", "drop"]

#: The stratum label of the unstratified results (SPEC §6); no policy may be called so.
ALL_STRATUM = "all"


@dataclass(frozen=True, slots=True)
class InteractionLog:
    """A time-sorted, de-duplicated interaction log.

    Attributes:
        user: user code per transaction (index into ``user_ids``).
        item: item code per transaction (index into ``item_ids``).
        timestamp: int64 epoch seconds (UTC), non-decreasing.
        policy: policy code per transaction (index into ``policy_ids``), or None.
        user_ids: raw user id per code, in tie-break order.
        item_ids: raw item id per code, in tie-break order.
        policy_ids: raw policy label per code, or None.
        source: where the log came from (a path or a name), for messages and tracking.
        n_dropped_invalid: rows dropped at load because of a missing field (``--on-invalid drop``).
        n_duplicates: rows removed by de-duplication.
        basket: basket code per transaction (index into ``basket_ids``), or None: the basket,
            order or session a transaction belongs to (``--basket-col``; only the
            ``leave-last-basket`` protocol reads it).
        basket_ids: raw basket label per code, or None.
    """

    user: NDArray[np.int64]
    item: NDArray[np.int64]
    timestamp: NDArray[np.int64]
    policy: NDArray[np.int64] | None
    user_ids: NDArray[np.generic]
    item_ids: NDArray[np.generic]
    policy_ids: NDArray[np.generic] | None
    source: str = "<frame>"
    dedup: Dedup = "first"
    n_dropped_invalid: int = 0
    n_duplicates: int = 0
    basket: NDArray[np.int64] | None = None
    basket_ids: NDArray[np.generic] | None = None
    _fingerprint: list[str] = field(default_factory=list, repr=False, compare=False)
    _user_major: list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]] = field(
        default_factory=list, repr=False, compare=False
    )
    _row_hashes: dict[bool, NDArray[np.uint64]] = field(
        default_factory=dict, repr=False, compare=False
    )

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        user_col: str = "user",
        item_col: str = "item",
        time_col: str = "timestamp",
        policy_col: str | None = None,
        time_unit: Literal["s", "ms", "us", "ns"] = "s",
        dedup: Dedup = "first",
        on_invalid: OnInvalid = "error",
        source: str = "<frame>",
        basket_col: str | None = None,
    ) -> InteractionLog:
        """Validate a frame and build the log: normalise time, check rows, sort, de-duplicate.

        Args:
            frame: one row per transaction.
            user_col, item_col, time_col: the columns holding u, i and t.
            policy_col: optional column holding the logging policy π.
            basket_col: optional column holding the basket, order or session of a transaction.
            time_unit: unit of numeric timestamps: s, ms, us or ns.
            dedup: ``first`` keeps the earliest (u, i) transaction (ties by row order);
                ``none`` keeps repeats.
            on_invalid: ``error`` rejects rows with a missing user, item or timestamp, naming
                them; ``drop`` drops them and records how many.
            source: a name for messages (usually the file path).

        Raises:
            SwevalError: naming the file, column and rows of any problem.
        """
        wanted = {"user": user_col, "item": item_col, "time": time_col}
        if policy_col is not None:
            wanted["policy"] = policy_col
        if basket_col is not None:
            wanted["basket"] = basket_col
        shared = {col for col in wanted.values() if list(wanted.values()).count(col) > 1}
        if shared:
            roles = [role for role, col in wanted.items() if col in shared]
            raise SwevalError(
                f"{source}: column(s) {', '.join(map(repr, sorted(shared)))} given for several "
                f"roles ({', '.join(roles)}); each role needs its own column (--user-col, "
                "--item-col, --time-col, --policy-col, --basket-col)."
            )
        missing = [col for col in wanted.values() if col not in frame.columns]
        if missing:
            raise SwevalError(
                f"{source}: missing column(s) {', '.join(repr(c) for c in missing)}; "
                f"the data has columns {_first_columns(frame.columns)}. "
                "Map them with --user-col/--item-col/--time-col/--policy-col/--basket-col."
            )
        if len(frame) == 0:
            raise SwevalError(f"{source}: the log is empty (no data rows).")
        # Row numbers in messages count the input's data rows, also after dropping invalid ones.
        frame = frame.reset_index(drop=True)

        users = frame[user_col]
        items = frame[item_col]
        times = frame[time_col]
        invalid = users.isna().to_numpy() | items.isna().to_numpy() | times.isna().to_numpy()
        if policy_col is not None:
            invalid |= frame[policy_col].isna().to_numpy()
        if basket_col is not None:
            invalid |= frame[basket_col].isna().to_numpy()
        n_invalid = int(invalid.sum())
        if n_invalid:
            rows = np.flatnonzero(invalid)
            columns = [c for c in wanted.values() if frame[c].isna().any()]
            if on_invalid == "error":
                raise SwevalError(
                    f"{source}: {n_invalid} row(s) have a missing value in column(s) "
                    f"{', '.join(repr(c) for c in columns)} (data rows {first_rows(rows)}). "
                    "Fix the file or pass --on-invalid drop to drop them."
                )
            _log.warning("%s: dropped %d row(s) with missing values", source, n_invalid)
            keep = ~invalid
            users, items, times = users[keep], items[keep], times[keep]
            policies = frame[policy_col][keep] if policy_col is not None else None
            baskets = frame[basket_col][keep] if basket_col is not None else None
            if keep.sum() == 0:
                raise SwevalError(f"{source}: every row has a missing value; nothing is left.")
        else:
            policies = frame[policy_col] if policy_col is not None else None
            baskets = frame[basket_col] if basket_col is not None else None

        seconds = normalise_timestamps(times, time_unit=time_unit, source=source, column=time_col)
        user_codes, user_ids = encode_ids(users, source=source, column=user_col)
        item_codes, item_ids = encode_ids(items, source=source, column=item_col)
        if policies is not None:
            labels = policies.astype(str)
            reserved = np.flatnonzero((labels == ALL_STRATUM).to_numpy())
            if len(reserved):
                raise SwevalError(
                    f"{source}: column {policy_col!r} has the policy {ALL_STRATUM!r} (data rows "
                    f"{first_rows(file_rows(labels, reserved))}), the name of the unstratified "
                    "results: rename that policy."
                )
            policy_codes, policy_ids = encode_ids(labels)
        else:
            policy_codes, policy_ids = None, None
        basket_codes, basket_ids = (encode_ids(baskets.astype(str)) if baskets is not None
                                    else (None, None))

        order = np.argsort(seconds, kind="stable")  # ties keep input row order
        user_codes, item_codes, seconds = user_codes[order], item_codes[order], seconds[order]
        if policy_codes is not None:
            policy_codes = policy_codes[order]
        if basket_codes is not None:
            basket_codes = basket_codes[order]

        warn_isolated_ends(seconds, order, times, source=source, column=time_col)

        n_duplicates = 0
        if dedup == "first":
            from sweval.data.first_seen import first_pair_mask  # numba: imported on use

            # the first row of every (user, item) pair, in time order
            keep_first = first_pair_mask(user_codes, item_codes, len(user_ids), len(item_ids))
            n_duplicates = len(user_codes) - int(keep_first.sum())
            if n_duplicates:
                user_codes, item_codes = user_codes[keep_first], item_codes[keep_first]
                seconds = seconds[keep_first]
                if policy_codes is not None:
                    policy_codes = policy_codes[keep_first]
                if basket_codes is not None:
                    basket_codes = basket_codes[keep_first]
        elif dedup != "none":
            raise SwevalError(f"unknown dedup rule {dedup!r}: use 'first' or 'none'.")

        arrays = [user_codes, item_codes, seconds] + [
            codes for codes in (policy_codes, basket_codes) if codes is not None
        ]
        for array in arrays:
            array.setflags(write=False)
        return cls(
            user=user_codes,
            item=item_codes,
            timestamp=seconds,
            policy=policy_codes,
            user_ids=user_ids,
            item_ids=item_ids,
            policy_ids=policy_ids,
            source=source,
            dedup=dedup,
            n_dropped_invalid=n_invalid,
            n_duplicates=n_duplicates,
            basket=basket_codes,
            basket_ids=basket_ids,
        )

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return len(self.timestamp)

    @property
    def n_users(self) -> int:
        """Number of distinct users in the whole log (the size of the code space)."""
        return len(self.user_ids)

    @property
    def n_items(self) -> int:
        """Number of distinct items in the whole log (the size of the code space)."""
        return len(self.item_ids)

    @property
    def t_min(self) -> int:
        return int(self.timestamp[0])

    @property
    def t_max(self) -> int:
        return int(self.timestamp[-1])

    def position(self, t: int) -> int:
        """Number of transactions strictly before ``t`` (so ``[0, position(t))`` is D_t)."""
        return int(np.searchsorted(self.timestamp, t, side="left"))

    def fingerprint(self) -> str:
        """A short content hash of the log (codes, ids, times, policies), for resume and tracking."""
        if not self._fingerprint:
            digest = hashlib.sha256()
            for array in (self.user, self.item, self.timestamp):
                digest.update(np.ascontiguousarray(array).tobytes())
            if self.policy is not None:
                digest.update(np.ascontiguousarray(self.policy).tobytes())
                digest.update("\x1f".join(map(str, self.policy_ids)).encode())
            digest.update("\x1f".join(map(str, self.user_ids)).encode())
            digest.update("\x1f".join(map(str, self.item_ids)).encode())
            self._fingerprint.append(digest.hexdigest()[:16])
        return self._fingerprint[0]

    def prefix_fingerprints(
        self, times: Sequence[int], *, policies: bool = True
    ) -> dict[int, str]:
        """Per time t, a content hash of the transactions before t: ``{t: hash of D_t}``.

        Only raw ids, timestamps and (with ``policies``, where the log has them) policies are
        hashed, row by row in log order, never codes: codes shift when new ids arrive, raw ids
        do not. So D_t hashes alike in a log and in the same log grown by later transactions (a
        fold's numbers depend only on what lies before its end). Without ``policies`` a log read
        with a policy column hashes as the same log read without one: for splits whose numbers
        do not read the policies. One pass over the log for all the times.
        """
        with_policies = policies and self.policy is not None and self.policy_ids is not None
        if with_policies not in self._row_hashes:
            columns = [
                pd.util.hash_array(np.asarray(self.user_ids))[self.user],
                pd.util.hash_array(np.asarray(self.item_ids))[self.item],
                self.timestamp.astype(np.uint64),
            ]
            if with_policies:
                columns.append(pd.util.hash_array(np.asarray(self.policy_ids))[self.policy])
            self._row_hashes[with_policies] = np.ascontiguousarray(np.column_stack(columns))
        rows = self._row_hashes[with_policies]
        digest = hashlib.sha256(f"{rows.shape[1]}".encode())
        done = 0
        found: dict[int, str] = {}
        for t in sorted(set(int(t) for t in times)):
            end = self.position(t)
            digest.update(rows[done:end].tobytes())
            done = end
            copy = digest.copy()
            copy.update(f"\x1f{end}".encode())
            found[t] = copy.hexdigest()[:16]
        return found

    def user_major(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """(position, user, item) of every transaction, sorted by (user, item, position).

        Computed once and kept. The transactions of any time range [lo, hi), taken from these
        in order (``lo <= position < hi``), come grouped by user with items ascending: what a
        training CSR is made of, without a sort per fold.

        Fold tasks call this from several threads at once. The memo is filled with a single
        ``append`` of the finished tuple (atomic under the GIL); threads that raced each append
        an equal tuple and all read the first.
        """
        if not self._user_major:
            key = self.user * np.int64(max(self.n_items, 1)) + self.item
            order = np.argsort(key, kind="stable")
            arrays = (order, self.user[order], self.item[order])
            for array in arrays:
                array.setflags(write=False)
            self._user_major.append(arrays)
        return self._user_major[0]

    def to_frame(self) -> pd.DataFrame:
        """The log as a frame with raw ids (``user``, ``item``, ``timestamp``[, ``policy``])."""
        frame = pd.DataFrame(
            {
                "user": self.user_ids[self.user],
                "item": self.item_ids[self.item],
                "timestamp": self.timestamp,
            }
        )
        if self.policy is not None and self.policy_ids is not None:
            frame["policy"] = self.policy_ids[self.policy]
        if self.basket is not None and self.basket_ids is not None:
            frame["basket"] = self.basket_ids[self.basket]
        return frame

    def restrict(self, mask: NDArray[np.bool_]) -> InteractionLog:
        """A sub-log of the transactions where ``mask`` is true, sharing the id spaces.

        Used for policy strata (SPEC §6 mode ``subset``): codes and ids stay the same, so
        results remain comparable across strata.
        """
        def take(array: NDArray[np.int64]) -> NDArray[np.int64]:
            out = array[mask]
            out.setflags(write=False)
            return out

        return InteractionLog(
            user=take(self.user),
            item=take(self.item),
            timestamp=take(self.timestamp),
            policy=take(self.policy) if self.policy is not None else None,
            basket=take(self.basket) if self.basket is not None else None,
            basket_ids=self.basket_ids,
            user_ids=self.user_ids,
            item_ids=self.item_ids,
            policy_ids=self.policy_ids,
            source=self.source,
            dedup=self.dedup,
        )


# ---------------------------------------------------------------------- helpers
def _first_columns(columns: pd.Index, shown: int = 20) -> str:
    """The first ``shown`` column names, for messages (a wrongly read file can have thousands)."""
    names = list(map(str, columns))
    more = f" and {len(names) - shown:,} more" if len(names) > shown else ""
    return f"{names[:shown]}{more}"
