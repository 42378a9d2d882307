"""The catalogue of bad and edge inputs: one row per case, one test per row (docs/reliability.md).

Every case either fails with one clear :class:`SwevalError` (the CLI prints it as one red line,
exit status 2) whose message names the file, the column and the rows where that applies, or has
a documented behaviour that a check below verifies. None may raise anything else (a traceback)
or produce a silently wrong number.

Most cases run in-process through ``data.loaders.load_log`` or ``evaluators.run.plan.evaluate_config``; a
handful go through the real command line (``python -m sweval.flows.cli.app run --no-prefect``).

The table in docs/reliability.md is generated from ``CASES``::

    PYTHONPATH=tests .venv/bin/python tests/reliability/test_catalogue.py   # prints the table
"""

from __future__ import annotations

import builtins
import gzip
import io
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY, REPO, T0, use_plugins, write_dist_info

from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.experiments.gap import GapDesign
from sweval.evaluators.run.evaluate import evaluate_config
from sweval.flows.cli.compare import run_compare
from sweval.flows.cli.gap import run_gap

DOCS = REPO / "docs" / "reliability.md"
#: The run options of every "run" case (a case's options override them).
RUN_DEFAULTS: dict[str, Any] = {
    "window": "1D", "folds": 4, "u_min": 2, "k": [5, 10], "algorithms": ["pop", "pop-n"],
    "params": {"pop-n": {"n_recent": 50}}, "progress": False, "tracking": False,
}


# ------------------------------------------------------------------------------------ inputs
def small_frame(seed: int = 0) -> pd.DataFrame:
    """6 days from 2024-01-01: 20 users, 15 items, distinct timestamps, in time order."""
    rng = np.random.default_rng(seed)
    rows = []
    for day in range(6):
        seconds = rng.choice(DAY, size=60, replace=False)
        slot = 0
        for user in range(20):
            if rng.random() < 0.5:
                continue
            for _ in range(int(rng.integers(1, 4))):
                rows.append((f"u{user}", f"i{int(rng.integers(0, 15))}", T0 + day * DAY + int(seconds[slot])))
                slot += 1
    frame = pd.DataFrame(rows, columns=["user", "item", "timestamp"])
    return frame.sort_values("timestamp", kind="stable").reset_index(drop=True)


def csv(frame: pd.DataFrame | Callable[[], pd.DataFrame], name: str = "log.csv") -> Callable[[Path], Path]:
    """A builder writing ``frame`` as CSV."""

    def build(tmp: Path) -> Path:
        path = tmp / name
        (frame() if callable(frame) else frame).to_csv(path, index=False)
        return path

    return build


def text(content: str | bytes, name: str = "log.csv") -> Callable[[Path], Path]:
    """A builder writing raw text or bytes."""

    def build(tmp: Path) -> Path:
        path = tmp / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return build


def parquet(frame: pd.DataFrame, name: str = "log.parquet") -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        path = tmp / name
        frame.to_parquet(path, index=False)
        return path

    return build


#: Ids beyond 2**53 in a float column (a missing cell made it one): 2**53 + 1 is already 2**53.
HUGE_FLOAT_IDS = pd.DataFrame({
    "user": [float(2**53 + 1), float(2**53), float("nan")], "item": ["i1", "i1", "i1"],
    "timestamp": [1704067200, 1704067201, 1704067202],
})


def rows(*lines: str) -> str:
    return "user,item,timestamp\n" + "".join(f"{line}\n" for line in lines)


def _gzip_truncated(tmp: Path) -> Path:
    path = tmp / "log.csv.gz"
    whole = gzip.compress(rows(*[f"u{i % 7},i{i % 5},{T0 + i}" for i in range(5000)]).encode())
    path.write_bytes(whole[: len(whole) // 2])
    return path


def _gzip_without_suffix(tmp: Path) -> Path:
    path = tmp / "log.csv"
    path.write_bytes(gzip.compress(small_frame().to_csv(index=False).encode()))
    return path


def _directory(tmp: Path) -> Path:
    path = tmp / "log.csv"
    path.mkdir()
    (path / "_SUCCESS").touch()
    return path


def _unreadable(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """chmod 000; as root (who reads anything) opening the file fails as it would for a user."""
    path = csv(small_frame())(tmp)
    path.chmod(0)
    if os.geteuid() == 0:
        real_open = builtins.open

        def denying_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(file, str | os.PathLike) and Path(file) == path:
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", denying_open)
    return path


def _parent_not_enterable(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file in a directory without search permission (simulated for root, who may enter it)."""
    locked = tmp / "locked"
    locked.mkdir()
    path = csv(small_frame())(locked)
    locked.chmod(0o600)
    if os.geteuid() == 0:
        real_stat = pathlib.Path.stat

        def denying_stat(self: pathlib.Path, *args: Any, **kwargs: Any) -> Any:
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real_stat(self, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, "stat", denying_stat)
    return path


# ------------------------------------------------------------------------------------ checks
def recall_at(outputs: Any, k: int, algorithm: str = "pop") -> pd.Series:
    frame = outputs.results
    part = frame[(frame["algorithm"] == algorithm) & (frame["metric"] == "recall") & (frame["k"] == k)]
    return part.set_index("fold")["value"]


def expected_full_list_recall(frame: pd.DataFrame, fold_start: int, width: int) -> float:
    """Recall when the list holds every candidate: |Rel_u ∩ (D_t items − seen_u)| / |Rel_u|."""
    frame = frame.sort_values("timestamp", kind="stable").drop_duplicates(["user", "item"])
    train = frame[frame["timestamp"] < fold_start]
    test = frame[(frame["timestamp"] >= fold_start) & (frame["timestamp"] < fold_start + width)]
    catalogue = set(train["item"])
    values = []
    for user, relevant in test.groupby("user")["item"]:
        seen = set(train.loc[train["user"] == user, "item"])
        if not seen:
            continue  # no history: not eligible
        relevant = set(relevant)
        values.append(len(relevant & (catalogue - seen)) / len(relevant))
    return float(np.mean(values))


def check_no_p_value_below_five_folds(outputs: Any, ctx: Context) -> None:
    from sweval.evaluators.stats.significance import NO_POWER

    table = outputs.significance
    assert len(table) and (table["n_folds"] < 5).all()
    assert table["p_value"].isna().all() and table["p_holm"].isna().all()
    assert (table["note"] == NO_POWER).all()


def check_k_above_catalogue(outputs: Any, ctx: Context) -> None:
    frame = small_frame()
    got = recall_at(outputs, 1000)
    folds = outputs.folds.set_index("fold")
    assert not folds["skipped"].any()
    for fold, value in got.items():
        expected = expected_full_list_recall(frame, int(folds.loc[fold, "t_start"]), DAY)
        assert value == pytest.approx(expected, abs=1e-12), fold
    hit = outputs.results[(outputs.results["metric"] == "hit_rate")]["value"]
    assert ((hit >= 0) & (hit <= 1)).all()


def check_all_folds_skipped(reason: str) -> Callable[[Any, Context], None]:
    def check(outputs: Any, ctx: Context) -> None:
        assert outputs.folds["skipped"].all()
        assert outputs.folds["skip_reason"].str.contains(reason, regex=False).all()
        assert outputs.results["skipped"].all() and outputs.results["value"].isna().all()
        assert (outputs.summary["n_folds"] == 0).all()
        assert (outputs.summary["n_skipped"] == len(outputs.folds)).all()
        assert outputs.summary["mean"].isna().all()
        assert (Path(ctx.output) / "results.csv").exists()

    return check


def check_zero_eligible_fold_skipped(outputs: Any, ctx: Context) -> None:
    folds = outputs.folds
    empty = folds[folds["n_eligible"] == 0]
    assert len(empty) >= 2
    assert empty["skipped"].all()
    assert empty["skip_reason"].str.contains("n_eligible=0: no user").all()
    used = int((~folds["skipped"]).sum())
    summary = outputs.summary
    assert (summary["n_folds"] == used).all()
    assert (summary["n_folds"] + summary["n_skipped"] == len(folds)).all()
    assert outputs.results.loc[~outputs.results["skipped"], "value"].notna().all()


def check_same_results_as_plain(variant: str) -> Callable[[Any, Context], None]:
    """The run equals the one on the plain, sorted, duplicate-free log, byte for byte."""

    def check(outputs: Any, ctx: Context) -> None:
        plain = ctx.tmp / "plain.csv"
        small_frame().to_csv(plain, index=False)
        reference = evaluate_config(ctx.config(data=str(plain), output=str(ctx.tmp / "plain-out")))
        ours = pd.read_csv(Path(ctx.output) / "results.csv", dtype=str, keep_default_na=False)
        ref = pd.read_csv(ctx.tmp / "plain-out" / "results.csv", dtype=str, keep_default_na=False)
        # config_hash = hash of the options (the data path differs) + the data's fingerprint
        assert (ours["config_hash"].str.split("-").str[1] == ref["config_hash"].str.split("-").str[1]).all()
        columns = [c for c in ours.columns if c != "config_hash"]
        assert ours[columns].equals(ref[columns]), variant  # every other cell, as text
        record = json.loads((Path(ctx.output) / "config.json").read_text())
        if variant == "duplicates":
            once = small_frame()
            removed = 2 * len(once) - len(once.drop_duplicates(["user", "item"]))
            assert record["data"]["n_duplicates_removed"] == removed
        assert not reference.folds["skipped"].all()

    return check


def check_negative_timestamps(outputs: Any, ctx: Context) -> None:
    shift = 20_000 * DAY  # a whole number of windows: same alignment, values unchanged
    plain = ctx.tmp / "plain.csv"
    small_frame().to_csv(plain, index=False)
    reference = evaluate_config(ctx.config(data=str(plain), output=str(ctx.tmp / "plain-out")))
    ours, ref = outputs.results, reference.results
    assert (ours["t_start"] < 0).all() and (ours["t_start"] % DAY == 0).all()
    assert (ours["t_start"] == ref["t_start"] - shift).all()
    pd.testing.assert_series_equal(ours["value"], ref["value"])
    assert (ours["n_eligible"] == ref["n_eligible"]).all()


def check_timestamps(expected: list[int]) -> Callable[[Any, Context], None]:
    def check(log: Any, ctx: Context) -> None:
        assert sorted(log.timestamp.tolist()) == expected

    return check


def check_ids(column: str, expected: list[Any], n_rows: int | None = None) -> Callable[[Any, Context], None]:
    def check(log: Any, ctx: Context) -> None:
        ids = (log.user_ids if column == "user" else log.item_ids).tolist()
        assert ids == expected
        assert [type(v) for v in ids] == [type(v) for v in expected]
        if n_rows is not None:
            assert len(log) == n_rows

    return check


def check_loads_like_plain(log: Any, ctx: Context) -> None:
    plain = ctx.tmp / "plain.csv"
    small_frame().to_csv(plain, index=False)
    assert log.fingerprint() == load_log(plain).fingerprint()


def check_unicode_run(outputs: Any, ctx: Context) -> None:
    from sweval.data.loaders import load_log as load

    log = load(ctx.data)
    users = log.user_ids.tolist()
    assert users == sorted(users)  # code-point order
    assert {"Zoë", "用户", "😀"} <= set(users)
    assert not outputs.results.loc[~outputs.results["skipped"], "value"].isna().any()


def check_stratum_group_without_users(outputs: Any, ctx: Context) -> None:
    frame = outputs.results
    empty = frame[(frame["stratum"] == "B") & (frame["n_users"] == 0)]
    assert len(empty) > 0
    assert empty["skipped"].all() and empty["value"].isna().all()
    assert empty["skip_reason"].str.contains("n_users=0").all()
    summary = outputs.summary[outputs.summary["stratum"] == "B"]
    assert (summary["n_folds"] + summary["n_skipped"] == len(outputs.folds)).all()


def check_policy_dropped(log: Any, ctx: Context) -> None:
    assert log.n_dropped_invalid == 1 and len(log) == 2
    assert log.policy_ids.tolist() == ["A"]


def check_train_window_longer_than_history(outputs: Any, ctx: Context) -> None:
    reference = evaluate_config(ctx.config(output=str(ctx.tmp / "expanding"), train_window=None))
    pd.testing.assert_series_equal(outputs.results["value"], reference.results["value"])


def policy_frame() -> pd.DataFrame:
    """Policy A users every day; policy B users only on the first day (no B test users later)."""
    rows_ = []
    for day in range(4):
        for user in range(6):
            rows_.append((f"a{user}", f"i{(user + day) % 5}", T0 + day * DAY + user * 10, "A"))
    for user in range(3):
        rows_.append((f"b{user}", f"i{user}", T0 + 5 + user, "B"))
    return pd.DataFrame(rows_, columns=["user", "item", "timestamp", "policy"])


def shifted(frame: pd.DataFrame, seconds: int) -> pd.DataFrame:
    return frame.assign(timestamp=frame["timestamp"] + seconds)


def with_users(frame: pd.DataFrame, users: list[str]) -> pd.DataFrame:
    mapping = {f"u{i}": name for i, name in enumerate(users)}
    return frame.assign(user=frame["user"].map(lambda u: mapping.get(u, u)))


def _plugin_entry_points(entry_points: dict[str, str]) -> Callable[[Path, pytest.MonkeyPatch], Path]:
    """The plain log, with a plugin package declaring ``entry_points`` installed for the test."""

    def build(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        write_dist_info(tmp / "site", "bad-plugin", "1.0", entry_points)
        use_plugins(monkeypatch, tmp / "site")
        return PLAIN(tmp)

    return build


FAILING_PLUGIN = (
    "from sweval.algorithms import Algorithm\n\n\n"
    "class FailsInFit(Algorithm):\n"
    "    def _fit(self, train):\n"
    "        raise RuntimeError('plugin bug')\n"
)


def _failing_plugin(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp / "plugins").mkdir()
    (tmp / "plugins" / "failing_plugin.py").write_text(FAILING_PLUGIN)
    use_plugins(monkeypatch, tmp / "plugins")
    return PLAIN(tmp)


def _load_warnings(ctx: Context) -> list[str]:
    """The warnings of loading the case's log."""
    import logging

    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("sweval")
    logger.addHandler(handler)
    try:
        load_log(ctx.data, **ctx.options)
    finally:
        logger.removeHandler(handler)
    return [record.getMessage() for record in records]


def _equal(found: Any, expected: Any) -> None:
    assert found == expected, found


def check_warned(pattern: str) -> Callable[[list[str], Context], None]:
    """One warning matches ``pattern`` (``{file}`` = the data path); its data row, when the
    pattern captures one, is the file's last."""

    def check(warnings: list[str], ctx: Context) -> None:
        regex = pattern.replace("{file}", re.escape(str(ctx.data)))
        found = [re.search(regex, message) for message in warnings]
        found = [match for match in found if match]
        assert len(found) == 1, warnings
        if found[0].groups():
            assert int(found[0].group(1)) == len(pd.read_csv(ctx.data))

    return check


def _leakage(ctx: Context, *, start: int, periods: int) -> Any:
    from sweval.evaluators.experiments.leakage import SeverityDesign
    from sweval.flows.cli.leakage import run_leakage

    return run_leakage(ctx.config(), SeverityDesign(test_start=start, period_s=DAY,
                                                    periods=periods), output=ctx.tmp / "leak")


def check_plugin_failed_alone(outputs: Any, ctx: Context) -> None:
    used = sorted(int(f) for f in outputs.folds.loc[~outputs.folds["skipped"], "fold"])
    assert used
    assert [(f.fold, f.label, f.error) for f in outputs.failed] == [
        (fold, "failing_plugin:FailsInFit", "RuntimeError: plugin bug") for fold in used]
    results = pd.read_csv(Path(ctx.output) / "results.csv")
    assert set(results.loc[~results["skipped"], "algorithm"]) == {"pop"}
    assert results.loc[~results["skipped"], "value"].notna().all()


# ------------------------------------------------------------------------------------ the table
@dataclass(frozen=True)
class Case:
    """One row of the catalogue.

    Attributes:
        id: the case's name (the pytest id and the docs row).
        input: what is fed in (for the docs).
        behaviour: what SW-EVAL does (for the docs).
        build: writes the input under a temporary directory, returns the data path; builders
            taking a second argument get the test's monkeypatch.
        via: ``load`` (load_log), ``run`` (evaluate_config on an EvalConfig), ``config``
            (EvalConfig.build only) or ``call`` (``call(ctx)``: the experiments' commands).
        options: load_log keyword arguments, or EvalConfig fields over RUN_DEFAULTS.
        error: a regex the SwevalError message must match (``{file}`` = the data path).
        check: ``check(result, ctx)`` for cases that succeed.
    """

    id: str
    input: str
    behaviour: str
    build: Callable[..., Path | None] | None = None
    via: str = "load"
    options: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    check: Callable[[Any, Context], None] | None = None
    call: Callable[[Context], Any] | None = None


@dataclass
class Context:
    tmp: Path
    data: Path | None
    output: str
    options: dict[str, Any]

    def config(self, **overrides: Any) -> EvalConfig:
        values = RUN_DEFAULTS | {"data": str(self.data) if self.data else None, "output": self.output}
        values |= self.options
        values |= overrides
        return EvalConfig.build(**{k: v for k, v in values.items() if v is not None or k == "train_window"})


PLAIN = csv(small_frame)


def _semicolons(tmp: Path) -> Path:
    path = tmp / "log.csv"
    small_frame().to_csv(path, index=False, sep=";")
    return path

def thirds(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """``frame`` cut into three consecutive pieces."""
    cuts = [0, len(frame) // 3, 2 * len(frame) // 3, len(frame)]
    return [frame.iloc[a:b] for a, b in itertools.pairwise(cuts)]


def _spark_parquet_parts(tmp: Path) -> Path:
    """What Spark's ``df.write.parquet(dir)`` leaves: snappy parts, ``_SUCCESS``, ``.crc`` files."""
    directory = tmp / "events"
    directory.mkdir()
    for number, part in enumerate(thirds(small_frame())):
        name = f"part-{number:05d}-c0ffee-c000.snappy.parquet"
        part.to_parquet(directory / name, index=False)
        (directory / f".{name}.crc").write_bytes(b"\x00crc")
    (directory / "_SUCCESS").touch()
    return directory


def _csv_parts(tmp: Path, *, empty_part: bool = True) -> Path:
    """Gzipped CSV parts with a header each, one part with no row (an empty partition)."""
    directory = tmp / "events"
    directory.mkdir()
    for number, part in enumerate(thirds(small_frame())):
        path = directory / f"part-{number:05d}.csv.gz"
        path.write_bytes(gzip.compress(part.to_csv(index=False).encode()))
    if empty_part:
        (directory / "part-00003.csv.gz").write_bytes(gzip.compress(b""))
    return directory


def _glob_of_csv_parts(tmp: Path) -> Path:
    directory = _csv_parts(tmp)
    (directory / "README.md").write_text("not a part")
    return directory / "part-*.csv.gz"


def _parts(*frames: pd.DataFrame, suffix: str = ".parquet") -> Callable[[Path], Path]:
    """A directory of parts ``part-0000N<suffix>``, one per frame."""

    def build(tmp: Path) -> Path:
        directory = tmp / "events"
        directory.mkdir()
        for number, frame in enumerate(frames):
            path = directory / f"part-{number:05d}{suffix}"
            if suffix == ".parquet":
                frame.to_parquet(path, index=False)
            else:
                frame.to_csv(path, index=False)
        return directory

    return build


def _parts_in_zones(tmp: Path) -> Path:
    """Two Parquet parts, one naive (UTC) and one written in Europe/Brussels."""
    zoned = pd.DataFrame({"user": ["u2"], "item": ["i1"],
                          "timestamp": pd.to_datetime(["2024-01-01 01:00:00"]).tz_localize("Europe/Brussels")})
    naive = pd.DataFrame({"user": ["u1"], "item": ["i1"], "timestamp": pd.to_datetime(["2024-01-01 00:00:00"])})
    return _parts(naive, zoned)(tmp)


def _xz_short_row(tmp: Path) -> Path:
    import lzma

    path = tmp / "log.csv.xz"
    text = ("user,item,timestamp,note\nu1,i1,1704067200,\nu2,i2,1704067201," + "x" * 200_000
            + "\nu1,1704067202,4\n")
    path.write_bytes(lzma.compress(text.encode()))
    return path


def _parquet_with_user_twice(tmp: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp / "log.parquet"
    pq.write_table(pa.table([pa.array(["u1"]), pa.array(["i1"]), pa.array([T0]), pa.array(["x"])],
                            names=["user", "item", "timestamp", "user"]), path)
    return path


def _jsonl(tmp: Path, name: str = "log.jsonl", bom: bool = False) -> Path:
    path = tmp / name
    data = ("\ufeff" if bom else "") + small_frame().to_json(orient="records", lines=True)
    path.write_bytes(gzip.compress(data.encode()) if name.endswith(".gz") else data.encode())
    return path


def _fixed_offset_parquet(tmp: Path) -> Path:
    """A pyarrow ``timestamp[ms, tz=-05:00]`` column: 2023-12-31T19:00-05:00 is T0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp / "log.parquet"
    stamps = pa.array([(T0 + 60) * 1000, T0 * 1000], type=pa.timestamp("ms", tz="-05:00"))
    pq.write_table(pa.table({"user": ["u1", "u2"], "item": ["i1", "i1"], "timestamp": stamps}), path)
    return path


#: (before, after) an id: Unicode white space and invisible characters as web pages, spreadsheets
#: and editors leave them around text.
UNICODE_PADDING = [("", ""), ("\u00a0", ""), ("", "\u2007"), ("\u202f", "\u3000"), ("\u200b", ""),
                   ("\ufeff", ""), ("", "\u200e"), (" \u200b", "\u00a0 ")]


def _padded_rows() -> dict[str, list[Any]]:
    """The user ``u1`` once with each padding of :data:`UNICODE_PADDING`, one row per padding."""
    return {"user": [f"{pad}u1{end}" for pad, end in UNICODE_PADDING],
            "item": [f"i{n}" for n in range(len(UNICODE_PADDING))],
            "timestamp": [T0 + n for n in range(len(UNICODE_PADDING))]}


class _PipedStdin(io.TextIOWrapper):
    """Standard input fed by a pipe (not a terminal), holding ``data``."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))

    def isatty(self) -> bool:
        return False


def _stdin(data: bytes | Callable[[], bytes], *, tty: bool = False) -> Callable[[Path, pytest.MonkeyPatch], Path]:
    """``--data -`` in a process that has read no stream yet, its standard input holding ``data``
    (a terminal with ``tty``)."""

    def build(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        from sweval.data import streams

        monkeypatch.setattr(streams, "_COPIES", {})
        monkeypatch.setattr(streams, "_NAMES", {})
        stdin = _PipedStdin(data() if callable(data) else data)
        if tty:
            monkeypatch.setattr(stdin, "isatty", lambda: True)
        monkeypatch.setattr(sys, "stdin", stdin)
        return Path("-")

    return build


def _process_substitution(tmp: Path) -> Path:
    """A named pipe that a thread fills once with the gzipped log, as ``<(zcat log.csv.gz)``."""
    import threading

    fifo = tmp / "63"
    os.mkfifo(fifo)
    data = gzip.compress(small_frame().to_csv(index=False).encode())
    threading.Thread(target=fifo.write_bytes, args=(data,), daemon=True).start()
    return fifo


def check_read_from_stdin(log: Any, ctx: Context) -> None:
    assert log.source == "<stdin>"
    check_loads_like_plain(log, ctx)


#: A semicolon file whose last column name holds more commas than the header has semicolons.
COMMAS_IN_A_NAME = "user;item;timestamp;rating (1,2,3,4,5)\nu1;i1;1704067200;4\nu2;i1;1704067201;5\n"


CASES: list[Case] = [
    # ---------------------------------------------------------------- files
    Case("file-missing", "a path that does not exist",
         "error: no such file or dataset (lists the bundled and fetchable ones)",
         lambda tmp: tmp / "nope.csv", error=r"{file}: no such file or dataset"),
    Case("file-is-directory", "a directory without any log file (only `_SUCCESS`)",
         "error: the directory holds no part file (a directory is read as part files, below)",
         _directory, error=r"{file}: the directory holds no part file"),
    Case("file-unreadable", "a file without read permission (chmod 000)",
         "error: the file is not readable", _unreadable, error=r"{file}: the file is not readable"),
    Case("file-parent-unreadable", "a file in a directory that may not be entered",
         "error: cannot access the file (permission denied)", _parent_not_enterable,
         error=r"{file}: cannot access the file \(.*Permission denied"),
    Case("file-empty", "a 0-byte file", "error: the file is empty", text(b""),
         error=r"{file}: the file is empty"),
    Case("file-blank-lines", "only empty lines", "error: the file is empty", text("\n\n\n"),
         error=r"{file}: the file is empty"),
    Case("file-header-only", "a header and no data row", "error: the log is empty (no data rows)",
         text(rows()), error=r"{file}: the log is empty \(no data rows\)"),
    Case("gzip-corrupt", "`.csv.gz` that is not gzip data",
         "error: cannot read the file (not a gzipped file); is it a corrupt gzip?",
         text(b"\x1f\x8b\x08\x00garbage", name="log.csv.gz"), error=r"{file}: cannot .*gzip"),
    Case("gzip-truncated", "a gzip file cut in half (interrupted download)",
         "error: corrupt or truncated gzip", _gzip_truncated,
         error=r"{file}: cannot parse as csv: corrupt or truncated gzip"),
    Case("gzip-without-suffix", "gzip data in a file named `.csv`",
         "recognised by its magic bytes and read like the plain file", _gzip_without_suffix,
         check=check_loads_like_plain),
    Case("stream-stdin-gzip", "`--data -` with a gzipped CSV piped in (`cat log.csv.gz | sweval run --data -`)",
         "read once into a temporary copy, gzip known by content, like the file; the log's source is `<stdin>`",
         _stdin(lambda: gzip.compress(small_frame().to_csv(index=False).encode())), check=check_read_from_stdin),
    Case("stream-stdin-errors", "`--data -` with a row of more fields than the header piped in",
         "error naming `<stdin>`, never the temporary copy",
         _stdin(rows("u1,i1,1704067200,9", "u2,i1,1704067201").encode()),
         error=r"^<stdin>: line 2 \(data row 1\) has 4 fields where the header has 3"),
    Case("stream-stdin-terminal", "`--data -` typed at a terminal, nothing piped in",
         "error at once (instead of waiting for the log to be typed): pipe the log in or pass its path",
         _stdin(b"", tty=True), error=r"--data - reads the log from standard input, which is a terminal here"),
    Case("stream-process-substitution", "a pipe such as `--data <(zcat log.csv.gz)` (`/dev/fd/63`) or a named pipe",
         "read once into a temporary copy (a pipe cannot be read twice), like the file", _process_substitution,
         check=check_loads_like_plain),
    Case("text-not-utf8", "Latin-1 bytes in a CSV", "error: not UTF-8 text; convert the file",
         text("user,item,timestamp\nJos\xe9,i1,1704067200\n".encode("latin-1")),
         error=r"{file}: cannot parse as csv: not UTF-8 text"),
    Case("text-ragged-rows", "a data row with more fields than the header",
         "error: names the line, its data row and both field counts", text(rows("u1,i1,1704067200", "u1,i2,1704067201,x,y")),
         error=r"{file}: line 3 \(data row 2\) has 5 fields where the header has 3: a separator inside a value"),
    Case("text-ragged-first-row", "the first data row with more fields than the header",
         "error: the same (pandas would take the surplus for an index and shift every column)",
         text(rows("u1,i1,1704067200,9", "u1,i2,1704067201")),
         error=r"{file}: line 2 \(data row 1\) has 4 fields where the header has 3: a separator inside a value"),
    Case("text-short-row", "a data row with fewer fields than the header (`u1,1704067201,4` under `user,item,timestamp,rating`)",
         "accepted with a warning naming the line, its data row and both field counts (pandas fills the row from the right: "
         "harmless for an optional last field, a shift when a middle value was left out)",
         text("user,item,timestamp,rating\nu1,i1,1704067200,5\nu1,1704067201,4\nu2,i2,1704067202,3\n"),
         via="call", call=lambda ctx: _load_warnings(ctx), check=check_warned(
             r"{file}: 1 row\(s\) have fewer fields than the header \(line 3 \(data row 2\): 3 of 4\): pandas fills")),
    Case("text-trailing-separators", "a header ending in a separator (`user,item,timestamp,`), rows without it, an empty last field on some",
         "read as written, no warning (the unnamed last column is empty)",
         text("user,item,timestamp,\nu1,i1,1704067200\nu2,i2,1704067201,\nu3,i1,1704067202\n"),
         via="call", call=lambda ctx: (_load_warnings(ctx), len(load_log(ctx.data))),
         check=lambda result, ctx: _equal(result, ([], 3))),
    Case("text-short-row-xz", "an xz-compressed CSV with a short row and a field of 200,000 characters",
         "the same warning (the check reads what pandas reads: no field-size limit, the same decompression)",
         _xz_short_row, via="call", call=lambda ctx: _load_warnings(ctx), check=check_warned(
             r"{file}: 1 row\(s\) have fewer fields than the header \(line 4 \(data row 3\): 3 of 4\)")),
    Case("text-stray-quote", "an item `\"12 inch` whose quote is never closed on its line",
         "error: names the column and the data row of a value spanning lines (the rows up to the next quote were read into it) "
         "and the line where the quoting breaks RFC 4180 (the closing quote is followed by text, not a separator)",
         text(rows("u1,i1,1704067200", 'u1,"12 inch,1704067201', "u2,i2,1704067202", 'u3,"6 inch,1704067203', "u4,i1,1704067204")),
         error=r"{file}: column 'item' holds a value spanning 3 lines \(data rows 2, starting '12 inch,1704067201.*"
               r"\(line 5: ',' expected after '\"'\)"),
    Case("text-quoted-line-break", "a quoted user id holding a line break (`\"ab<newline>cd\"`, RFC 4180), in a gzipped CSV",
         "read as the standard says: the id `ab<newline>cd`, with a warning naming the column and the rows (a quote left "
         "open by mistake would read the same way only if the file's quoting were otherwise valid)",
         lambda tmp: text(gzip.compress(rows('"ab\ncd",i1,1704067200', 'u2,"i\n2",1704067201', "u3,i1,1704067202").encode()),
                          name="log.csv.gz")(tmp),
         via="call", call=lambda ctx: (_load_warnings(ctx), load_log(ctx.data).user_ids.tolist()),
         check=lambda result, ctx: (
             check_warned(r"{file}: column 'user' holds 1 id\(s\) spanning lines \(data rows 1, starting 'ab\\ncd'\): "
                          r"read as written")(result[0], ctx),
             _equal(result[1], ["ab\ncd", "u2", "u3"]))),
    Case("movielens-dat-three-fields", "a `ratings.dat` of `user::item::rating` lines (no timestamp)",
         "error: not the ratings.dat layout, named, with how to read the file as CSV instead",
         text("1::2::3\n4::5::6\n", name="ratings.dat"),
         error=r"{file}: not MovieLens' ratings\.dat layout \(user::item::rating::timestamp on every line"),
    Case("columns-many-missing", "a header of 30 columns, none of them user, item or timestamp",
         "error: the missing columns, and the first 20 of the file's (a wrongly read file can have thousands)",
         text("".join(f"c{i}," for i in range(29)) + "c29\n" + ",".join("1" * 30) + "\n"),
         error=r"{file}: missing column\(s\) 'user', 'item', 'timestamp'; the data has columns \['c0', .*'c19'\] and 10 more\."),
    Case("parquet-column-twice", "a Parquet schema naming `user` twice",
         "error: names the column and its positions, as for a CSV header",
         _parquet_with_user_twice, error=r"{file}: the Parquet schema names a column twice: 'user' at columns 1, 4\. Rename one\."),
    Case("text-zstd-without-package", "a `.csv.zst` file (zstandard is not installed)",
         "error: the compression needs a package that is not installed; decompress first, or use gzip",
         text(rows("u1,i1,1704067200"), name="log.csv.zst"), error=r"{file}: cannot read as csv: its compression needs a package that is not installed"),
    Case("parquet-corrupt", "a `.parquet` file with garbage inside", "error: cannot read as parquet",
         text(b"PAR1 not really", name="log.parquet"), error=r"{file}: cannot read as parquet"),
    Case("text-utf8-bom", "a UTF-8 byte-order mark before the header",
         "read normally (the BOM is not part of the first column's name)",
         text(("\ufeff" + small_frame().to_csv(index=False)).encode("utf-8")),
         check=check_loads_like_plain),
    # ---------------------------------------------------------------- formats
    Case("csv-tab-in-csv", "a tab-separated file named `.csv`",
         "read like the comma-separated file (the header's most used separator)",
         lambda tmp: csv(small_frame)(tmp) and text(small_frame().to_csv(index=False, sep="\t"))(tmp),
         check=check_loads_like_plain),
    Case("csv-pipe", "a `|`-separated file", "read like the comma-separated file",
         lambda tmp: text(small_frame().to_csv(index=False, sep="|"))(tmp), check=check_loads_like_plain),
    Case("tsv-commas-in-a-name", "a `.tsv` file whose column name `genres (a,b,c,d)` holds more commas than the header has tabs",
         "read with tabs: a `.tsv` (or `.tab`) file is tab-separated unless --sep says otherwise",
         lambda tmp: text(small_frame().assign(**{"genres (a,b,c,d)": "x"}).to_csv(index=False, sep="\t"),
                          name="log.tsv")(tmp), check=check_loads_like_plain),
    Case("sep-sniffed-wrong", "a `;` file whose column name `rating (1,2,3,4,5)` holds more commas than the header has semicolons",
         "error: missing columns, listing the columns read with commas; --sep ';' reads it (next row)",
         text(COMMAS_IN_A_NAME), error=r"{file}: missing column\(s\) 'user', 'item', 'timestamp'; the data has columns \['user;item;timestamp;rating \(1', '2'"),
    Case("sep-forced", "the same file with --sep ';' (or --sep semicolon)", "read with semicolons",
         text(COMMAS_IN_A_NAME), options={"sep": ";"}, check=check_timestamps([T0, T0 + 1])),
    Case("sep-absent-from-header", "--sep ';' on a comma-separated file",
         "error: --sep does not occur in the header, naming the separator it uses",
         PLAIN, options={"sep": ";"},
         error=r"{file}: --sep ';' does not occur in the header, which is separated by ','"),
    Case("sep-not-csv", "--sep ';' on a Parquet file", "error: --sep applies to CSV/TSV files",
         parquet(small_frame()), options={"sep": ";"}, error=r"{file}: --sep applies to CSV/TSV files; this file is read as parquet"),
    Case("sep-unknown", "--sep ':'", "error: not a separator, listing the four accepted ones and their names",
         via="config", options={"sep": ":"},
         error=r"invalid configuration: --sep ':': not a separator; use one of ',' \(comma\), '\\t' \(tab\)"),
    Case("text-utf8-bom-gzip-semicolon", "a gzipped `;` file starting with a UTF-8 BOM (Excel's \"CSV UTF-8\")",
         "read normally: the first column is `user`, not `\\ufeffuser`",
         lambda tmp: text(gzip.compress(("\ufeff" + small_frame().to_csv(index=False, sep=";")).encode()),
                          name="log.csv.gz")(tmp), check=check_loads_like_plain),
    Case("text-utf8-bom-named-twice", "a BOM before a header naming `user` first and fourth",
         "error: names 'user' at columns 1, 4 (the BOM is not part of the first name)",
         text("\ufeffuser,item,timestamp,user\nu1,i1,1704067200,u2\n".encode()),
         error=r"{file}: the header names a column twice: 'user' at columns 1, 4"),
    Case("parquet-naive-datetime", "a Parquet datetime column without a time zone",
         "read as UTC (as naive ISO text is)",
         parquet(pd.DataFrame({"user": ["u1"], "item": ["i1"], "timestamp": pd.to_datetime(["2024-01-01 00:00:00"])})),
         check=check_timestamps([T0])),
    Case("parquet-fixed-offset", "a pyarrow `timestamp[ms, tz=-05:00]` column",
         "converted to UTC (2023-12-31T19:00-05:00 is 2024-01-01T00:00Z)", _fixed_offset_parquet,
         check=check_timestamps([T0, T0 + 60])),
    Case("jsonl", "a `.jsonl` file (one object per line)", "read like the CSV file", _jsonl,
         check=check_loads_like_plain),
    Case("jsonl-gzip-bom", "a `.jsonl.gz` file starting with a UTF-8 BOM", "read like the CSV file",
         lambda tmp: _jsonl(tmp, "log.jsonl.gz", bom=True), check=check_loads_like_plain),
    Case("jsonl-typed-ids", "JSON ids `\"01\"` (a string) and `1` (a number)",
         "two distinct users: JSON strings stay text, never parsed as numbers",
         text('{"user": "01", "item": "i1", "timestamp": 1704067200}\n{"user": 1, "item": "i1", "timestamp": 1704067201}\n', name="log.jsonl"),
         check=check_ids("user", ["01", "1"])),
    Case("jsonl-bad-line", "a `.jsonl` file whose second line is not JSON",
         "error: cannot parse as jsonl, naming the line and column",
         text('{"user": "u1", "item": "i1", "timestamp": 1704067200}\n{"user": "u2", item}\n', name="log.jsonl"),
         error=r"{file}: cannot parse as jsonl: line 2 is not JSON \(Expecting property name .* at column 16\)"),
    Case("jsonl-huge-integer", "a JSON id beyond 64 bits (`2**70`) on line 2",
         "error: names the line; write such ids as strings",
         text('{"user": 1, "item": "i1", "timestamp": 1704067200}\n{"user": ' + str(2**70)
              + ', "item": "i1", "timestamp": 1704067201}\n', name="log.jsonl"),
         error=r"{file}: cannot parse as jsonl: line 2 holds the integer 1180591620717411303424 beyond 64 bits"),
    Case("jsonl-nested-id", "a JSON object as a user id (`{\"id\": 1}`) on line 2",
         "error: the column holds JSON objects or arrays, naming the rows",
         text('{"user": "u1", "item": "i1", "timestamp": 1704067200}\n{"user": {"id": 1}, "item": "i1", "timestamp": 1704067201}\n', name="log.jsonl"),
         error=r"{file}: column 'user' holds JSON objects or arrays \(data rows 2\)"),
    Case("jsonl-array", "a `.json` file holding one JSON array", "error: a JSON array, not JSON Lines, with the jq command that converts it",
         text('[{"user": "u1", "item": "i1", "timestamp": 1704067200},\n"x"]\n', name="log.json"),
         error=r"{file}: holds a JSON array; SW-EVAL reads JSON Lines"),
    Case("parts-spark-parquet", "a directory as Spark writes it: `part-0000N-….snappy.parquet`, `_SUCCESS`, `.crc` files",
         "the parts read as one log in path order, like the single file; names starting with `_` or `.` skipped",
         _spark_parquet_parts, check=check_loads_like_plain),
    Case("parts-csv-gzip-with-empty-part", "a directory of gzipped CSV parts, one of them empty (an empty partition)",
         "read as one log; the empty part adds nothing", _csv_parts, check=check_loads_like_plain),
    Case("parts-glob", "`--data 'events/part-*.csv.gz'` (a README beside the parts)",
         "the matching files read as one log", _glob_of_csv_parts, check=check_loads_like_plain),
    Case("parts-glob-no-match", "a glob that matches nothing", "error: no file matches",
         lambda tmp: tmp / "part-*.parquet", error=r"{file}: no file matches"),
    Case("parts-mixed-formats", "a directory holding Parquet and CSV parts",
         "error: the parts are of different formats, naming a file of each",
         lambda tmp: _parts(small_frame())(tmp) and (tmp / "events" / "extra.csv").write_text(rows("u1,i1,1"))
         and tmp / "events",
         error=r"{file}: the parts are of different formats: .*extra\.csv \(csv\), .*part-00000\.parquet \(parquet\)"),
    Case("parts-mixed-columns", "Parquet parts where one lacks the `item` column and has `sku`",
         "error: the parts have different columns, naming the files and the columns",
         _parts(small_frame().iloc[:5], small_frame().iloc[5:].rename(columns={"item": "sku"})),
         error=r"{file}: the parts have different columns: .*part-00000\.parquet has 'item' that .*part-00001\.parquet lacks, .*part-00001\.parquet has 'sku'"),
    Case("parts-mixed-types", "CSV parts with epoch seconds in one and ISO dates in the other",
         "error: the column holds numbers in one file and text in another, naming both",
         _parts(small_frame().iloc[:5], small_frame().iloc[5:].assign(timestamp="2024-01-03"), suffix=".csv"),
         error=r"{file}: column 'timestamp' holds number values in .*part-00000\.csv but text values in .*part-00001\.csv"),
    Case("parts-row-error", "CSV parts, the second with a missing user in its 2nd data row",
         "error: names that part file and the row in it",
         _parts(small_frame().iloc[:5], small_frame().iloc[5:].assign(user=lambda f: f["user"].where(np.arange(len(f)) != 1)), suffix=".csv"),
         error=r"events/part-00001\.csv: 1 row\(s\) have a missing value in column\(s\) 'user' \(data rows 2\)"),
    Case("parts-time-zones", "Parquet parts, one naive (UTC), one in Europe/Brussels",
         "each taken to UTC, then read as one log", _parts_in_zones, check=check_timestamps([T0, T0])),
    # ---------------------------------------------------------------- columns
    Case("columns-missing", "columns `u,i,t` and no mapping",
         "error: missing column(s), listing the file's columns and the --*-col options",
         csv(small_frame().rename(columns={"user": "u", "item": "i", "timestamp": "t"})),
         error=r"{file}: missing column\(s\) 'user', 'item', 'timestamp'; the data has columns \['u', 'i', 't'\].*--user-col"),
    Case("columns-renamed-mapped", "columns `uid,iid,when` with --user-col/--item-col/--time-col",
         "read as user, item and timestamp",
         csv(small_frame().rename(columns={"user": "uid", "item": "iid", "timestamp": "when"})),
         options={"user_col": "uid", "item_col": "iid", "time_col": "when"},
         check=check_loads_like_plain),
    Case("columns-same-for-two-roles", "--item-col user (the user column for items too)",
         "error: each role needs its own column (a log of users recommending themselves is no log)",
         PLAIN, options={"item_col": "user"}, error=r"{file}: column\(s\) 'user' given for several roles \(user, item\)"),
    Case("columns-semicolon", "a `;`-separated file",
         "read like the comma-separated file: the separator (`,` tab `;` `|`) is the one the header uses most",
         lambda tmp: _semicolons(tmp), check=check_loads_like_plain),
    Case("columns-named-twice", "a header naming `timestamp` twice",
         "error naming the file, the column and its positions (pandas would silently read the first)",
         text("user,timestamp,item,timestamp\nu1,1704067200,i1,1704067201\n"),
         error=r"{file}: the header names a column twice: 'timestamp' at columns 2, 4"),
    Case("columns-padded-names", "a header `user, item, timestamp` (spaces after commas)",
         "error: missing columns 'item', 'timestamp', listing `' item'` so the space shows",
         text("user, item, timestamp\nu1, i1, 1704067200\n"),
         error=r"{file}: missing column\(s\) 'item', 'timestamp'; the data has columns \['user', ' item', ' timestamp'\]"),
    Case("policy-column-missing", "--stratify-by policy on a log without that column",
         "error: missing column 'policy'", PLAIN, via="run", options={"stratify_by": "policy"},
         error=r"{file}: missing column\(s\) 'policy'"),
    Case("policy-column-and-other-strata", "--policy-col policy --stratify-by bucket",
         "error: the two options name different columns (it stratified by `policy` silently)",
         PLAIN, via="run", options={"policy_col": "policy", "stratify_by": "bucket"},
         error=r"--policy-col 'policy' and --stratify-by 'bucket' name different columns"),
    # ---------------------------------------------------------------- timestamps
    Case("ts-unparsable", "timestamps `soon` and `x` among ISO dates",
         "error: unparsable timestamps, naming the column, the count and the rows",
         text(rows("u1,i1,2024-01-01", "u2,i1,soon", "u3,i1,x")),
         error=r"{file}: column 'timestamp' has 2 unparsable timestamp\(s\) \(data rows 2, 3, e.g. 'soon'\)"),
    Case("ts-mixed-epoch-and-iso", "epoch seconds and ISO dates in one column",
         "error: the column mixes epoch numbers and date text, naming rows of each",
         text(rows("u1,i1,2024-01-01", "u2,i1,1704067200", "u3,i1,2024-01-02")),
         error=r"{file}: column 'timestamp' mixes epoch numbers \(data rows 2, .*\) and date/time text \(data rows 1, 3"),
    Case("ts-mixed-iso-variants", "date only, `T…Z`, space and `+02:00` forms of ISO-8601 in one column",
         "each parsed exactly and converted to UTC epoch seconds",
         text(rows("u1,i1,2024-01-01", "u2,i1,2024-01-01T10:00:00Z", "u3,i1,2024-01-01 12:30:00+02:00")),
         check=check_timestamps([T0, T0 + 10 * 3600 + 0, T0 + 10 * 3600 + 30 * 60])),
    Case("ts-rfc3339-lower-case", "RFC 3339 date-times with a lower-case `t` and `z` (`2024-01-01t10:00:00z`), one with an offset",
         "read as RFC 3339 defines them (§5.6 allows lower case): exact UTC epoch seconds",
         text(rows("u1,i1,2024-01-01t10:00:00z", "u2,i1,2024-01-01t12:30:00+02:00", "u3,i1,2024-01-01T10:00:01Z")),
         check=check_timestamps([T0 + 10 * 3600, T0 + 10 * 3600 + 1, T0 + 10 * 3600 + 30 * 60])),
    Case("ts-decimal-comma", "fractions of a second after a comma (`\"2024-01-01T10:00:00,5Z\"`, quoted in a CSV; a `;` or tab file needs no quotes)",
         "read as ISO 8601 defines them (a comma is its decimal sign): the fraction floored, as with a point",
         text(rows('u1,i1,"2024-01-01T10:00:00,5Z"', 'u2,i1,"2024-01-01t10:00:01,999z"', "u3,i1,2024-01-01T10:00:02.5Z")),
         check=check_timestamps([T0 + 10 * 3600, T0 + 10 * 3600 + 1, T0 + 10 * 3600 + 2])),
    Case("ts-decimal-comma-unquoted", "the same comma unquoted in a comma-separated file",
         "error: the comma splits the field, so the row has a field more than the header (quote the value)",
         text(rows("u1,i1,2024-01-01T10:00:00Z", "u2,i1,2024-01-01T10:00:00,5Z")),
         error=r"{file}: line 3 \(data row 2\) has 4 fields where the header has 3: a separator inside a value \(quote it\)"),
    Case("ts-aware-and-naive", "`2024-01-01T02:00:00+02:00` next to naive `2024-01-01T00:00:00`",
         "naive times are UTC, aware ones converted: both are 2024-01-01T00:00:00Z",
         text(rows("u1,i1,2024-01-01T02:00:00+02:00", "u2,i1,2024-01-01T00:00:00")),
         check=check_timestamps([T0, T0])),
    Case("ts-aware-datetime-column", "a Parquet datetime column in Europe/Brussels",
         "converted to UTC",
         parquet(pd.DataFrame({"user": ["u1"], "item": ["i1"], "timestamp": pd.to_datetime(["2024-01-01 01:00:00"]).tz_localize("Europe/Brussels")})),
         check=check_timestamps([T0])),
    Case("ts-zone-abbreviation", "`2024-01-01 02:00:00 CEST` (a zone name, not an offset)",
         "error: unparsable (zone abbreviations are ambiguous); use an offset",
         text(rows("u1,i1,2024-01-01 02:00:00 CEST")), error=r"{file}: column 'timestamp' has 1 unparsable"),
    Case("ts-day-first", "`13/08/2015` (day/month/year)",
         "error: unparsable; day-first and month-first dates are never guessed",
         text(rows("u1,i1,13/08/2015", "u2,i1,01/08/2015")), error=r"{file}: column 'timestamp' has 2 unparsable"),
    Case("ts-ms-read-as-seconds", "epoch milliseconds without --time-unit ms",
         "error: values too large for seconds (beyond year 5138), naming the rows: pass --time-unit ms",
         csv(shifted(small_frame(), 0).assign(timestamp=lambda f: f["timestamp"] * 1000)),
         error=r"{file}: column 'timestamp' has epoch values too large for seconds \(data rows 1, 2, .*pass --time-unit ms"),
    Case("ts-seconds-read-as-ms", "epoch seconds of 2024 with --time-unit ms",
         "error: they would be January or February 1970 as milliseconds: drop --time-unit ms",
         PLAIN, options={"time_unit": "ms"},
         error=r"{file}: column 'timestamp' has values like 17040\d+, epoch seconds of 2024-01-01T.*drop --time-unit ms"),
    Case("ts-1990s-seconds-read-as-ms", "epoch seconds of 1997 (MovieLens 100K) with --time-unit ms",
         "error: they would be January or February 1970 as milliseconds: drop --time-unit ms",
         csv(shifted(small_frame(), 874_724_710 - 1_704_067_200)), options={"time_unit": "ms"},
         error=r"{file}: column 'timestamp' has values like 8747\d+, epoch seconds of 1997-09-2.*drop --time-unit ms"),
    Case("ts-us-read-as-ms", "epoch microseconds with --time-unit ms",
         "error: too large for milliseconds, naming the rows: pass --time-unit us",
         csv(shifted(small_frame(), 0).assign(timestamp=lambda f: f["timestamp"] * 10**6)), options={"time_unit": "ms"},
         error=r"{file}: column 'timestamp' has epoch values too large for milliseconds \(data rows 1, 2, .*they look like microseconds: pass --time-unit us"),
    Case("ts-ns-read-as-seconds", "epoch nanoseconds without --time-unit",
         "error: too large for seconds, naming the rows: pass --time-unit ns",
         csv(shifted(small_frame(), 0).assign(timestamp=lambda f: f["timestamp"] * 10**9)),
         error=r"{file}: column 'timestamp' has epoch values too large for seconds \(data rows 1, 2, .*they look like nanoseconds: pass --time-unit ns"),
    Case("ts-ns-exact", "epoch nanoseconds with --time-unit ns, one a nanosecond before a second",
         "exact epoch seconds, floored (integer arithmetic: floats would round it up to the next second)",
         text(rows("u1,i1,1704067199999999999", "u2,i1,1704067200000000000")), options={"time_unit": "ns"},
         check=check_timestamps([T0 - 1, T0])),
    Case("ts-ms-read-as-us", "epoch milliseconds with --time-unit us",
         "error: they would be January or February 1970 as microseconds: use --time-unit ms",
         csv(shifted(small_frame(), 0).assign(timestamp=lambda f: f["timestamp"] * 1000)), options={"time_unit": "us"},
         error=r"{file}: column 'timestamp' has values like 17040\d+, epoch milliseconds of 2024-01-01T.*use --time-unit ms"),
    Case("ts-parts-seconds-and-ms", "parts in seconds and in milliseconds, read with --time-unit ms",
         "error: names the part in seconds: as milliseconds it would be January 1970; drop --time-unit ms",
         _parts(small_frame().iloc[:40], small_frame().iloc[40:].assign(timestamp=lambda f: f["timestamp"] * 1000),
                suffix=".csv"),
         options={"time_unit": "ms"},
         error=r"events/part-00000\.csv: column 'timestamp' has values like 17040\d+, epoch seconds of 2024-01-01T.*drop --time-unit ms"),
    Case("ts-zero-placeholder-ms", "milliseconds with a `0` placeholder row",
         "error: names the placeholder row, before 1973 among others all after 2000",
         text(rows("u1,i1,1704067200000", "u2,i1,0", "u3,i1,1704067300000")), options={"time_unit": "ms"},
         error=r"{file}: column 'timestamp' has values that --time-unit ms puts before 1973 \(data rows 2, e.g. 0 = 1970-01-01T00:00:00Z\)"),
    Case("ts-ms-through-1973", "milliseconds from 1971 to 1975 (`--time-unit ms`)",
         "read exactly: a log that runs through 1973 has no stray early values",
         text(rows("u1,i1,47174400000", "u2,i1,110332800000", "u3,i1,157766400000")), options={"time_unit": "ms"},
         check=check_timestamps([47_174_400, 110_332_800, 157_766_400])),
    Case("ts-yyyymmddhhmmss-numbers", "date-times written as numbers `20240101123000`, with --time-unit ms",
         "error: they look like YYYYMMDDhhmmss date-times, not epoch time (in any unit)",
         text(rows("u1,i1,20240101123000", "u2,i1,20240102080000")), options={"time_unit": "ms"},
         error=r"{file}: column 'timestamp' has values like 20240101123000 that look like YYYYMMDDhhmmss"),
    Case("ts-seconds-and-ms-mixed", "seconds with one row in milliseconds",
         "error: names the millisecond row",
         text(rows("u1,i1,1704067200", "u2,i1,1704067200000", "u3,i1,1704067300")),
         error=r"{file}: column 'timestamp' has epoch values too large for seconds \(data rows 2, e.g. 1704067200000\)"),
    Case("ts-yyyymmdd-numbers", "dates written as numbers `20240101`",
         "error: they look like YYYYMMDD dates, not epoch seconds (they would be 1970-08-23)",
         text(rows("u1,i1,20240101", "u2,i1,20240102")),
         error=r"{file}: column 'timestamp' has values like 20240101 that look like YYYYMMDD dates"),
    Case("ts-negative", "epoch seconds before 1970 (the log shifted 20,000 days back)",
         "accepted; windows stay aligned to UTC midnight; the values equal the unshifted log's "
         "(MLflow tracking of pre-1970 windows fails: see Known gaps)",
         csv(shifted(small_frame(), -20_000 * DAY)), via="run", check=check_negative_timestamps),
    Case("ts-row-cut-short", "one row's timestamp cut short (`u1,i1,88974`: a day of 1970) in a 2024 log",
         "accepted with a warning naming the data row, its time and the gap to the rest (a row cut "
         "short, or a time in another unit?); the row is kept",
         csv(lambda: pd.concat([small_frame(), pd.DataFrame({"user": ["u1"], "item": ["i1"], "timestamp": [88_974]})],
                               ignore_index=True)),
         via="call", call=lambda ctx: _load_warnings(ctx), check=check_warned(
             r"{file}: 1 transaction\(s\) lie 54\.0 years before the rest of the log in column 'timestamp' "
             r"\(1970-01-02T00:42:54Z, data rows (\d+); the rest begins at 2024-01-01")),
    Case("ts-outside-ns-range", "ISO dates in 1500 and 2500 (outside pandas' nanosecond range)",
         "exact epoch seconds, no overflow",
         text(rows("u1,i1,1500-01-01", "u2,i1,2500-01-01")),
         check=check_timestamps([-14_831_769_600, 16_725_225_600])),
    Case("ts-non-finite", "`inf` as a timestamp", "error: non-finite timestamps, naming the row",
         text(rows("u1,i1,1704067200", "u2,i1,inf")),
         error=r"{file}: column 'timestamp' has non-finite timestamps \(data rows 2\)"),
    Case("ts-epoch-as-text", "epoch seconds stored as text (a Parquet string column)",
         "read as numbers, exactly",
         parquet(pd.DataFrame({"user": ["u1", "u2"], "item": ["i1", "i1"], "timestamp": ["1704067200", "1704067201"]})),
         check=check_timestamps([T0, T0 + 1])),
    Case("ts-scientific-cut", "epoch seconds saved by a spreadsheet in scientific notation (`1.69E+09`, `1.70E+09`)",
         "error: their digits stop short of whole seconds (the time only to the nearest 10,000,000 seconds, 116 days): "
         "names the rows and the precision left; save the column as whole numbers",
         text(rows("u1,i1,1.69E+09", "u2,i1,1.70E+09", "u3,i1,1.70E+09")),
         error=r"{file}: column 'timestamp' holds 3 epoch value\(s\) in scientific notation that stop short of whole "
               r"seconds \(data rows 1, 2, 3, e\.g\. '1\.69E\+09', which gives the time only to the nearest "
               r"10,000,000 seconds, 116 days; none of them reaches one second\)"),
    Case("ts-scientific-cut-text", "the same values in a Parquet string column, read with --time-unit ms (`1.704e12`)",
         "error: the same, in milliseconds (the time only to the nearest 1,000,000,000 milliseconds, 11.6 days)",
         parquet(pd.DataFrame({"user": ["u1", "u2"], "item": ["i1", "i1"], "timestamp": ["1.704e12", "1.705e12"]})),
         options={"time_unit": "ms"},
         error=r"{file}: column 'timestamp' holds 2 epoch value\(s\) in scientific notation .*e\.g\. '1\.704e12', which "
               r"gives the time only to the nearest 1,000,000,000 milliseconds, 11\.6 days"),
    Case("ts-scientific-shortest-form", "epoch seconds as Java and Spark write doubles (`1.704067201E9`; `1.70406726E9` for "
         "1704067260.0, which ends in a zero)",
         "read exactly: a column where a value in scientific notation reaches whole seconds was written in a float's "
         "shortest form, which drops only zeros",
         text(rows("u1,i1,1.704067201E9", "u2,i1,1.70406726E9", "u3,i1,1.7040672E9")),
         check=check_timestamps([T0, T0 + 1, T0 + 60])),
    Case("ts-fractional-seconds", "float epoch seconds with fractions (`881250949.5`, as MovieLens-style exports write)",
         "read, the fractions floored to whole seconds (SPEC §1)",
         text(rows("u1,i1,881250949.5", "u2,i1,881250950.999", "u3,i1,881250951")),
         check=check_timestamps([881_250_949, 881_250_950, 881_250_951])),
    Case("ts-ns-with-missing-csv", "epoch nanoseconds in a CSV with an empty cell, --time-unit ns --on-invalid drop",
         "exact: the column's text is read again as integers (pandas reads it as floats, which put "
         "1704067199999999999 in the next second)",
         text(rows("u1,i1,1704067199999999999", "u2,i1,", "u3,i1,1704067200000000000")),
         options={"time_unit": "ns", "on_invalid": "drop"}, check=check_timestamps([T0 - 1, T0])),
    Case("ts-ns-as-float", "epoch nanoseconds in a Parquet `double` column (a whole second: `1.7040672e18`), --time-unit ns",
         "error: floats beyond 2**53 hold nanoseconds only to 256; at a second's edge the second is unknown: names "
         "the rows; store integers",
         parquet(pd.DataFrame({"user": ["u1", "u2"], "item": ["i1", "i1"],
                               "timestamp": [float(T0 * 10**9), (T0 + 0.5) * 10**9]})),
         options={"time_unit": "ns"},
         error=r"{file}: column 'timestamp' holds epoch nanoseconds as floating-point numbers beyond 2\*\*53, which "
               r"floating point holds only to the nearest 256 nanoseconds; 1 of them lie that close to a whole second, "
               r"so the second they fall in is unknown \(data rows 1, e\.g\. 1704067200000000000\)"),
    Case("ts-ns-as-float-jsonl", "epoch nanoseconds in JSON Lines with a `null` (pandas reads the column as floats), "
         "--time-unit ns --on-invalid drop",
         "error: the same (the JSON text is not kept); drop the lines with a missing time first",
         text('{"user": "u1", "item": "i1", "timestamp": 1704067199999999999}\n'
              '{"user": "u2", "item": "i1", "timestamp": null}\n', name="log.jsonl"),
         options={"time_unit": "ns", "on_invalid": "drop"},
         error=r"{file}: column 'timestamp' holds epoch nanoseconds as floating-point numbers beyond 2\*\*53.*"
               r"\(data rows 1, e\.g\. 1704067200000000000\).*drop those rows first"),
    Case("ts-missing", "an empty timestamp cell",
         "error: missing value in column 'timestamp', naming the row; --on-invalid drop drops it",
         text(rows("u1,i1,1704067200", "u2,i1,")),
         error=r"{file}: 1 row\(s\) have a missing value in column\(s\) 'timestamp' \(data rows 2\).*--on-invalid drop"),
    # ---------------------------------------------------------------- ids
    Case("ids-missing", "empty user and item cells",
         "error: names the columns and the rows, suggests --on-invalid drop",
         text(rows("u1,i1,1704067200", ",i1,1704067201", "u3,,1704067202")),
         error=r"{file}: 2 row\(s\) have a missing value in column\(s\) 'user', 'item' \(data rows 2, 3\)"),
    Case("ids-missing-dropped-row-numbers", "--on-invalid drop, then an unparsable timestamp after the dropped row",
         "the missing row is dropped and the error names the bad timestamp's row in the file (3), not in what is left",
         text(rows("u1,i1,2024-01-01", ",i1,2024-01-02", "u3,i1,soon")), options={"on_invalid": "drop"},
         error=r"{file}: column 'timestamp' has 1 unparsable timestamp\(s\) \(data rows 3, e.g. 'soon'\)"),
    Case("ids-mixed-int-and-text", "user ids `10`, `9` and `a` in one column",
         "ids compare as text: string order 10 < 9 < a (numeric order only when every id is an integer)",
         text(rows("10,i1,1704067200", "9,i1,1704067201", "a,i1,1704067202")),
         check=check_ids("user", ["10", "9", "a"])),
    Case("ids-zero-padded-csv", "user ids `01` and `1` in a CSV file",
         "two distinct users, string order: ids are read as the text in the file, never merged as numbers",
         text(rows("01,i1,1704067200", "1,i2,1704067201")), check=check_ids("user", ["01", "1"])),
    Case("ids-minus-zero-csv", "user ids `0` and `-0` in a CSV file",
         "two distinct users, string order (`-0` is not an integer spelling: it would merge with `0`)",
         text(rows("0,i1,1704067200", "-0,i2,1704067201")), check=check_ids("user", ["-0", "0"])),
    Case("ids-spaces-csv", "user ids ` 10` and `9 ` (spaces around the cells)",
         "the spaces are CSV layout, not part of the id: users 9 and 10, numeric order",
         text(rows(" 10,i1,1704067200", "9 ,i1,1704067201")), check=check_ids("user", [9, 10])),
    Case("ids-blank-csv", "a user cell holding only spaces",
         "missing, like an empty cell: error naming the column and the row",
         text(rows("u1,i1,1704067200", "  ,i1,1704067201")),
         error=r"{file}: 1 row\(s\) have a missing value in column\(s\) 'user' \(data rows 2\)"),
    Case("ids-missing-markers-csv", "item ids `NA` and `None` in a CSV (what pandas and R write for missing values)",
         "read as the ids they spell, as in JSON Lines and Parquet, with a warning naming the column and the rows",
         text(rows("u1,NA,1704067200", "u2,None,1704067201", "u3,i1,1704067202")), via="call",
         call=lambda ctx: (_load_warnings(ctx), load_log(ctx.data).item_ids.tolist()),
         check=lambda result, ctx: (
             check_warned(r"{file}: column 'item' holds 'NA', 'None' in 2 row\(s\) \(data rows 1, 2\): read as id\(s\)")(result[0], ctx),
             _equal(result[1], ["NA", "None", "i1"]))),
    Case("ids-blank-jsonl", "an empty and a blank user id in JSON Lines",
         "missing, as in CSV: error naming the column and the rows",
         text('{"user": "", "item": "i1", "timestamp": 1704067200}\n{"user": "  ", "item": "i1", "timestamp": 1704067201}\n'
              '{"user": "u1", "item": "i1", "timestamp": 1704067202}\n', name="log.jsonl"),
         error=r"{file}: 2 row\(s\) have a missing value in column\(s\) 'user' \(data rows 1, 2\)"),
    Case("ids-blank-parquet", "an empty user id in a Parquet string column",
         "missing, as in CSV: error naming the column and the row",
         parquet(pd.DataFrame({"user": ["u1", ""], "item": ["i1", "i1"], "timestamp": [T0, T0 + 1]})),
         error=r"{file}: 1 row\(s\) have a missing value in column\(s\) 'user' \(data rows 2\)"),
    Case("ids-blank-parquet-categorical", "an empty and a blank user id in a Parquet dictionary (categorical) column",
         "missing, as in a plain string column: error naming the column and the rows",
         parquet(pd.DataFrame({"user": pd.Categorical(["u1", "", "  "]), "item": ["i1"] * 3,
                               "timestamp": [T0, T0 + 1, T0 + 2]})),
         error=r"{file}: 2 row\(s\) have a missing value in column\(s\) 'user' \(data rows 2, 3\)"),
    Case("ids-padded-jsonl", "user ids `\" u1 \"` and `\"u1\"` in JSON Lines",
         "one user, as in CSV: text ids lose their surrounding spaces",
         text('{"user": " u1 ", "item": "i1", "timestamp": 1704067200}\n{"user": "u1", "item": "i2", "timestamp": 1704067201}\n',
              name="log.jsonl"),
         check=check_ids("user", ["u1"])),
    Case("ids-unicode-padding-csv", "user ids padded with Unicode white space and invisible characters (NBSP U+00A0, "
         "U+2007, U+202F, U+3000, zero-width space U+200B, BOM U+FEFF, a direction mark U+200E) in a CSV",
         "one user, as with ASCII spaces: the white space and invisible characters around an id are padding, not part of it",
         text(rows(*(f"{pad}u1{end},i{n},{T0 + n}" for n, (pad, end) in enumerate(UNICODE_PADDING)))),
         check=check_ids("user", ["u1"], n_rows=len(UNICODE_PADDING))),
    Case("ids-unicode-padding-jsonl", "the same ids in JSON Lines", "one user, as in CSV",
         lambda tmp: text(pd.DataFrame(_padded_rows()).to_json(orient="records", lines=True,
                                                                 force_ascii=False), name="log.jsonl")(tmp),
         check=check_ids("user", ["u1"], n_rows=len(UNICODE_PADDING))),
    Case("ids-unicode-padding-parquet", "the same ids in a Parquet string column", "one user, as in CSV",
         lambda tmp: parquet(pd.DataFrame(_padded_rows()))(tmp),
         check=check_ids("user", ["u1"], n_rows=len(UNICODE_PADDING))),
    Case("ids-invisible-only", "a user cell holding only a zero-width space and a no-break space",
         "missing, like an empty cell: error naming the column and the row",
         text(rows("u1,i1,1704067200", "\u200b\u00a0,i1,1704067201")),
         error=r"{file}: 1 row\(s\) have a missing value in column\(s\) 'user' \(data rows 2\)"),
    Case("ids-zero-padded-text", "user ids `01` and `1` in a Parquet string column",
         "two distinct users, string order",
         parquet(pd.DataFrame({"user": ["01", "1"], "item": ["i1", "i1"], "timestamp": [T0, T0 + 1]})),
         check=check_ids("user", ["01", "1"])),
    Case("ids-whole-floats-csv", "item ids `2.0`, `10.0` in a CSV (a float column written by pandas)",
         "the integers 2 and 10, in numeric order, as the same column in Parquet reads",
         text(rows("u1,10.0,1704067200", "u2,2.0,1704067201")), check=check_ids("item", [2, 10])),
    Case("ids-int-and-float-spellings", "item ids `2` and `2.0` in one CSV column",
         "one item (as JSON reads `2` and `2.0`), not two",
         text(rows("u1,2,1704067200", "u2,2.0,1704067201", "u3,10,1704067202")), check=check_ids("item", [2, 10], n_rows=3)),
    Case("ids-float-beyond-2-53-with-fraction", "float user ids beyond 2**53 beside a fractional one (0.5)",
         "error: ids beyond 2**53 cannot be told apart (the check no longer needs every id whole)",
         parquet(pd.DataFrame({"user": [float(2**53 + 2), float(2**53), 0.5], "item": ["i1"] * 3, "timestamp": [T0, T0 + 1, T0 + 2]})),
         error=r"{file}: column 'user' holds ids read as floating-point numbers beyond 2\*\*53 \(data rows 1, 2"),
    Case("ids-unicode", "user ids `Zoë`, `用户`, `😀` (UTF-8)",
         "kept exactly, ordered by code point; the run works",
         csv(lambda: with_users(small_frame(), ["Zoë", "用户", "😀"])), via="run", check=check_unicode_run),
    Case("ids-huge-integers", "user ids 2**63, 2**64 − 1 and a 23-digit number",
         "exact integers in numeric order (no overflow, no wrap to negative)",
         text(rows("99999999999999999999999,i1,1704067200", "18446744073709551615,i1,1704067201",
                   "9223372036854775808,i1,1704067202")),
         check=check_ids("user", [2**63, 2**64 - 1, 99999999999999999999999])),
    Case("ids-int64-extremes", "user ids −2**63 and 2**63 − 1", "exact, numeric order",
         text(rows("9223372036854775807,i1,1704067200", "-9223372036854775808,i1,1704067201")),
         check=check_ids("user", [-(2**63), 2**63 - 1])),
    Case("ids-huge-with-missing-csv", "CSV ids 2**53 + 1 and 2**53 in a column with a missing cell, --on-invalid drop",
         "exact integers: CSV ids are read as text, so a missing cell does not turn the column into floats",
         text(rows("9007199254740993,i1,1704067200", "9007199254740992,i1,1704067201", ",i1,1704067202")),
         options={"on_invalid": "drop"}, check=check_ids("user", [2**53, 2**53 + 1])),
    Case("ids-huge-read-as-float", "a Parquet float column of ids beyond 2**53 with a missing cell, --on-invalid drop",
         "error: floats cannot tell such ids apart (they may already have merged in the file)",
         parquet(HUGE_FLOAT_IDS), options={"on_invalid": "drop"},
         error=r"{file}: column 'user' holds ids read as floating-point numbers beyond 2\*\*53 \(data rows 1, 2"),
    # ---------------------------------------------------------------- policy column
    Case("policy-missing-values", "a policy column with an empty cell",
         "error: names column 'policy' and the row; with --on-invalid drop the row is dropped",
         text("user,item,timestamp,policy\nu1,i1,1704067200,A\nu2,i1,1704067201,\n"),
         options={"policy_col": "policy"},
         error=r"{file}: 1 row\(s\) have a missing value in column\(s\) 'policy' \(data rows 2\)"),
    Case("policy-missing-values-dropped", "the same with --on-invalid drop", "the row is dropped and counted",
         text("user,item,timestamp,policy\nu1,i1,1704067200,A\nu2,i1,1704067201,\nu3,i2,1704067202,A\n"),
         options={"policy_col": "policy", "on_invalid": "drop"}, check=check_policy_dropped),
    Case("policy-named-all", "a policy called `all`",
         "error: `all` is the stratum of the unstratified results (it would be averaged into them); rename the policy",
         text("user,item,timestamp,policy\nu1,i1,1704067200,A\nu2,i1,1704067201,all\n"),
         options={"policy_col": "policy"},
         error=r"{file}: column 'policy' has the policy 'all' \(data rows 2\), the name of the unstratified results"),
    Case("stratum-without-users", "stratify mode test, u_min 0: policy B has no test user in any fold",
         "B's rows are skipped with reason n_users=0 and counted as skipped, never a NaN average",
         csv(policy_frame), via="run",
         options={"stratify_by": "policy", "stratify_mode": "test", "u_min": 0, "folds": 3, "k": [2],
                  "algorithms": ["pop"], "params": {}},
         check=check_stratum_group_without_users),
    # ---------------------------------------------------------------- log shapes
    Case("unsorted-input", "the rows shuffled", "sorted by time once: results.csv byte-identical to the sorted log's",
         csv(lambda: small_frame().sample(frac=1.0, random_state=3)), via="run",
         check=check_same_results_as_plain("unsorted")),
    Case("duplicate-rows", "every row twice", "de-duplicated at load (first): byte-identical results, the count in config.json",
         csv(lambda: pd.concat([small_frame(), small_frame()])), via="run",
         check=check_same_results_as_plain("duplicates")),
    Case("one-instant", "every event at the same second",
         "runs; every fold is skipped with its reason (no training data before it), the summary says 0 folds used",
         csv(lambda: small_frame().assign(timestamp=T0 + 3600)), via="run",
         check=check_all_folds_skipped("n_eligible=0 < u_min=2")),
    Case("window-larger-than-span", "--window 30D on a 6-day log",
         "runs; the one window holds the whole log and has no training data: skipped with its reason",
         PLAIN, via="run", options={"window": "30D", "folds": 1},
         check=check_all_folds_skipped("n_eligible=0 < u_min=2")),
    Case("start-after-last-event", "--start 2030-01-01", "error: no fold lies inside the data; choose an earlier --start",
         PLAIN, via="run", options={"start": "2030-01-01"},
         error=r"{file}: the first window starts at 2030-01-01T00:00:00Z, after the last event .*earlier --start"),
    Case("windows-before-first-event", "--start 2000-01-01 with 3 daily folds",
         "error: the windows end before the first event", PLAIN, via="run",
         options={"start": "2000-01-01", "folds": 3},
         error=r"{file}: the windows end at 2000-01-04T00:00:00Z, before the first event"),
    Case("folds-without-eligible-users", "--u-min 0 and windows starting 4 days before the data",
         "folds with no eligible user are skipped (n_eligible=0), also with u_min 0; the summary counts them",
         PLAIN, via="run", options={"u_min": 0, "start": str(T0 - 4 * DAY), "folds": 10},
         check=check_zero_eligible_fold_skipped),
    Case("u-min-above-every-fold", "--u-min 1000", "runs; every fold skipped with `n_eligible=… < u_min=1000`",
         PLAIN, via="run", options={"u_min": 1000}, check=check_all_folds_skipped("< u_min=1000")),
    Case("train-window-longer-than-history", "--train-window 1000D", "the same numbers as expanding training",
         PLAIN, via="run", options={"train_window": "1000D"}, check=check_train_window_longer_than_history),
    # ---------------------------------------------------------------- options
    Case("k-zero", "--k 0", "error: every k must be ≥ 1", None, via="config", options={"k": [0, 10]},
         error=r"invalid configuration: --k \(k\): .*every k must be ≥ 1"),
    Case("k-huge", "--k 2000000000", "error: every k must be at most 10,000 (instead of running out of memory)",
         None, via="config", options={"k": [5, 2_000_000_000]},
         error=r"invalid configuration: --k \(k\): .*every k must be at most 10,000, got 2,000,000,000"),
    Case("ci-out-of-range", "--ci 1.5", "error: the level must be below 1", None, via="config",
         options={"ci": 1.5}, error=r"invalid configuration: --ci \(ci\): Input should be less than 1"),
    Case("bootstrap-too-few", "--bootstrap 10", "error: at least 100 resamples", None,
         via="config", options={"bootstrap": 10},
         error=r"invalid configuration: --bootstrap \(bootstrap\): Input should be greater than or equal to 100"),
    Case("tests-with-fewer-than-5-folds", "4 folds, two algorithms",
         "runs; significance.csv has no p-value, its note says the tests have no power",
         PLAIN, via="run", options={"algorithms": ["pop", "pop-n"]},
         check=check_no_p_value_below_five_folds),
    Case("k-above-catalogue", "--k 1000 with 15 items",
         "lists hold every candidate; Recall@1000 equals the share of relevant items among the candidates, computed independently",
         PLAIN, via="run", options={"k": [1000]}, check=check_k_above_catalogue),
    Case("metrics-unknown", "--metrics recall,precison", "error: names the unknown metric and lists the known ones",
         None, via="config", options={"metrics": ["recall", "precison"]},
         error=r"invalid configuration: --metrics: unknown metric\(s\) precison; choose from recall, "),
    Case("seeds-and-own-seed", "--seeds 0,1 with --algorithms 'als(seed=3)'",
         "error: names the entry that sets its seed", PLAIN, via="run",
         options={"algorithms": ["pop-n", "als(seed=3)"], "seeds": [0, 1]},
         error=r"--seeds: 'als\(seed=3\)' sets its seed itself"),
    Case("seeds-without-seeded-algorithm", "--seeds 0,1 with --algorithms pop,pop-n",
         "error: no algorithm has a seed parameter (svd and als do)", PLAIN, via="run",
         options={"seeds": [0, 1]}, error=r"--seeds: none of pop, pop-n has a seed parameter"),
    Case("tune-metric-not-measured", "--tune with --tune-metric recall@10 and --metrics precision",
         "error: add the tuned metric to --metrics", PLAIN, via="run",
         options={"metrics": ["precision"], "tune": {"pop-n": {"n_recent": [10, 50]}}},
         error=r"--tune-metric 'recall@10': recall is not measured; add it to --metrics"),
    Case("config-unknown-field", "an unknown option `bogus` (config file or code)", "error: names the field",
         None, via="config", options={"bogus": 1}, error=r"invalid configuration: bogus: Extra inputs are not permitted"),
    Case("param-unknown", "--set pop-n.bogus=1", "error: names the parameter and lists the known ones",
         PLAIN, via="run", options={"params": {"pop-n": {"bogus": 1}}},
         error=r"bad parameters for pop-n: pop-n.bogus: .*\(parameters: n_recent\)"),
    Case("param-bad-value", "--set pop-n.n_recent=-5", "error: names the parameter and the bound",
         PLAIN, via="run", options={"params": {"pop-n": {"n_recent": -5}}},
         error=r"bad parameters for pop-n: pop-n.n_recent: Input should be greater than or equal to 1"),
    Case("param-boolean-for-number", "--set item-knn.n_neighbors=true",
         "error: a boolean is not a number (pydantic alone would read it as 1)",
         PLAIN, via="run", options={"algorithms": ["item-knn"], "params": {"item-knn": {"n_neighbors": True}}},
         error=r"bad parameters for item-knn: item-knn.n_neighbors: true is a boolean, not a value of this parameter"),
    Case("param-for-unlisted-algorithm", "--set svd.factors=3 without svd in --algorithms",
         "error: names the algorithm", PLAIN, via="run", options={"params": {"svd": {"factors": 3}}},
         error=r"--set names algorithm\(s\) not in --algorithms: svd"),
    Case("ease-items-over-budget", "--algorithms ease --set ease.max_matrix_gb=0.000001 (15 items: 1,800 bytes)",
         "error: names the fold's item count, the size its item × item matrix needs and the budget, before allocating it",
         PLAIN, via="run", options={"algorithms": ["ease"], "params": {"ease": {"max_matrix_gb": 1e-6}}},
         error=r"ease: this fold's training data has 1[0-5] items; EASE's dense item × item matrix would take "
               r"0\.0 GiB, over the budget ease\.max_matrix_gb=1e-06 \(at most 11 items\)"),
    Case("decay-pop-period-ambiguous", "--set decay-pop.period=1M",
         "error: names the parameter; minutes or months? (a month is written 30D)",
         PLAIN, via="run", options={"algorithms": ["decay-pop"], "params": {"decay-pop": {"period": "1M"}}},
         error=r"bad parameters for decay-pop: decay-pop\.period: .*'1M': 'M' is ambiguous; write 'min' for "
               r"minutes \(30min\), and days for months"),
    Case("window-ambiguous-M", "--window 1M", "error: minutes or months? write 30min or 30D",
         PLAIN, via="run", options={"window": "1M"}, error=r"--window '1M': 'M' is ambiguous"),
    Case("window-unparsable", "--window '1 fortnight'", "error: not a duration, with examples",
         PLAIN, via="run", options={"window": "1 fortnight"}, error=r"--window '1 fortnight': not a duration"),
    Case("window-fraction-of-second", "--window 0.5s", "error: must be a whole number of seconds",
         PLAIN, via="run", options={"window": "0.5s"}, error=r"--window '0.5s': must be a whole number of seconds"),
    Case("start-yyyymmdd", "--start 20240101", "error: ambiguous (a date, or epoch seconds in 1970?); write 2024-01-01",
         PLAIN, via="run", options={"start": "20240101"}, error=r"--start '20240101': ambiguous; write 2024-01-01"),
    Case("start-slash-date", "--start 01/03/2024", "error: not an ISO date/time (day or month first is never guessed)",
         PLAIN, via="run", options={"start": "01/03/2024"}, error=r"--start '01/03/2024': not an ISO date/time"),
    Case("start-relative", "--start today", "error: relative to when the command runs; write the date",
         PLAIN, via="run", options={"start": "today"}, error=r"--start 'today': relative to when the command runs"),
    Case("start-unparsable", "--start 'next monday'", "error: not an ISO date/time or epoch seconds",
         PLAIN, via="run", options={"start": "next monday"}, error=r"--start 'next monday': not an ISO date/time"),
    Case("start-beyond-2262", "--start 2300-01-01 (past pandas' nanosecond range)",
         "parsed exactly; error: after the last event", PLAIN, via="run", options={"start": "2300-01-01"},
         error=r"{file}: the first window starts at 2300-01-01T00:00:00Z, after the last event"),
    Case("start-epoch-huge", "--start 99999999999999999999", "error: too far from 1970 (no integer overflow)",
         PLAIN, via="run", options={"start": "99999999999999999999"},
         error=r"--start '99999999999999999999': too far from 1970"),
    Case("window-huge", "--window 999999999999999999999D", "error: longer than any log (no integer overflow)",
         PLAIN, via="run", options={"window": "999999999999999999999D"},
         error=r"--window '999999999999999999999D': longer than any log"),
    Case("folds-too-many", "--folds 1000000000 --window 1s",
         "error: at most 100,000 windows (instead of running out of memory)", PLAIN, via="run",
         options={"folds": 10**9, "window": "1s"}, error=r"--folds 1000000000: at most 100,000 windows"),
    Case("scale-huge", "the generated log (no --data) with --scale 1e6",
         "error before anything is allocated (instead of a MemoryError): the interactions and memory it would take, "
         "and the largest scale this machine's memory accepts",
         None, via="run", options={"scale": 1e6},
         error=r"--scale 1e\+06: the generated log would hold about 734,813,000,000 interactions and take about "
               r"171,087 GiB while it is generated, more than 50% of this machine's [\d,.]+ GiB; the largest scale "
               r"accepted here is [\d.]+ \(over 120 days\)"),
    Case("output-is-a-file", "--output pointing at an existing file", "error: --output names a file, not a directory (before any work)",
         PLAIN, via="run", options={"output": "@data"}, error=r"--output names a file, not a directory"),
    # ---------------------------------------------------------------- experiments (issue 19)
    Case("leak-test-period-outside", "sweval leakage --leak-test-start 2030-01-01",
         "error: the test period holds no transaction, with the log's span", PLAIN, via="call",
         call=lambda ctx: _leakage(ctx, start=T0 + 3650 * DAY, periods=0),
         error=r"the test period \[2033.*holds no transaction \(the log spans 2024-01-01"),
    Case("leak-periods-beyond-log", "sweval leakage --leak-periods 9 on the log's 4th day",
         "error: J needs more periods than the log has after P (at most 2)", PLAIN, via="call",
         call=lambda ctx: _leakage(ctx, start=T0 + 3 * DAY, periods=9),
         error=r"--leak-periods 9 needs 9 periods .* at most 2"),
    Case("split-ratio-outside", "sweval compare --protocols random-split --split-ratio 1.5",
         "error: the ratio must lie in (0, 1)", PLAIN, via="call",
         call=lambda ctx: run_compare(ctx.config(), ["random-split"], output=ctx.output,
                                      split_ratio=1.5),
         error=r"--split-ratio must be between 0 and 1 \(exclusive\), got 1.5"),
    Case("basket-column-missing", "--basket-col order on a log without that column",
         "error: the missing column is named, with the columns the data has", PLAIN,
         options={"basket_col": "order"}, error=r"missing column\(s\) 'order'; the data has"),
    Case("basket-protocol-without-column", "sweval compare --protocols leave-last-basket, no --basket-col",
         "error before any fit: leave-last-basket needs --basket-col", PLAIN, via="call",
         call=lambda ctx: run_compare(ctx.config(), ["sw-eval", "leave-last-basket"],
                                      output=ctx.output),
         error=r"leave-last-basket needs the basket or session .* --basket-col"),
    Case("gap-window-outside", "sweval gap --start 2030-01-01",
         "error: the deployment window holds no transaction", PLAIN, via="call",
         call=lambda ctx: run_gap(ctx.config(), GapDesign(deploy_start=T0 + 3650 * DAY,
                                                          width_s=DAY), output=ctx.tmp / "gap"),
         error=r"the deployment window starting at .* holds no transaction"),
    Case("gap-cutoff-before-log", "sweval gap --start (the log's 2nd day) --window 3D",
         "error: the cut-off validation window would start before the first transaction", PLAIN,
         via="call", call=lambda ctx: run_gap(ctx.config(), GapDesign(
             deploy_start=T0 + DAY, width_s=3 * DAY), output=ctx.tmp / "gap"),
         error=r"the cut-off validation window \[T − tΔ, T\) starts at .* not after the "
               r"first transaction"),
    # ---------------------------------------------------------------- plugins (docs/plugins.md)
    Case("plugin-module-missing", "--algorithms pop,no_such_pkg.models:Model",
         "error: the module is not found (is its package installed, its folder on PYTHONPATH?)",
         PLAIN, via="run", options={"algorithms": ["pop", "no_such_pkg.models:Model"], "params": {}},
         error=r"algorithm 'no_such_pkg.models:Model': module 'no_such_pkg.models' not found"),
    Case("plugin-attribute-missing", "--algorithms sweval.algorithms.popularity:Nope",
         "error: the module has no such attribute", PLAIN, via="run",
         options={"algorithms": ["sweval.algorithms.popularity:Nope"], "params": {}},
         error=r"module 'sweval.algorithms.popularity' has no attribute 'Nope'"),
    Case("plugin-not-an-algorithm", "--algorithms sweval.data.log:InteractionLog",
         "error: not a subclass of sweval.algorithms.Algorithm", PLAIN, via="run",
         options={"algorithms": ["sweval.data.log:InteractionLog"], "params": {}},
         error=r"algorithm 'sweval.data.log:InteractionLog' is not an algorithm: class InteractionLog"),
    Case("plugin-entry-point-broken", "an installed entry point `broken = no_such_module_x:Model`",
         "error when it is named: the entry point, its package and why it fails to load",
         _plugin_entry_points({"broken": "no_such_module_x:Model"}), via="run",
         options={"algorithms": ["pop", "broken"], "params": {}},
         error=r"algorithm 'broken': the entry point 'no_such_module_x:Model' \(group "
               r"'sweval.algorithms', declared by bad-plugin 1.0\) fails to load: ModuleNotFoundError"),
    Case("plugin-name-clash", "an installed entry point named `pop`",
         "error when `pop` is named: a plugin may not take a built-in's name (rename it, or use its import path)",
         _plugin_entry_points({"pop": "sweval.algorithms.popularity:PopN"}), via="run",
         options={"algorithms": ["pop"], "params": {}},
         error=r"algorithm 'pop': the entry point .* takes the name of a built-in algorithm"),
    Case("plugin-raises-in-fit", "a plugin whose fit raises",
         "its units fail (name and traceback in the log), the others are computed, stored and written; "
         "`sweval run` lists the failed units and exits with 3",
         _failing_plugin, via="run", options={"algorithms": ["pop", "failing_plugin:FailsInFit"],
                                              "params": {}},
         check=check_plugin_failed_alone),
]


# ------------------------------------------------------------------------------------ the test
def _ids(cases: list[Case]) -> list[str]:
    return [case.id for case in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_case(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = None
    if case.build is not None:
        argc = case.build.__code__.co_argcount if hasattr(case.build, "__code__") else 1
        data = case.build(tmp_path, monkeypatch) if argc == 2 else case.build(tmp_path)
    options = dict(case.options)
    output = str(tmp_path / "out")
    if options.get("output") == "@data":
        options["output"] = str(data)
        output = str(data)
    ctx = Context(tmp=tmp_path, data=data, output=output, options=options)

    def act() -> Any:
        if case.via == "load":
            return load_log(data, **options)
        if case.via == "config":
            return EvalConfig.build(**(RUN_DEFAULTS | options))
        if case.via == "call":
            assert case.call is not None
            return case.call(ctx)
        return evaluate_config(ctx.config())

    if case.error is not None:
        with pytest.raises(SwevalError) as caught:
            act()
        pattern = case.error.replace("{file}", re.escape(str(data)) if data else "")
        assert re.search(pattern, str(caught.value), flags=re.DOTALL), str(caught.value)
        assert "\n" not in str(caught.value).strip(), "one line"
    else:
        assert case.check is not None
        case.check(act(), ctx)


# ------------------------------------------------------------------------------------ the CLI
CLI_CASES = [
    # (id, input builder, extra CLI args, exit status, message regex)
    ("cli-corrupt-gzip", text(b"\x1f\x8b\x08\x00garbage", name="log.csv.gz"), [], 2, r"error: .*log\.csv\.gz: cannot .*gzip"),
    ("cli-unparsable-timestamp", text(rows("u1,i1,2024-01-01", "u2,i1,soon")), [], 2,
     r"error: .*log\.csv: column 'timestamp' has 1 unparsable timestamp\(s\) \(data rows 2"),
    ("cli-huge-ids-as-float", parquet(HUGE_FLOAT_IDS), ["--on-invalid", "drop"], 2, r"error: .*column 'user' holds ids read as floating-point"),
    ("cli-seconds-as-ms", PLAIN, ["--time-unit", "ms"], 2, r"error: .*drop --time-unit ms"),
    ("cli-folds-not-a-number", PLAIN, ["--folds", "many"], 2, r"Invalid value for '--folds'"),
    ("cli-config-unknown-field", PLAIN, ["--config", "@config"], 2, r"error: invalid configuration: bogus"),
    ("cli-every-fold-skipped", PLAIN, ["--u-min", "1000"], 2,
     r"(?s)folds: 0 used, 4 skipped.*error: no fold was scored: every fold was skipped \(n_eligible="),
    ("cli-sep-by-name", text(small_frame().to_csv(index=False, sep="|")), ["--sep", "pipe", "--u-min", "2"], 0, r"folds: 4 used"),
    ("cli-sep-unknown", PLAIN, ["--sep", ":"], 2, r"error: invalid configuration: --sep ':': not a separator"),
    ("cli-glob-of-parts", _glob_of_csv_parts, ["--u-min", "2"], 0, r"folds: 4 used"),
]


def _cli_argv(case: tuple, tmp: Path) -> list[str]:
    _id, build, extra, _status, _message = case
    data = build(tmp)
    extra = list(extra)
    if "@config" in extra:
        config = tmp / "eval.toml"
        config.write_text(f'data = "{data}"\nbogus = 1\n')
        extra[extra.index("@config")] = str(config)
    return [
        sys.executable, "-m", "sweval.flows.cli.app", "run", "--data", str(data), "--algorithms", "pop",
        "--window", "1D", "--folds", "4", "--k", "5", "--output", str(tmp / "out"),
        "--no-prefect", "--no-tracking", "--no-progress", *extra,
    ]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess]:
    """Every CLI case, run as concurrent ``sweval run`` processes (each spends ~2 s importing)."""
    env = os.environ | {"COLUMNS": "200"}
    pending = []
    for case in CLI_CASES:
        argv = _cli_argv(case, tmp_path_factory.mktemp(case[0]))
        process = subprocess.Popen(
            argv, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        pending.append((case[0], argv, process))
    done = {}
    for case_id, argv, process in pending:
        try:
            stdout, stderr = process.communicate(timeout=180)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        done[case_id] = subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
    return done


@pytest.mark.slow
@pytest.mark.parametrize("case", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_case(case: tuple, cli_runs: dict[str, subprocess.CompletedProcess]) -> None:
    """The same errors through ``sweval run``: exit status 2, one ``error:`` line, no traceback."""
    case_id, _build, _extra, status, message = case
    result = cli_runs[case_id]
    both = result.stdout + result.stderr
    assert result.returncode == status, both[-3000:]
    assert re.search(message, both), both[-3000:]
    assert "Traceback" not in both
    if status == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) <= 1, result.stderr


# ------------------------------------------------------------------------------------ the docs
def markdown_table() -> str:
    """The catalogue as the Markdown table of docs/reliability.md."""

    def cell(value: str) -> str:
        return value.replace("|", "\\|")

    lines = ["| case | input | behaviour | test id |", "| --- | --- | --- | --- |"]
    for case in CASES:
        lines.append(
            f"| `{case.id}` | {cell(case.input)} | {cell(case.behaviour)} | "
            f"`test_catalogue.py::test_case[{case.id}]` |"
        )
    for case_id, *_ in CLI_CASES:
        lines.append(
            f"| `{case_id}` | {cell(CLI_DOCS[case_id][0])} | {cell(CLI_DOCS[case_id][1])} | "
            f"`test_catalogue.py::test_cli_case[{case_id}]` |"
        )
    return "\n".join(lines)


CLI_DOCS = {
    "cli-corrupt-gzip": ("`sweval run --data log.csv.gz` (garbage inside)", "exit 2, one `error:` line naming the file"),
    "cli-unparsable-timestamp": ("`sweval run` on a log with `soon` as a timestamp", "exit 2, names file, column and row"),
    "cli-huge-ids-as-float": ("`sweval run --on-invalid drop` on a Parquet float column of ids beyond 2**53 with a missing cell", "exit 2, names the column"),
    "cli-seconds-as-ms": ("`sweval run --time-unit ms` on epoch seconds", "exit 2: drop --time-unit ms"),
    "cli-folds-not-a-number": ("`sweval run --folds many`", "exit 2, the option parser's usage error"),
    "cli-config-unknown-field": ("`sweval run --config eval.toml` with `bogus = 1`", "exit 2, names the field"),
    "cli-every-fold-skipped": ("`sweval run --u-min 1000`", "the tables are written and the summary says `folds: 0 used, 4 skipped` and why; then exit 2: `no fold was scored`"),
    "cli-sep-by-name": ("`sweval run --sep pipe` on a `|`-separated file", "exit 0, every fold used"),
    "cli-sep-unknown": ("`sweval run --sep :`", "exit 2, one `error:` line listing the accepted separators"),
    "cli-glob-of-parts": ("`sweval run --data 'events/part-*.csv.gz'`", "exit 0: the parts are one log (the check before any server starts accepts the glob)"),
}


def test_docs_table_lists_every_case() -> None:
    assert len(CASES) + len(CLI_CASES) >= 30
    assert len(set(_ids(CASES))) == len(CASES)
    text_ = DOCS.read_text(encoding="utf-8")
    assert markdown_table() in text_, (
        "docs/reliability.md is out of date: regenerate the table with "
        "`PYTHONPATH=tests .venv/bin/python tests/reliability/test_catalogue.py`"
    )


if __name__ == "__main__":
    print(markdown_table())
