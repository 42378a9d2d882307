"""``sweval datasets``: public datasets fetched on request, checked, stored, then named by --data.

Every download here is from a loopback HTTP server (``http.server`` in a thread) serving
fixtures made by the test: no test reaches the internet (``urlopen`` of any other address
fails the test). The real registry entries are checked against the copies in ``../shared/data``
where they exist.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import sys
import threading
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sweval.data import datasets
from sweval.data.datasets import DATASETS, RECORD, Dataset
from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
#: A tiny MovieLens u.data: tab-separated user, item, rating, epoch seconds, no header.
U_DATA = b"".join(f"{u}\t{i}\t{1 + (u + i) % 5}\t{880000000 + 3600 * (7 * u + i)}\n".encode()
                  for u in range(1, 6) for i in range(1, 9))


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def ml_zip(u_data: bytes = U_DATA) -> bytes:
    """An archive laid out as GroupLens' ml-100k.zip (members under ``ml-100k/``)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("ml-100k/u.data", u_data)
        archive.writestr("ml-100k/README", b"terms: research use only\n")
        archive.writestr("ml-100k/u.genre", b"not taken\n")
    return buffer.getvalue()


class Server:
    """Serves ``files`` (name -> bytes) on 127.0.0.1 and counts the requests."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files, self.requests = files, []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.requests.append(self.path)
                body = server.files.get(self.path.lstrip("/"))
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *_args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    served = Server({})
    try:
        yield served
    finally:
        served.close()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Datasets go to a folder of this test's; any download from an address other than the
    loopback fails the test."""
    monkeypatch.setenv("SWEVAL_DATA_DIR", str(tmp_path / "datasets"))
    real = urllib.request.urlopen

    def loopback(request, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        url = request.full_url if isinstance(request, urllib.request.Request) else request
        assert url.startswith("http://127.0.0.1:"), f"a test reached for {url}"
        return real(request, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", loopback)


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch, server: Server) -> Dataset:
    """A dataset registered as ``tiny-ml``, published as ``server``'s ml-100k.zip."""
    archive = ml_zip()
    server.files["ml-100k.zip"] = archive
    entry = replace(
        DATASETS["movielens-100k"], name="tiny-ml", url=server.url("ml-100k.zip"),
        download_bytes=len(archive), download_sha256=sha256(archive),
        files={"u.data": (sha256(U_DATA), "ml-100k/u.data"),
               "README": (sha256(b"terms: research use only\n"), "ml-100k/README")})
    monkeypatch.setitem(DATASETS, "tiny-ml", entry)
    return entry


def cli(monkeypatch: pytest.MonkeyPatch, *argv: str, stdin: str = "") -> int:
    """``sweval ARGV`` in this process, standard input ``stdin`` (not a terminal); its status."""
    from sweval.flows.cli.app import main

    monkeypatch.setattr(sys, "argv", ["sweval", *argv])
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_fetch_shows_the_licence_checks_stores_and_the_name_then_reads_it(
    tiny: Dataset, server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert cli(monkeypatch, "datasets", "fetch", "tiny-ml", "--accept-licence") == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "licence: GroupLens Research" in printed and "cite: F. Maxwell Harper" in printed
    assert f"checked and stored in {tiny.directory}" in printed and "--data tiny-ml" in printed
    assert server.requests == ["/ml-100k.zip"]
    assert (tiny.directory / "u.data").read_bytes() == U_DATA
    assert sorted(p.name for p in tiny.directory.iterdir()) == [RECORD, "README", "u.data"]
    record = json.loads((tiny.directory / RECORD).read_text())
    assert record["url"] == tiny.url and record["download_sha256"] == tiny.download_sha256
    log = load_log("tiny-ml")
    assert (log.n_users, log.n_items, len(log)) == (5, 8, 40)

    assert cli(monkeypatch, "datasets", "fetch", "tiny-ml") == 0  # asks nothing, fetches nothing
    assert "already fetched" in capsys.readouterr().out and server.requests == ["/ml-100k.zip"]
    assert cli(monkeypatch, "datasets", "list") == 0
    assert "fetched" in capsys.readouterr().out


def test_a_corrupted_download_fails_the_checksum_and_nothing_is_kept(
    tiny: Dataset, server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    damaged = bytearray(server.files["ml-100k.zip"])
    damaged[len(damaged) // 2] ^= 0xFF  # one byte flipped in transit
    server.files["ml-100k.zip"] = bytes(damaged)
    assert cli(monkeypatch, "datasets", "fetch", "tiny-ml", "--accept-licence") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"SHA-256 {sha256(bytes(damaged))}, expected {tiny.download_sha256}" in err
    assert "not the published file" in err and "nothing was kept" in err
    home = tiny.directory.parent
    assert not tiny.directory.exists() and (not home.exists() or list(home.iterdir()) == [])
    with pytest.raises(SwevalError, match="tiny-ml is not here yet: `sweval datasets fetch"):
        load_log("tiny-ml")


def test_a_member_that_differs_fails_its_own_checksum(
    tiny: Dataset, server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Where the published file has no recorded checksum (or matches it but holds other data),
    each stored file's own SHA-256 is checked."""
    other = ml_zip(U_DATA.replace(b"\t5\t", b"\t4\t", 1))
    server.files["ml-100k.zip"] = other
    monkeypatch.setitem(DATASETS, "tiny-ml", replace(tiny, download_sha256=None))
    assert cli(monkeypatch, "datasets", "fetch", "tiny-ml", "--accept-licence") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "ml-100k/u.data: SHA-256" in err and f"expected {sha256(U_DATA)}" in err
    assert not tiny.directory.exists()


def test_nothing_is_downloaded_unless_the_licence_is_accepted(
    tiny: Dataset, server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert cli(monkeypatch, "datasets", "fetch", "tiny-ml") == 2  # stdin is no terminal
    out, err = capsys.readouterr()
    assert "licence: GroupLens Research" in " ".join(out.split())
    assert "its terms (above) must be accepted first" in " ".join(err.split())
    assert server.requests == [] and not tiny.directory.exists()

    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr("typer.confirm", lambda *_a, **_k: False)
    from sweval.flows.cli.app import main

    monkeypatch.setattr(sys, "argv", ["sweval", "datasets", "fetch", "tiny-ml"])
    with pytest.raises(SystemExit) as stopped:
        main()
    assert stopped.value.code == 1 and "nothing downloaded" in capsys.readouterr().out
    assert server.requests == []

    import sweval

    with pytest.raises(SwevalError, match=r"sweval.fetch\('tiny-ml', accept_licence=True\)"):
        sweval.fetch("tiny-ml")
    assert "licence:  GroupLens Research" in capsys.readouterr().out and server.requests == []
    assert sweval.fetch("tiny-ml", accept_licence=True) == tiny.directory
    frame = sweval.datasets().set_index("name")
    assert frame.loc["tiny-ml", "here"] == "fetched"
    assert frame.loc["movielens-latest-small", "here"] == "bundled"


def test_a_named_dataset_not_yet_fetched_says_how_and_downloads_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(datasets, "_read", lambda *_a, **_k: pytest.fail("downloaded"))
    assert cli(monkeypatch, "run", "--no-prefect", "--no-tracking",
                  "--data", "movielens-100k") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "movielens-100k is not here yet: `sweval datasets fetch movielens-100k` downloads " \
           "it (4.9 MB from files.grouplens.org, research use only)" in err
    assert cli(monkeypatch, "datasets", "fetch", "no-such-set") == 2
    assert "no dataset named 'no-such-set'" in capsys.readouterr().err


def test_from_takes_a_local_copy_checked_the_same(
    tiny: Dataset, server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "ml-100k.zip"
    copy.write_bytes(server.files["ml-100k.zip"])
    assert cli(monkeypatch, "datasets", "fetch", "tiny-ml", "--from", str(copy),
                  "--accept-licence") == 0
    assert server.requests == [] and (tiny.directory / "u.data").read_bytes() == U_DATA


def test_an_unreachable_address_is_one_clear_error(
    tiny: Dataset, server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(DATASETS, "tiny-ml", replace(tiny, url=server.url("gone.zip")))
    assert cli(monkeypatch, "datasets", "fetch", "tiny-ml", "--accept-licence") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{server.url('gone.zip')}: cannot download it (" in err and "--from PATH" in err
    assert "Traceback" not in err and not tiny.directory.exists()


def test_the_amazon_reviews_become_a_log_of_user_item_rating_timestamp(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    reviews = b"".join(json.dumps({
        "reviewerID": f"A{u}", "asin": f"B{i:03d}", "overall": 5.0 - i % 3, "reviewText": "ok",
        "unixReviewTime": 1_300_000_000 + 86400 * (u + 3 * i)}).encode() + b"\n"
        for u in range(4) for i in range(5))
    server.files["reviews.json.gz"] = gzip.compress(reviews)
    entry = replace(DATASETS["amazon-musical-instruments-5core"], name="tiny-amazon",
                    url=server.url("reviews.json.gz"),
                    files={"reviews_Musical_Instruments_5.json": (sha256(reviews),
                                                                  "the download, decompressed")})
    monkeypatch.setitem(DATASETS, "tiny-amazon", entry)
    datasets.fetch("tiny-amazon")
    lines = (entry.directory / "interactions.csv").read_text().splitlines()
    assert lines[:2] == ["user,item,rating,timestamp", "A0,B000,5.0,1300000000"]
    log = load_log("tiny-amazon")
    assert (log.n_users, log.n_items, len(log)) == (4, 5, 20)


@pytest.mark.skipif(not (SHARED / "movielens-100k").is_dir(), reason="../shared/data not present")
def test_the_registered_checksums_are_those_of_the_published_files() -> None:
    """The stored files' SHA-256 recorded for MovieLens 100K and the Amazon set match the
    copies in ../shared/data (GroupLens' files byte for byte, gzip-compressed), and a copy
    installed from them is the log the docs' tables were measured on."""
    ml = SHARED / "movielens-100k"
    files = {name: gzip.decompress((ml / f"{name}.gz").read_bytes())
             for name in ("u.data", "u.item", "u.user")}
    files["README"] = (ml / "ORIGINAL_README.txt").read_bytes()
    with pytest.raises(SwevalError, match="movielens-100k: u.data: SHA-256"):
        datasets.install("movielens-100k", files | {"u.data": files["u.data"][:-1]})
    assert not DATASETS["movielens-100k"].directory.exists()
    datasets.install("movielens-100k", files)
    log = load_log("movielens-100k")
    assert (log.n_users, log.n_items, len(log)) == (943, 1682, 100_000)
    amazon = SHARED / "amazon-musical-instruments-5core"
    datasets.install("amazon-musical-instruments-5core", {
        "reviews_Musical_Instruments_5.json":
            gzip.decompress((amazon / "Musical_Instruments_5.json.gz").read_bytes())})
    log = load_log("amazon-musical-instruments-5core")
    assert (log.n_users, log.n_items, len(log)) == (1429, 900, 10_261)


def test_the_publishers_addresses_are_official_and_https() -> None:
    assert DATASETS["movielens-100k"].url == \
        "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
    assert all(entry.url.startswith("https://") for entry in DATASETS.values())
