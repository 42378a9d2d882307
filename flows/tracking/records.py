"""What a tracked run records besides metrics: the output directory's run record
(``tracking.json``), flattened params, the code's provenance (package version, git commit), and
the params and tags that describe a parent run and an algorithm's child run."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import RUN_FIELDS, EvalConfig

#: The run record in an output directory: tracking URI, experiment, parent (and child) run ids.
STATE_FILE = "tracking.json"


def read_state(path: Path) -> dict[str, Any]:
    """The run record at ``path``; empty when missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_state(path: Path, state: Mapping[str, Any]) -> None:
    """Replace the run record at ``path`` atomically."""
    from sweval.evaluators.units.files import atomic_write_text

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(state, indent=2))  # no temporary file left on failure
    except OSError as exc:
        raise SwevalError(f"{path}: cannot record the MLflow run ({exc}).") from exc


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested values as MLflow params: dotted names, lists comma-separated, all text."""
    flat: dict[str, str] = {}
    for name, value in values.items():
        key = f"{prefix}{name}"
        if isinstance(value, Mapping):
            flat |= flatten(value, prefix=f"{key}.")
        elif isinstance(value, list | tuple):
            flat[key] = ",".join(map(str, value))
        else:
            flat[key] = str(value)
    return flat


def algorithm_params(config: EvalConfig, algorithm: str) -> dict[str, str]:
    """An algorithm child's params: its resolved hyper-parameters (defaults, then ``--set``,
    then a variant's own), under its label."""
    from sweval.evaluators.config.text import entry_label
    from sweval.evaluators.units.algorithm_spec import AlgorithmSpec

    entry = {entry_label(entry): entry for entry in config.algorithms}.get(algorithm, algorithm)
    try:
        spec = AlgorithmSpec.from_entry(entry, config.params)
    except SwevalError:
        return {"algorithm": algorithm} | flatten(dict(config.params.get(algorithm, {})))
    return {"algorithm": spec.label, "registry_name": spec.name} | flatten(spec.canonical)


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sweval")
    except PackageNotFoundError:
        return "unknown"


def git_commit() -> tuple[str | None, bool]:
    """The commit of the SW-EVAL checkout, and whether tracked files differ from it."""
    root = Path(__file__).resolve().parents[2]  # flows/tracking/records.py -> the checkout
    if not (root / ".git").exists():
        return None, False
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD", "--"],
            capture_output=True, timeout=10,
        ).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None, False
    return head or None, dirty




def parent_params_and_tags(
    config: EvalConfig,
    *,
    key: str,
    fingerprint: str,
    source: str,
    mode: str,
    flow_run_id: str | None,
    flow_run_name: str | None,
) -> tuple[dict[str, str], dict[str, str]]:
    """A parent run's params (the result-relevant configuration, flattened; write-once) and
    tags (run key, data, provenance, orchestration fields, the Prefect flow run)."""
    result_fields = config.model_dump(exclude=set(RUN_FIELDS))  # tags: a rerun may change them
    if mode == "rolling":
        result_fields.pop("folds")  # grows with the data; tag sweval.n_folds instead
    if config.data is not None:  # the generator's settings say nothing about a real log
        result_fields.pop("scale")
        result_fields.pop("seed")
    params = flatten(result_fields)
    tags = {
        "sweval.run_key": key,
        "sweval.config_hash": key if mode == "rolling" else config.result_hash(),
        "sweval.data_fingerprint": fingerprint,
        "sweval.data_source": source,
        "sweval.dataset": config.dataset_name,
        "sweval.mode": mode,
        "sweval.output_dir": str(Path(config.output).resolve()),
        "sweval.version": package_version(),
        **{  # as dumped: a tracking URI's password masked
            f"sweval.config.{name}": str(value)
            for name, value in sorted(config.model_dump(include=set(RUN_FIELDS)).items())
        },
    }
    commit, dirty = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
        tags["sweval.git_dirty"] = str(dirty).lower()
    if flow_run_id:
        tags["prefect.flow_run_id"] = str(flow_run_id)
    if flow_run_name:
        tags["prefect.flow_run_name"] = str(flow_run_name)
    return params, tags
