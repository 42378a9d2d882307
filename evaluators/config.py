"""The evaluation configuration: one validated object, from the command line, a file or code.

Everything a run needs to be repeated is here; ``config.json`` in the output directory is this
object dumped. :meth:`EvalConfig.result_hash` covers exactly the fields that change results,
so a rerun with the same data and the same hash can resume from finished units.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sweval.data.errors import SwevalError

#: Every algorithm the project ships, in display order.
ALL_ALGORITHMS = ["pop", "pop-n", "item-knn", "user-knn", "svd", "als"]
#: Fields that do not change the numbers (where to write, how to orchestrate, where to track).
_NON_RESULT_FIELDS = {
    "output", "cache", "experiment", "tracking_uri", "task_runner", "dask_address", "workers",
    "progress", "tracking",
}


class EvalConfig(BaseModel):
    """Options of ``sweval run`` (see ``sweval run --help`` for each one's meaning)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # data
    data: str | None = Field(
        default=None,
        description="log file or bundled dataset name; None = a generated log (scale, seed)",
    )
    format: Literal["auto", "csv", "parquet", "movielens"] = "auto"
    user_col: str | None = None
    item_col: str | None = None
    time_col: str | None = None
    policy_col: str | None = None
    time_unit: Literal["s", "ms"] = "s"
    dedup: Literal["first", "none"] = "first"
    on_invalid: Literal["error", "drop"] = "error"
    scale: float = Field(default=0.1, gt=0, description="scale of the generated log")
    seed: int = Field(default=0, description="seed of the generated log")

    # protocol
    window: str = "1D"
    folds: int = Field(default=30, ge=1)
    start: str | None = None
    train_window: str | None = None
    k: list[int] = Field(default_factory=lambda: [5, 10, 15, 20])
    u_min: int = Field(default=100, ge=0)
    relevance: Literal["all", "first"] = "all"
    stratify_by: str | None = None
    stratify_mode: Literal["subset", "test"] = "subset"

    # algorithms
    algorithms: list[str] = Field(default_factory=lambda: list(ALL_ALGORITHMS))
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)

    # where and how
    output: str = "runs/latest"
    cache: str | None = Field(
        default=None,
        description="unit store shared by runs and commands (default: $SWEVAL_CACHE, else "
        "<output>/units)",
    )
    experiment: str | None = None
    tracking_uri: str | None = None
    task_runner: Literal["sequential", "threads", "dask"] = "sequential"
    dask_address: str | None = None
    workers: int = Field(default=1, ge=1)
    progress: bool = True
    tracking: bool = Field(default=True, description="log the run to MLflow")

    @field_validator("k")
    @classmethod
    def _check_k(cls, ks: list[int]) -> list[int]:
        if not ks:
            raise ValueError("give at least one k")
        if any(k < 1 for k in ks):
            raise ValueError(f"every k must be ≥ 1, got {ks}")
        return sorted(set(ks))

    @field_validator("algorithms")
    @classmethod
    def _check_algorithms(cls, names: list[str]) -> list[str]:
        if not names:
            raise ValueError("give at least one algorithm")
        if len(set(names)) != len(names):
            raise ValueError(f"an algorithm is listed twice: {names}")
        return names

    # ------------------------------------------------------------------ derived
    @property
    def dataset_name(self) -> str:
        """A short name of the data, for experiment and run names."""
        if self.data is None:
            return f"generated-s{self.scale:g}-seed{self.seed}"
        name = Path(self.data).name
        for suffix in (".gz", ".csv", ".parquet", ".data", ".dat", ".tsv"):
            name = name.removesuffix(suffix)
        parent = Path(self.data).parent.name
        return f"{parent}-{name}" if name in ("u", "ratings", "interactions") and parent else name

    def result_hash(self) -> str:
        """Hash of every field that can change a number in ``results.csv``."""
        relevant = self.model_dump(exclude=_NON_RESULT_FIELDS)
        text = json.dumps(relevant, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ I/O
    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> EvalConfig:
        """Read a TOML, YAML or JSON configuration file; ``overrides`` win over the file.

        Raises:
            SwevalError: unreadable file, bad syntax or invalid options.
        """
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise SwevalError(f"{path}: cannot read the configuration ({exc}).") from exc
        try:
            if path.suffix == ".toml":
                raw = tomllib.loads(text)
            elif path.suffix in (".yaml", ".yml"):
                import yaml  # installed with prefect

                raw = yaml.safe_load(text) or {}
            else:
                raw = json.loads(text)
        except Exception as exc:
            raise SwevalError(f"{path}: cannot parse the configuration ({exc}).") from exc
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return cls.build(**raw)

    @classmethod
    def build(cls, **values: Any) -> EvalConfig:
        """Validate options, turning pydantic's errors into one readable :class:`SwevalError`."""
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc'])) or 'config'}: {err['msg']}" for err in exc.errors()
            )
            raise SwevalError(f"invalid configuration: {problems}.") from None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(), indent=2, sort_keys=False, default=str)
