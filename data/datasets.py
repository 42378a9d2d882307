"""Public datasets fetched on request: official address, SHA-256 checked, licence shown.

::

    sweval datasets list                     what can be fetched, what is here, where
    sweval datasets fetch movielens-100k     shows the licence, asks, downloads, checks, stores
    sweval run --data movielens-100k         then usable by name, like a bundled dataset

Nothing is downloaded unless asked for. A fetch reads the file from its publisher's address
(or ``--from`` a copy: a path or another URL), checks its SHA-256 against the one recorded
here, takes out the files a run needs and checks each of their SHA-256 too, then moves the
dataset's folder into place in one rename (``<data_home>/<name>/``, with ``.sweval-dataset.json``
recording where it came from): a failed or interrupted fetch leaves nothing that could be read
as the dataset. A download whose checksum differs (a corrupted transfer, a changed file
upstream) is refused and deleted.

The datasets are for research use under their publishers' terms (shown before each fetch, and
kept with the data); SW-EVAL does not redistribute them.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sweval.data.errors import SwevalError
from sweval.data.user_dirs import data_home

#: The record a fetched dataset's folder holds, written before the folder is moved into place.
RECORD = ".sweval-dataset.json"
#: Bytes read from the network at a time.
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Dataset:
    """A public dataset SW-EVAL can fetch.

    Attributes:
        name: the name ``--data`` takes.
        title: what it is, in a few words.
        url: the publisher's address of the file.
        download_bytes: the file's size, said before downloading.
        download_sha256: the SHA-256 of the file as published; None where no checksum of the
            published file could be confirmed (then ``files`` alone are checked).
        files: ``{stored name: (SHA-256 of its bytes, where it comes from)}``: the files kept,
            each taken from the download by ``unpack`` and checked.
        log: the stored file ``--data NAME`` reads, and its format.
        licence: the terms, in short, shown before fetching.
        licence_url: where the full terms are.
        citation: what to cite.
        derive: makes further files from the checked ones (name -> function of the folder).
    """

    name: str
    title: str
    url: str
    download_bytes: int
    download_sha256: str | None
    files: dict[str, tuple[str, str]]
    log: tuple[str, Literal["movielens", "csv"]]
    licence: str
    licence_url: str
    citation: str
    derive: dict[str, Callable[[Path], bytes]] = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        """Where the dataset is (or would be) stored."""
        return data_home() / self.name

    @property
    def fetched(self) -> bool:
        """Whether a complete fetch is stored (its record exists)."""
        return (self.directory / RECORD).is_file()

    @property
    def log_path(self) -> Path:
        return self.directory / self.log[0]


def _zip_member(member: str) -> Callable[[bytes], bytes]:
    """Reads one named member of a zip archive (never extracts anything else)."""
    def read(download: bytes) -> bytes:
        with zipfile.ZipFile(io.BytesIO(download)) as archive:
            return archive.read(member)
    return read


def _gunzip(download: bytes) -> bytes:
    return gzip.decompress(download)


def _amazon_interactions(folder: Path) -> bytes:
    """``interactions.csv`` from the reviews (one JSON object a line): ``user,item,rating,
    timestamp`` = reviewerID, asin, overall, unixReviewTime (epoch seconds, day resolution),
    every review in the file's order."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["user", "item", "rating", "timestamp"])
    with open(folder / "reviews_Musical_Instruments_5.json", encoding="utf-8") as reviews:
        for line in reviews:
            if line.strip():
                review = json.loads(line)
                writer.writerow([review["reviewerID"], review["asin"], review["overall"],
                                 review["unixReviewTime"]])
    return out.getvalue().encode()


_GROUPLENS = "https://files.grouplens.org/datasets/movielens"

DATASETS: dict[str, Dataset] = {
    "movielens-100k": Dataset(
        name="movielens-100k",
        title="MovieLens 100K: 100,000 ratings, 943 users, 1,682 films, Sep 1997 to Apr 1998",
        url=f"{_GROUPLENS}/ml-100k.zip",
        download_bytes=4_924_029,
        download_sha256="50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
        files={
            "u.data": ("06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
                       "ml-100k/u.data"),
            "u.item": ("553841ebc7de3a0fd0d6b62a204ea30c1e651aacfb2814c7a6584ac52f2c5701",
                       "ml-100k/u.item"),
            "u.user": ("f120e114da2e8cf314fd28f99417c94ae9ddf1cb6db8ce0e4b5995d40e90e62c",
                       "ml-100k/u.user"),
            "README": ("4883b8cf340ed0059971b33f56ad3adc88a40792108ebca3d24aafc4c82e8b52",
                       "ml-100k/README"),
        },
        log=("u.data", "movielens"),
        licence="GroupLens Research, University of Minnesota. Research use only: no commercial "
                "or revenue-bearing use without permission; no redistribution without separate "
                "permission; no endorsement implied; cite the paper below in any publication "
                "(the full terms are in the dataset's README, kept with it).",
        licence_url="https://files.grouplens.org/datasets/movielens/ml-100k-README.txt",
        citation="F. Maxwell Harper and Joseph A. Konstan. 2015. The MovieLens Datasets: History "
                 "and Context. ACM TiiS 5(4): 19.",
    ),
    "amazon-musical-instruments-5core": Dataset(
        name="amazon-musical-instruments-5core",
        title="Amazon Musical Instruments reviews, 5-core (2014 release): 10,261 reviews, "
              "1,429 users, 900 items, 2004 to 2014, day resolution",
        url="https://snap.stanford.edu/data/amazon/productGraph/categoryFiles/"
            "reviews_Musical_Instruments_5.json.gz",
        download_bytes=2_500_000,
        download_sha256=None,
        files={
            "reviews_Musical_Instruments_5.json": (
                "8e1aaab451ba61484dfe393f53d11886246bc426c7046b180b62352580f68c1d",
                "the download, decompressed"),
        },
        log=("interactions.csv", "csv"),
        licence="Amazon review data, J. McAuley (UCSD), distributed for research use: no "
                "commercial use; cite the papers below.",
        licence_url="https://cseweb.ucsd.edu/~jmcauley/datasets.html",
        citation="R. He and J. McAuley. 2016. Ups and downs: Modeling the visual evolution of "
                 "fashion trends with one-class collaborative filtering. WWW. J. McAuley, C. "
                 "Targett, Q. Shi and A. van den Hengel. 2015. Image-based recommendations on "
                 "styles and substitutes. SIGIR.",
        derive={"interactions.csv": _amazon_interactions},
    ),
}


def _reader(dataset: Dataset, source: str) -> Callable[[bytes], bytes]:
    """How a stored file of ``dataset`` is taken from the download."""
    if source.startswith("ml-100k/"):
        return _zip_member(source)
    if source == "the download, decompressed":
        return _gunzip
    raise AssertionError(f"{dataset.name}: no reader for {source!r}")


def dataset(name: str) -> Dataset:
    """The dataset named ``name``.

    Raises:
        SwevalError: no such dataset, naming those there are.
    """
    if name not in DATASETS:
        raise SwevalError(f"no dataset named {name!r} to fetch (there are: "
                          f"{', '.join(DATASETS)}; `sweval datasets list` shows them).")
    return DATASETS[name]


def fetched_log(name: str) -> Path:
    """The file ``--data NAME`` reads, for a fetched dataset.

    Raises:
        SwevalError: the dataset is not fetched yet, saying how to fetch it.
    """
    found = dataset(name)
    if not found.fetched:
        raise SwevalError(
            f"{name} is not here yet: `sweval datasets fetch {name}` downloads it "
            f"({_megabytes(found.download_bytes)} from {_host(found.url)}, research use only) "
            f"into {found.directory}.")
    return found.log_path


def fetch(name: str, *, source: str | None = None,
          say: Callable[[str], None] = lambda _line: None) -> Path:
    """Download ``name`` (from its publisher, or ``source``: a path or a URL), check it, store
    it; the dataset's folder. A dataset already fetched is left as it is.

    The licence is the caller's to show and have accepted first (:func:`licence_text`).

    Raises:
        SwevalError: the download failed, or a checksum differs (nothing is kept then).
    """
    found = dataset(name)
    if found.fetched:
        say(f"{name}: already fetched, in {found.directory}")
        return found.directory
    where = source or found.url
    say(f"downloading {name} from {where} (about {_megabytes(found.download_bytes)})")
    download = _read(where, limit=4 * found.download_bytes)
    if found.download_sha256 is not None:
        _check(f"{where}", download, found.download_sha256)
    contents = {}
    for stored, (sha256, origin) in found.files.items():
        try:
            contents[stored] = _reader(found, origin)(download)
        except (zipfile.BadZipFile, KeyError, OSError, EOFError) as exc:
            raise SwevalError(f"{where}: not the published {name} file ({origin} cannot be "
                              f"read: {exc}); nothing was kept.") from exc
        _check(f"{where}: {origin}", contents[stored], sha256)
    _store(found, contents, {"url": where,
                             "download_sha256": hashlib.sha256(download).hexdigest()})
    say(f"{name}: checked and stored in {found.directory}")
    return found.directory


def install(name: str, files: dict[str, bytes]) -> Path:
    """Store ``name`` from its files' bytes already at hand (a copy kept elsewhere), each
    checked against its SHA-256 as a fetch checks them; the dataset's folder. A dataset
    already fetched is left as it is.

    Raises:
        SwevalError: a file missing or whose checksum differs (nothing is kept then).
    """
    found = dataset(name)
    if found.fetched:
        return found.directory
    for stored, (sha256, _origin) in found.files.items():
        if stored not in files:
            raise SwevalError(f"{name}: {stored} is missing; nothing was kept.")
        _check(f"{name}: {stored}", files[stored], sha256)
    _store(found, {stored: files[stored] for stored in found.files}, {"url": None})
    return found.directory


def _store(found: Dataset, contents: dict[str, bytes], origin: dict[str, object]) -> None:
    """Write the checked ``contents``, the derived files and the record into a private folder
    beside the dataset's, then rename it into place (a kill leaves only a hidden ``.tmp``
    folder, which no name resolves to)."""
    home = data_home()
    home.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{found.name}.", suffix=".tmp", dir=home))
    try:
        for stored, content in contents.items():
            (staging / stored).write_bytes(content)
        for stored, make in found.derive.items():
            (staging / stored).write_bytes(make(staging))
        record = {"name": found.name, **origin,
                  "stored": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "files": {stored: sha256 for stored, (sha256, _) in found.files.items()},
                  "licence": found.licence, "licence_url": found.licence_url,
                  "citation": found.citation}
        (staging / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        _move_into_place(staging, found.directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def licence_text(name: str) -> str:
    """What to show before fetching ``name``: what it is, where from, its terms and citation."""
    found = dataset(name)
    return (f"{found.name}: {found.title}\n"
            f"  from:     {found.url} ({_megabytes(found.download_bytes)})\n"
            f"  licence:  {found.licence}\n"
            f"  terms:    {found.licence_url}\n"
            f"  cite:     {found.citation}")


def _read(where: str, *, limit: int) -> bytes:
    """The bytes at ``where`` (a path or an http(s)/file URL), at most ``limit`` of them.

    Raises:
        SwevalError: unreachable, refused, or larger than ``limit``.
    """
    if "://" not in where:
        path = Path(where).expanduser()
        try:
            size = path.stat().st_size
            if size > limit:
                raise SwevalError(f"{path}: {size:,} bytes, far more than the published file.")
            return path.read_bytes()
        except OSError as exc:
            raise SwevalError(f"{path}: cannot read it ({exc.strerror or exc}).") from exc
    import urllib.error
    import urllib.request

    request = urllib.request.Request(where, headers={"User-Agent": "sweval"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (asked for)
            chunks, total = [], 0
            while chunk := response.read(_CHUNK):
                total += len(chunk)
                if total > limit:
                    raise SwevalError(f"{where}: more than {limit:,} bytes, far more than the "
                                      "published file; stopped.")
                chunks.append(chunk)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise SwevalError(
            f"{where}: cannot download it ({reason}). Download it by other means and give "
            "the file with --from PATH (it is checked all the same).") from exc
    return b"".join(chunks)


def _check(what: str, content: bytes, sha256: str) -> None:
    """Raise unless ``content``'s SHA-256 is ``sha256``."""
    actual = hashlib.sha256(content).hexdigest()
    if actual != sha256:
        raise SwevalError(
            f"{what}: SHA-256 {actual}, expected {sha256}: not the published file (a damaged "
            "transfer, or a file changed at its source); nothing was kept.")


def _move_into_place(staging: Path, directory: Path) -> None:
    """Rename the checked folder to ``directory``; one left there without a record (a copy put
    there by hand, an interrupted older fetch) is moved aside, never deleted."""
    if directory.exists() and not (directory / RECORD).is_file():
        aside = directory.with_name(f"{directory.name}.before-{int(time.time())}")
        directory.rename(aside)
    with contextlib.suppress(OSError):
        os.chmod(staging, 0o755)  # mkdtemp's folder is private; the data is not secret
    staging.rename(directory)


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _host(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]
