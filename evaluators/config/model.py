"""The evaluation configuration: one validated object, from the command line, a file or code.

Everything a run needs to be repeated is here; ``config.json`` in the output directory is this
object dumped. :meth:`EvalConfig.result_hash` covers exactly the fields that change results,
so a rerun with the same data and the same hash can resume from finished units.

The fields, one per command-line option, are declared in :mod:`evaluators.config.fields`;
:class:`EvalConfig` adds their validation, the values derived from them and the reading of
configuration files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import (
    ConfigDict,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
)

from sweval.data.errors import SwevalError
from sweval.data.text_files import parse_separator
from sweval.evaluators.config.fields import MAX_K, RUN_ONLY, EvalFields
from sweval.evaluators.config.text import (
    Cli,
    CommaList,
    entry_label,
    grid_values,
    parse_variant,
    split_alias,
    written_entry,
)
from sweval.evaluators.metrics.names import NEED_ITEMS, parse_metrics
from sweval.evaluators.wording import shown_uri


class EvalConfig(EvalFields):
    """Options of ``sweval run`` (see ``sweval run --help`` for each one's meaning)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _strict_booleans(cls, value: Any, info: ValidationInfo) -> Any:
        """A boolean is not a number and a number is not a boolean, in a file as on the command
        line: pydantic would read ``u_min = true`` or ``folds = true`` as 1 and ``tracking = 0``
        as false."""
        annotation = cls.model_fields[info.field_name or ""].annotation
        items = value if isinstance(value, list) and get_origin(annotation) is list else [value]
        if annotation is bool:
            if not isinstance(value, bool):
                raise ValueError(f"{value!r} is not a boolean: give true or false")
        elif any(isinstance(item, bool) for item in items) and _numeric(annotation):
            shown = json.dumps(value, default=str)
            what = "holds a boolean" if isinstance(value, list) else "is a boolean"
            raise ValueError(f"{shown} {what}, not a number")
        return value

    @field_serializer("data", "tracking_uri", "dask_address")
    def _without_password(self, value: str | None) -> str | None:
        """Every record of the configuration (``config.json``, MLflow's params, tags and
        artifacts, Prefect's flow-run parameters) holds a URI's password masked: the object
        keeps it for the connection, nothing written does."""
        return None if value is None else shown_uri(value)

    @field_validator("k")
    @classmethod
    def _check_k(cls, ks: list[int]) -> list[int]:
        if not ks:
            raise ValueError("give at least one k")
        if any(k < 1 for k in ks):
            raise ValueError(f"every k must be ≥ 1, got {ks}")
        if max(ks) > MAX_K:
            raise ValueError(
                f"every k must be at most {MAX_K:,}, got {max(ks):,} (a unit keeps a list of "
                "max(k) items for every evaluated user)")
        return sorted(set(ks))

    @field_validator("cadence")
    @classmethod
    def _check_cadence(cls, cadences: list[int]) -> list[int]:
        if any(c < 1 for c in cadences):
            raise ValueError(f"every cadence is at least 1 window, got {cadences}")
        return sorted(set(cadences))

    @field_validator("sep")
    @classmethod
    def _check_sep(cls, sep: str | None) -> str | None:
        return None if sep is None else parse_separator(sep)

    @field_validator("metrics")
    @classmethod
    def _check_metrics(cls, names: list[str], info: ValidationInfo) -> list[str]:
        items = bool(info.data.get("items"))
        chosen = parse_metrics(names, items=items)
        lacking = [name for name in chosen if name in NEED_ITEMS and not items]
        if lacking:
            raise ValueError(f"--metrics {', '.join(lacking)} need the items' categories: "
                             "give --items FILE (or --items movielens-latest-small)")
        return chosen

    @field_validator("baseline")
    @classmethod
    def _check_baseline(cls, baseline: str | None) -> str | None:
        """A variant is named as --algorithms names it (its normalised label)."""
        if baseline is None:
            return None
        name, params = parse_variant(baseline)
        if not params:
            return baseline
        from sweval.evaluators.units.algorithm_spec import variant_label

        return variant_label(name, params)

    @field_validator("seeds")
    @classmethod
    def _check_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"a seed is listed twice: {seeds}")
        return seeds

    @field_validator("tune", mode="before")
    @classmethod
    def _expand_grids(cls, tune: Any) -> Any:
        """Ranges and log-ranges of a configuration file become their values."""
        if not isinstance(tune, dict):
            return tune
        return {
            name: {param: grid_values(spec, f"tune.{name}.{param}") for param, spec in grid.items()}
            if isinstance(grid, dict) else grid
            for name, grid in tune.items()
        }

    @field_validator("algorithms", mode="before")
    @classmethod
    def _read_variant_tables(cls, entries: Any) -> Any:
        """A configuration file may give a variant as a table:
        ``{algorithm = "item-knn", params = {n_neighbors = 50}, alias = "knn50"}`` (TOML
        ``[[algorithms]]``; ``alias`` optional)."""
        if not isinstance(entries, list):
            return entries
        return [_table_entry(entry) if isinstance(entry, dict) and "algorithm" in entry
                else entry for entry in entries]

    @field_validator("algorithms")
    @classmethod
    def _check_algorithms(cls, entries: list[str]) -> list[str]:
        """Each entry as written, less spaces (:func:`~evaluators.config.text.written_entry`),
        its parameters validated. Refused: two entries with one label (an alias, or the entry
        itself), and two unaliased entries of one algorithm with the same parameters however
        written (``item-knn(n_neighbors=50)``, ``item-knn(n_neighbors=50.0)``)."""
        if not entries:
            raise ValueError("give at least one algorithm")
        written, labels, configurations = [], [], []
        for entry in entries:
            text = written_entry(entry)
            alias, _rest = split_alias(text)
            name, params = parse_variant(text)
            validated = {}
            if params:
                from sweval.evaluators.units.algorithm_spec import validated_params

                validated = validated_params(name, params)
            written.append(text)
            labels.append(entry_label(text))
            if alias is None:
                configurations.append(f"{name}{json.dumps(validated, sort_keys=True)}")
        if len(set(labels)) != len(labels) or len(set(configurations)) != len(configurations):
            raise ValueError(f"an algorithm is listed twice: {written}")
        return written

    @property
    def labels(self) -> list[str]:
        """The name of each ``--algorithms`` entry in the tables: its alias, else the entry."""
        return [entry_label(entry) for entry in self.algorithms]

    # ------------------------------------------------------------------ derived
    def output_or(self, default: str) -> str:
        """``--output``, or a command's own ``default`` when it was left at ``sweval run``'s."""
        return default if self.output == type(self).model_fields["output"].default else self.output

    @property
    def dataset_name(self) -> str:
        """A short name of the data, for experiment and run names: ``--data-name``, else made
        from ``--data``."""
        if self.data_name:
            return self.data_name
        if self.data is None:
            return f"generated-s{self.scale:g}-seed{self.seed}"
        if self.data == "-":
            return "stdin"
        path = Path(self.data)
        name = path.parent.name if any(c in path.name for c in "*?[") else path.name
        for suffix in (".gz", ".csv", ".parquet", ".data", ".dat", ".tsv", ".jsonl"):
            name = name.removesuffix(suffix)
        parent = path.parent.name
        return f"{parent}-{name}" if name in ("u", "ratings", "interactions") and parent else name

    def result_hash(self) -> str:
        """Hash of every field that can change a number in ``results.csv``."""
        relevant = self.model_dump(exclude=set(RUN_FIELDS))
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
                import tomllib

                raw = tomllib.loads(text)
            elif path.suffix in (".yaml", ".yml"):
                import yaml  # installed with prefect

                raw = yaml.safe_load(text) or {}
            else:
                raw = json.loads(text)
        except Exception as exc:
            raise SwevalError(f"{path}: cannot parse the configuration ({exc}).") from exc
        if not isinstance(raw, dict):
            raise SwevalError(
                f"{path}: the configuration must be a table of options (u_min = 100, "
                f"k = [5, 10], ...), not a {type(raw).__name__}."
            )
        raw = cls._comma_lists(raw, str(path))
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return cls.build(**raw)

    @classmethod
    def _comma_lists(cls, raw: dict[str, Any], where: str) -> dict[str, Any]:
        """List options written in a file as on the command line (``k = "5,10"``,
        ``algorithms: pop``) read as the command line reads them; a lone number (``k = 10``)
        is a list of one."""
        found = dict(raw)
        for name, value in raw.items():
            field = cls.model_fields.get(name)
            codec = Cli.codec_of(field) if field is not None else None
            if not isinstance(codec, CommaList):
                continue
            if isinstance(value, str):
                found[name] = codec.parse(value, f"{where}: {name}")
            elif isinstance(value, int | float) and not isinstance(value, bool):
                found[name] = [value]
        return found

    @classmethod
    def build(cls, **values: Any) -> EvalConfig:
        """Validate options, turning pydantic's errors into one readable :class:`SwevalError`."""
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = "; ".join(_problem(err) for err in exc.errors())
            raise SwevalError(f"invalid configuration: {problems}.") from None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(), indent=2, sort_keys=False, default=str)


def _numeric(annotation: Any) -> bool:
    """Whether an option takes numbers (int or float, alone, optional or in a list)."""
    return annotation in (int, float) or (
        get_origin(annotation) is not dict and any(_numeric(a) for a in get_args(annotation)))


def _table_entry(entry: dict[str, Any]) -> str:
    """A variant given as a table in a configuration file, as ``--algorithms`` writes it:
    ``{algorithm = "cv", params = {days = 1}, alias = "c1"}`` → ``c1=cv(days=1)``."""
    params = entry.get("params", {})
    text = entry["algorithm"] + (
        "(" + ",".join(f"{key}={json.dumps(value)}" for key, value in params.items()) + ")"
        if params else "")
    return f"{entry['alias']}={text}" if entry.get("alias") else text


def _problem(error: Any) -> str:
    """One pydantic error as ``--ci-method (ci_method): Input should be ...``: the option as the
    command line spells it, the name a configuration file uses, the message without pydantic's
    ``Value error,`` prefix or a final period (the messages are joined and end with one)."""
    loc = [str(part) for part in error["loc"]]
    where = ".".join(loc) or "config"
    message = str(error["msg"]).removeprefix("Value error, ").rstrip(".")
    if loc and loc[0] in EvalConfig.model_fields:
        flag = f"--{loc[0].replace('_', '-')}"
        if message.startswith(flag):  # the message names the option itself
            return message
        where = f"{flag} ({where})"
    return f"{where}: {message}"



#: The fields that say where and how to run (:class:`~evaluators.config.fields.RunOnly`); every other field can change
#: a number.
RUN_FIELDS: frozenset[str] = frozenset(
    name for name, field in EvalConfig.model_fields.items() if RUN_ONLY in field.metadata)
