"""Logs read once: ``--data -`` (standard input), named pipes and process substitution
(data/streams.py); the catalogue's ``stream-*`` cases read whole logs the same way."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from sweval_testing import REPO

from sweval.data import streams
from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log, source_files

CSV = "user,item,timestamp\nu1,i1,1704067200\nu2,i1,1704067201\nu1,i2,1704067260\n"


class FakeStdin(io.TextIOWrapper):
    """Standard input holding ``data``, a pipe or a terminal."""

    def __init__(self, data: bytes, *, tty: bool = False) -> None:
        super().__init__(io.BytesIO(data))
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.fixture(autouse=True)
def fresh_streams(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test is a process that has read no stream yet."""
    monkeypatch.setattr(streams, "_COPIES", {})
    monkeypatch.setattr(streams, "_NAMES", {})
    yield


def pipe_in(monkeypatch: pytest.MonkeyPatch, data: bytes, *, tty: bool = False) -> FakeStdin:
    stdin = FakeStdin(data, tty=tty)
    monkeypatch.setattr(sys, "stdin", stdin)
    return stdin


def plain(tmp_path: Path) -> Path:
    path = tmp_path / "plain.csv"
    path.write_text(CSV)
    return path


@pytest.mark.parametrize("data", [CSV.encode(), gzip.compress(CSV.encode())], ids=["csv", "gzip"])
def test_standard_input_reads_like_the_file_and_is_named_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes
) -> None:
    stdin = pipe_in(monkeypatch, data)
    log = load_log("-")
    assert log.source == "<stdin>"
    assert log.fingerprint() == load_log(plain(tmp_path)).fingerprint()
    assert stdin.buffer.read() == b""  # read to its end, once
    assert load_log("-").fingerprint() == log.fingerprint()  # a second load reads the copy
    assert source_files("-") == source_files("-")


def test_json_lines_and_parquet_on_standard_input_are_known_by_their_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = pd.read_csv(plain(tmp_path))
    expected = load_log(plain(tmp_path)).fingerprint()
    pipe_in(monkeypatch, gzip.compress(frame.to_json(orient="records", lines=True).encode()))
    assert load_log("-").fingerprint() == expected
    monkeypatch.setattr(streams, "_COPIES", {})
    frame.to_parquet(tmp_path / "log.parquet")
    pipe_in(monkeypatch, (tmp_path / "log.parquet").read_bytes())
    assert load_log("-").fingerprint() == expected


def test_errors_name_standard_input_not_its_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe_in(monkeypatch, b"user,item,timestamp\nu1,i1,1704067200,9\nu2,i1,1704067201\n")
    with pytest.raises(SwevalError, match=r"^<stdin>: line 2 \(data row 1\) has 4 fields"):
        load_log("-")


def test_a_terminal_as_standard_input_is_refused_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipe_in(monkeypatch, b"", tty=True)
    with pytest.raises(SwevalError, match=r"--data - reads the log from standard input, which is a "
                                          r"terminal here: pipe the log in"):
        load_log("-")


def test_empty_standard_input_is_an_empty_file(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe_in(monkeypatch, b"")
    with pytest.raises(SwevalError, match=r"^<stdin>: the file is empty\."):
        load_log("-")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_read_once_and_its_name_gives_the_format(tmp_path: Path) -> None:
    fifo = tmp_path / "events.jsonl.gz"
    os.mkfifo(fifo)
    lines = pd.read_csv(plain(tmp_path)).to_json(orient="records", lines=True)
    data = gzip.compress(lines.encode())
    threading.Thread(target=fifo.write_bytes, args=(data,), daemon=True).start()
    found: list = []
    reader = threading.Thread(target=lambda: found.append(_load_or_error(fifo)), daemon=True)
    reader.start()
    reader.join(timeout=60)
    if reader.is_alive():  # a second open of the pipe waits for a writer that never comes
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release it
        pytest.fail("the pipe was opened twice: the load waited for a second writer")
    (log,) = found
    assert not isinstance(log, Exception), log
    assert log.source == str(fifo)
    assert log.fingerprint() == load_log(plain(tmp_path)).fingerprint()


def _load_or_error(path: Path) -> object:
    try:
        return load_log(path)
    except Exception as exc:  # noqa: BLE001  (handed to the test's thread, which reports it)
        return exc


def _cli(data: str, output: Path, stdin: bytes = b"") -> tuple[int, str]:
    """``sweval run --data DATA`` through bash (for its process substitution): status, stderr."""
    command = (f"{sys.executable} -m sweval.flows.cli run --data {data} --algorithms pop "
               f"--window 1D --folds 2 --k 5 --u-min 1 --output {output} --no-prefect "
               "--no-tracking --no-progress")
    result = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, input=stdin,
                            timeout=180, check=False)
    return result.returncode, result.stderr.decode(errors="replace")


@pytest.mark.slow
def test_sweval_run_reads_a_pipe_and_a_process_substitution(tmp_path: Path) -> None:
    rows = [f"u{n % 7},i{n % 5},{1704067200 + 3600 * n}" for n in range(72)]
    log = tmp_path / "log.csv.gz"
    log.write_bytes(gzip.compress(("user,item,timestamp\n" + "\n".join(rows) + "\n").encode()))
    for status, stderr in (_cli("-", tmp_path / "piped", stdin=log.read_bytes()),
                           _cli(f"<(zcat {log})", tmp_path / "substituted")):
        assert status == 0, stderr[-2000:]
        assert "Traceback" not in stderr
    tables = [pd.read_csv(tmp_path / name / "results.csv").drop(columns="config_hash")
              for name in ("piped", "substituted")]
    pd.testing.assert_frame_equal(*tables)
