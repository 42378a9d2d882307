"""Every command of the README and of docs/ runs from a clone, or is declared left out, with why.

The commands are the lines of the ``bash`` blocks and the ``$ `` lines of the ``console`` blocks
(with their ``\\`` continuations) of ``README.md``, ``docs/*.md`` and ``docs/*/README.md``. Each
``sweval`` command runs as written, in document order, in one working folder, through the
command line's ``main()`` in this process (the session's Prefect test API and MLflow store), on
the bundled log, a generated one, or a fetched dataset: MovieLens 100K and the Amazon set are
installed for the test from the checked copies in ``../shared/data`` (:func:`datasets.install`:
the same SHA-256 checks as a fetch; no test downloads anything), so ``sweval datasets fetch``
finds them fetched. They share one unit store, as a reader's commands do.

:data:`LEFT_OUT` says why each other command is not run. A command that is neither run nor left
out fails :func:`test_every_doc_command_is_run_or_left_out_with_a_reason`.
"""

from __future__ import annotations

import gzip
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
             *sorted((REPO / "docs").glob("*/README.md"))]


@dataclass(frozen=True)
class Command:
    """One command of a document: where it is and its text (continuations joined)."""

    path: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    def argv(self) -> list[str]:
        """``sweval ...`` as argv, less ``uv run [--no-sync]``, a ``PYTHONPATH=.`` prefix and
        comments."""
        words = shlex.split(self.text.replace("\\\n", " "), comments=True)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        if words[:2] == ["uv", "run"]:
            words = [word for word in words[2:] if word != "--no-sync"]
        return words


def commands() -> list[Command]:
    """Every command of :data:`DOCUMENTS`, in order."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for block in re.finditer(r"^```(bash|console)\n(.*?)^```", text, re.M | re.S):
            first = text[:block.start()].count("\n") + 2
            found += _block_commands(path, first, block[1], block[2])
    return found


def _block_commands(path: Path, first: int, kind: str, body: str) -> list[Command]:
    found, current, start = [], "", 0
    for number, line in enumerate(body.splitlines(), first):
        if kind == "console" and not current:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if not current:
            start = number
            if not line.strip() or line.lstrip().startswith("#"):
                continue
        current += ("\n" if current else "") + line
        if not line.endswith("\\"):
            found.append(Command(path, start, current))
            current = ""
    return found


#: Commands not run here, by a pattern of their text, and why.
LEFT_OUT: list[tuple[str, str]] = [
    (r"pip install|uv sync|apt-get", "installs software (what .ci/run does before the tests)"),
    (r"\bpytest\b", "runs the test suite itself"),
    (r"--data interactions\.csv\.gz|--data /data/", "reads the reader's own log"),
    (r"--data 'events/part-\*\.parquet'",
     "reads part files the reader writes first (tests/data reads the same layout)"),
    (r"--config eval\.toml|--config rolling\.toml", "reads a configuration file the reader writes"),
    (r"my_models:RecentPop",
     "needs the model file the README shows: tests/flows/test_plugins.py runs this block"),
    (r"--task-runner dask", "starts a local Dask cluster: tests/flows/test_dask.py does that"),
    (r"sweval (run|generate) .*--scale 1\b|sweval generate",
     "the policy-bias study at scale 1 (minutes per run on 2 cores): "
     "tests/evaluators/test_policy_bias.py runs it smaller"),
    (r"^sweval serve", "serves a deployment until stopped (tests/flows/test_deploy.py)"),
    (r"compare .*--folds 30|compare --protocols .*--output runs/compare-generated|"
     r"compare --stratify-by policy|compare --data movielens-100k --window 7D --folds 10 "
     r"--u-min 5|compare --data amazon-musical-instruments-5core",
     "a comparison over many folds or configurations (many minutes on 2 cores): "
     "tests/flows/test_compare.py runs the same protocols on a smaller log"),
    (r"--seeds 0,1,2 .*--metrics all --per-user",
     "ALS three times with every metric per user (minutes on 2 cores): "
     "tests/evaluators/test_run.py checks --seeds, --metrics all and --per-user"),
    (r"prune --run runs/latest", "prunes the quick start's run (runs/latest), which is not run "
     "here (minutes on 2 cores); tests/evaluators/test_units.py checks prune --run"),
    (r"--data logs/bias", "reads the logs `sweval generate` writes at scale 1 (left out above)"),
    (r"--horizon \d+ --cadence",
     "staleness, cadence and updates of five algorithms over 12 to 28 folds (minutes on 2 "
     "cores): tests/evaluators/test_retraining.py runs the same options on a hand-built log"),
    (r"--window \w+,|--train-window \w+,",
     "window widths or training-history lengths compared, on MovieLens or a generated log "
     "(a minute or more each on 2 cores): tests/evaluators/test_widths.py runs the same "
     "options on a small log"),
]

#: Programs other than sweval: servers, workers, containers, the reader's shell.
OTHER_PROGRAMS = ("prefect", "dask", "mlflow", "docker", "cp", "mkdir", "export", "source")
#: The fetched datasets some commands read.
FETCHED = ("movielens-100k", "amazon-musical-instruments-5core")
#: Commands that read what the document's earlier runs stored or wrote.
LOOKS_AT_EARLIER_RUNS = re.compile(r"sweval (cache|report) ")


def left_out(command: Command) -> str | None:
    """Why ``command`` is not run here, or None."""
    if command.argv()[:1] and command.argv()[0] in OTHER_PROGRAMS:
        return ("starts servers, workers or containers, or sets the reader's shell up "
                "(docs/production.md, docs/orchestration.md; tests/stack runs that topology)")
    text = " ".join(command.text.replace("\\\n", " ").split())
    for pattern, reason in LEFT_OUT:
        if re.search(pattern, text):
            return reason
    return None


COMMANDS = commands()


def in_order(found: list[Command]) -> list[Command]:
    """The commands to run, in document order, but ``sweval cache`` ones after the rest of
    their document: they look at the units earlier runs stored."""
    return sorted((c for c in found if not left_out(c)),
                  key=lambda c: (DOCUMENTS.index(c.path), "sweval cache" in c.text, c.line))


def test_every_doc_command_is_run_or_left_out_with_a_reason() -> None:
    """Every command is a ``sweval`` command this test runs, or left out with its reason; and no
    document sends the reader outside the clone for its data."""
    for command in COMMANDS:
        assert left_out(command) or command.argv()[:1] == ["sweval"], command.where
        assert "../shared/data" not in command.text, command.where
    run = [c for c in COMMANDS if not left_out(c)]
    assert len(run) >= 20 and len(COMMANDS) > len(run)
    print(f"{len(run)} of {len(COMMANDS)} doc commands run; left out:")
    for command in COMMANDS:
        if left_out(command):
            print(f"  {command.where}: {left_out(command)}")


@pytest.fixture(scope="module")
def workplace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working folder every command runs in, with the datasets installed (a fresh data
    folder, a fresh unit store beside it)."""
    from sweval.data import datasets

    folder = tmp_path_factory.mktemp("doc-commands")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SWEVAL_DATA_DIR", str(folder / "datasets"))
        if (SHARED / "movielens-100k").is_dir():
            ml = SHARED / "movielens-100k"
            files = {name: gzip.decompress((ml / f"{name}.gz").read_bytes())
                     for name in ("u.data", "u.item", "u.user")}
            datasets.install("movielens-100k",
                             files | {"README": (ml / "ORIGINAL_README.txt").read_bytes()})
        amazon = SHARED / "amazon-musical-instruments-5core"
        if amazon.is_dir():
            datasets.install("amazon-musical-instruments-5core", {
                "reviews_Musical_Instruments_5.json":
                    gzip.decompress((amazon / "Musical_Instruments_5.json.gz").read_bytes())})
    (folder / "work").mkdir()
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("command", in_order(COMMANDS), ids=lambda c: c.where)
def test_doc_command_runs(command: Command, workplace: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture) -> None:
    from sweval.flows.cli.app import main

    missing = [name for name in FETCHED if name in command.text
               and not (workplace / "datasets" / name).is_dir()]
    if missing:
        pytest.skip(f"{', '.join(missing)}: no copy in ../shared/data to install (a fetch "
                    "would download it)")
    absent = [name for name in FETCHED if not (workplace / "datasets" / name).is_dir()]
    if absent and LOOKS_AT_EARLIER_RUNS.match(" ".join(command.argv())):
        pytest.skip(f"looks at the units or outputs of the document's earlier runs, some of "
                    f"which were skipped ({', '.join(absent)}: no copy in ../shared/data)")
    monkeypatch.setenv("SWEVAL_DATA_DIR", str(workplace / "datasets"))
    monkeypatch.setenv("SWEVAL_CACHE", str(workplace / "units"))
    monkeypatch.chdir(workplace / "work")
    monkeypatch.setattr(sys, "argv", command.argv())
    monkeypatch.setattr(sys, "stdin", open("/dev/null"))  # noqa: SIM115 (closed by the OS)
    try:
        main()
        status = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    assert status == 0, f"{command.where}: {' '.join(command.argv())}\n{out[-2000:]}{err[-3000:]}"
