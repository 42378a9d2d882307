"""How option text becomes configuration values: help panels, list and setting codecs, and
the small grammars of ``--algorithms``, ``--set`` and ``--tune``.

::

    --k 5,10                               CommaList(int)   -> [5, 10]
    --algorithms 'pop,item-knn(n=50,x=1)'  split_top_level  -> ["pop", "item-knn(n=50,x=1)"]
    item-knn(n_neighbors=50)               parse_variant    -> ("item-knn", {"n_neighbors": 50})
    knn50=item-knn(n_neighbors=50)         entry_label      -> "knn50" (an alias; else the entry)
    --set als.factors=32                   parse_settings   -> {"als": {"factors": 32}}
    --tune item-knn.n_neighbors=10,50      parse_grids      -> {"item-knn": {"n_neighbors": [10, 50]}}

Values are JSON where they parse (numbers, booleans, lists), text otherwise; the algorithms'
configurations then validate them. :class:`Cli` markers on the fields of
:class:`~sweval.evaluators.config.model.EvalConfig` name these codecs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any, get_args, get_origin

from sweval.data.errors import SwevalError


class Group(StrEnum):
    """The help panels of the options, in display order (:attr:`Cli.group`)."""

    DATA = "Data"
    PROTOCOL = "Protocol"
    ALGORITHMS = "Algorithms"
    STATISTICS = "Statistics: intervals and tests"
    RUN = "Run: output, tracking, orchestration"


DATA, PROTOCOL, ALGORITHMS, STATISTICS, RUN = Group


class CommaList:
    """A list field given as one comma-separated option: ``--k 5,10`` → ``[5, 10]``."""

    #: the type of the option itself (what typer parses)
    text_type: Any = str

    def __init__(self, item: type = str) -> None:
        self.item = item

    def format(self, value: list[Any]) -> str:
        """The option's default, from the field's."""
        return ",".join(map(str, value))

    def parse(self, text: str | None, flag: str) -> list[Any] | None:
        """The field's value; ``flag`` names the option in errors."""
        if text is None:
            return None
        return [self._item(part, flag) for part in split_top_level(text)]

    def _item(self, text: str, flag: str) -> Any:
        try:
            return self.item(text)
        except ValueError:
            what = {int: "an integer", float: "a number"}.get(self.item, f"a {self.item.__name__}")
            raise SwevalError(f"{flag}: {text!r} is not {what}.") from None


class Settings:
    """``params`` as repeatable ``--set ALGORITHM.PARAM=VALUE`` (:func:`parse_settings`)."""

    text_type: Any = list[str] | None

    def format(self, value: dict[str, dict[str, Any]]) -> None:
        return None  # no --set

    def parse(self, texts: list[str] | None, flag: str) -> dict[str, dict[str, Any]]:
        return parse_settings(texts or [])


class Grids(Settings):
    """``tune`` as repeatable ``--tune ALGORITHM.PARAM=V1,V2,...`` (:func:`parse_grids`)."""

    def parse(self, texts: list[str] | None, flag: str) -> dict[str, dict[str, Any]]:
        return parse_grids(texts or [])


@dataclass(frozen=True)
class Cli:
    """How a field appears on the command line (a marker in its ``Annotated`` type).

    ``group``: its help panel (a :class:`Group`). ``flag``: when not ``--field-name`` (a
    bool field's default is ``--name/--no-name``). ``codec``: turns the option's text into the
    value and the default into the option's default, for fields that are not a plain
    str/int/float/bool/Literal (:class:`CommaList`, :class:`Settings`); a list field without
    one is a :class:`CommaList` of its item type.
    """

    group: Group | None = None
    flag: str | None = None
    codec: CommaList | Settings | Grids | None = None

    @staticmethod
    def of(field: Any) -> Cli:
        """The marker of a pydantic field (a default one when it has none)."""
        return next((m for m in field.metadata if isinstance(m, Cli)), Cli())

    @staticmethod
    def codec_of(field: Any) -> CommaList | Settings | Grids | None:
        """How the field is written as text: its marker's codec, else a :class:`CommaList` of
        a list field's item type, else None (typer reads it)."""
        codec = Cli.of(field).codec
        if codec is None and get_origin(field.annotation) is list:
            codec = CommaList(get_args(field.annotation)[0])
        return codec


def split_top_level(text: str) -> list[str]:
    """Split at the commas outside parentheses and brackets, dropping empty parts:
    ``"pop,item-knn(n_neighbors=50,shrink=1)"`` → ``["pop", "item-knn(n_neighbors=50,shrink=1)"]``.
    """
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def parse_value(raw: str) -> Any:
    """An option value: JSON when it parses (numbers, booleans, lists), else the text."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def split_alias(entry: str) -> tuple[str | None, str]:
    """An ``--algorithms`` entry's short name, if it gives one, and the rest:
    ``cv=my_pkg.models:CoVisit(days=1)`` → ``("cv", "my_pkg.models:CoVisit(days=1)")``,
    ``item-knn(n_neighbors=50)`` → ``(None, "item-knn(n_neighbors=50)")``: the alias is what
    comes before the first ``=`` outside parentheses.

    Raises:
        SwevalError: an empty alias or nothing after it.
    """
    depth = 0
    for position, char in enumerate(entry):
        depth += (char in "([{") - (char in ")]}")
        if char == "=" and depth == 0:
            alias, rest = entry[:position].strip(), entry[position + 1:].strip()
            if not alias or not rest:
                raise SwevalError(f"--algorithms {entry!r}: expected ALIAS=NAME or "
                                  "ALIAS=NAME(PARAM=VALUE, ...), e.g. cv=my_pkg.models:CoVisit.")
            return alias, rest
    return None, entry


def _variant_parts(entry: str) -> tuple[str, list[tuple[str, str]]]:
    """``NAME(PARAM=VALUE, ...)`` (no alias) → the name and the (parameter, value as typed)
    pairs, in their order.

    Raises:
        SwevalError: not ``NAME`` or ``NAME(PARAM=VALUE, ...)``, or a parameter given twice.
    """
    match = re.fullmatch(r"\s*([^()\s,]+)\s*(?:\((.*)\))?\s*", entry, flags=re.DOTALL)
    if match is None:
        raise SwevalError(
            f"--algorithms: cannot read {entry!r}; expected NAME or NAME(PARAM=VALUE, ...), "
            "e.g. item-knn(n_neighbors=50)."
        )
    pairs: list[tuple[str, str]] = []
    for part in split_top_level(match[2] or ""):
        key, sep, raw = part.partition("=")
        if not sep or not key.strip() or not raw.strip():
            raise SwevalError(f"--algorithms {entry!r}: {part!r} is not PARAM=VALUE.")
        if key.strip() in dict(pairs):
            raise SwevalError(f"--algorithms {entry!r}: {key.strip()!r} is given twice.")
        pairs.append((key.strip(), raw.strip()))
    return match[1], pairs


def parse_variant(entry: str) -> tuple[str, dict[str, Any]]:
    """``item-knn(n_neighbors=50)`` → ``("item-knn", {"n_neighbors": 50})``; a plain name has
    no parameters; an alias (``knn50=item-knn(n_neighbors=50)``) is left out.

    Raises:
        SwevalError: not ``[ALIAS=]NAME`` or ``[ALIAS=]NAME(PARAM=VALUE, ...)``.
    """
    name, pairs = _variant_parts(split_alias(entry)[1])
    return name, {key: parse_value(raw) for key, raw in pairs}


def written_entry(entry: str) -> str:
    """An ``--algorithms`` entry as typed, less the spaces around its parts:
    ``cv = CoVisit( days = 1 )`` → ``cv=CoVisit(days=1)``; values stay as written (``days=1``
    for a float parameter is not ``days=1.0``)."""
    alias, rest = split_alias(entry)
    name, pairs = _variant_parts(rest)
    text = name + (f"({','.join(f'{key}={raw}' for key, raw in pairs)})" if pairs else "")
    return f"{alias}={text}" if alias else text


def entry_label(entry: str) -> str:
    """The name an ``--algorithms`` entry goes by in every table, plot and MLflow run: its
    alias, else the entry as written (:func:`written_entry`)."""
    alias, _rest = split_alias(entry)
    return alias if alias else written_entry(entry)


def algorithm_setting(text: str, *, flag: str, example: str) -> tuple[str, str, str]:
    """``ALGORITHM.PARAMETER=RAW`` → ``(algorithm, parameter, raw)``.

    Raises:
        SwevalError: not of that form (``flag`` and ``example`` make the message).
    """
    key, sep, raw = text.partition("=")
    name, dot, param = key.strip().rpartition(".")
    if not sep or not dot or not name or not param:
        raise SwevalError(f"{flag} {text!r}: expected {example}.")
    return name, param, raw


def parse_grids(grids: list[str]) -> dict[str, dict[str, list[Any]]]:
    """Turn ``--tune item-knn.n_neighbors=10,50,200`` into ``{algo: {param: [values]}}``."""
    found: dict[str, dict[str, list[Any]]] = {}
    for grid in grids:
        name, param, raw = algorithm_setting(
            grid, flag="--tune",
            example="ALGORITHM.PARAMETER=V1,V2,..., e.g. item-knn.n_neighbors=10,50,200",
        )
        ranged = re.fullmatch(r"\s*(range|log_range)\((.*)\)\s*", raw)
        if ranged:
            bounds = [parse_value(part) for part in split_top_level(ranged[2])]
            values = grid_values({ranged[1]: bounds}, f"--tune {grid!r}")
        else:
            values = [parse_value(part) for part in split_top_level(raw)]
        if not values:
            raise SwevalError(f"--tune {grid!r}: give at least one value.")
        if param in found.get(name, {}):
            raise SwevalError(f"--tune {name}.{param} is given twice: give all its values in "
                              f"one --tune ({name}.{param}=V1,V2,...).")
        found.setdefault(name, {})[param] = values
    return found


def grid_values(spec: Any, where: str) -> list[Any]:
    """The values of one parameter's grid:

    - a list, as given (a single value: a list of one);
    - ``{"range": [start, stop, step]}``: Python's ``range`` (stop excluded), numbers allowed;
      ``[stop]`` and ``[start, stop]`` as in Python (start 0, step 1);
    - ``{"log_range": [low, high, n]}``: n values evenly spaced on a log scale, low and high
      included; integers (rounded, repeats dropped) when both ends are integers.

    Raises:
        SwevalError: a malformed range (``where`` names the option or file entry).
    """
    if isinstance(spec, list):
        return spec
    if not isinstance(spec, dict):
        return [spec]
    if set(spec) == {"range"} and isinstance(spec["range"], list) \
            and 1 <= len(spec["range"]) <= 3:
        bounds = spec["range"]
        start, stop, step = ([0, *bounds, 1] if len(bounds) == 1 else [*bounds, 1])[:3]
        if not all(isinstance(v, int | float) and not isinstance(v, bool)
                   for v in (start, stop, step)) or step <= 0:
            raise SwevalError(f"{where}: range needs numbers [start, stop, step > 0] "
                              "(start 0 and step 1 when left out).")
        if all(isinstance(v, int) for v in (start, stop, step)):
            return list(range(start, stop, step))
        # in decimal, as written: range(0.1, 0.35, 0.1) is 0.1, 0.2, 0.3 (not 0.30000000000000004)
        first, last, by = (Decimal(repr(v)) for v in (start, stop, step))
        count = max(0, math.ceil((last - first) / by))
        return [float(first + i * by) for i in range(count)]
    if set(spec) == {"log_range"} and isinstance(spec["log_range"], list) \
            and len(spec["log_range"]) == 3:
        low, high, n = spec["log_range"]
        if not (isinstance(n, int) and isinstance(low, int | float)
                and isinstance(high, int | float) and 0 < low <= high
                and (n >= 2 or (n == 1 and low == high))):
            raise SwevalError(f"{where}: log_range needs [low > 0, high >= low, n >= 2] "
                              "(both ends are included: n = 1 only when low = high).")
        points = [low] if n == 1 else [low * (high / low) ** (i / (n - 1)) for i in range(n)]
        points[-1] = high  # both ends as given, not as the powers round them
        if isinstance(low, int) and isinstance(high, int):
            return list(dict.fromkeys(int(round(p)) for p in points))
        return points
    raise SwevalError(
        f"{where}: a grid is a list of values, {{range = [start, stop, step]}} or "
        "{log_range = [low, high, n]}."
    )


def parse_settings(settings: list[str]) -> dict[str, dict[str, Any]]:
    """Turn ``--set als.factors=32 --set pop-n.n_recent=1000`` into ``{algo: {param: value}}``.

    Values are read as JSON when they parse (numbers, booleans), as text otherwise; each
    algorithm's config then validates and coerces them.
    """
    params: dict[str, dict[str, Any]] = {}
    for setting in settings:
        name, param, raw = algorithm_setting(
            setting, flag="--set", example="ALGORITHM.PARAMETER=VALUE, e.g. pop-n.n_recent=1000"
        )
        params.setdefault(name, {})[param] = parse_value(raw)
    return params
