"""The evaluation options of ``sweval run``, ``serve`` and ``compare``, generated from EvalConfig.

Each :class:`~sweval.evaluators.config.model.EvalConfig` field is declared once, in
:mod:`sweval.evaluators.config.fields`: type, default, ``description`` (the help text) and an
optional :class:`~sweval.evaluators.config.text.Cli` marker (help panel, flag, text codec);
its validation is the model's. This module turns
the fields into typer options (:func:`with_eval_options`) and the parsed options back into an
EvalConfig (:func:`build_config`), so a field added to the model is an option of every
evaluation command with no edit here or in the commands (``sweval inspect``: of every field of
the Data panel, ``group=DATA``).

Kept light: the command line imports it at start-up (typer, rich and pydantic only).
"""

from __future__ import annotations

import functools
import inspect
import operator
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
from pydantic.fields import FieldInfo
from rich.markup import escape

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.text import Cli, CommaList, Group, Settings

_KEYWORD = inspect.Parameter.KEYWORD_ONLY

#: Options of every evaluation command that are not EvalConfig fields.
EXTRA_OPTIONS = [
    inspect.Parameter(
        "config", _KEYWORD, default=None,
        annotation=Annotated[Path | None, typer.Option(
            help="TOML/YAML/JSON file with these options (the EvalConfig fields); command-line "
            "options given explicitly win.",
        )],
    ),
    inspect.Parameter(
        "verbose", _KEYWORD, default=False,
        annotation=Annotated[bool, typer.Option(
            "--verbose", "-v", help="Log progress details (and Prefect's INFO lines).",
        )],
    ),
]


@dataclass(frozen=True)
class OptionSpec:
    """The command-line option of one EvalConfig field."""

    name: str  #: the field's name, also the command function's parameter name
    flag: str  #: the option's name as typed ("--k"; a bool's "--tracking/--no-tracking")
    annotation: Any  #: the type typer parses the option's text into
    default: Any  #: the option's default (the field's default, as text for a codec)
    codec: CommaList | Settings | None
    help: str
    group: str | None

    def parse(self, value: Any) -> Any:
        """The field value of the option's parsed value."""
        if self.codec is None:
            return value
        return self.codec.parse(value, self.flag.split("/")[0])

    def parameter(self, default: Any = None) -> inspect.Parameter:
        """The field as an option, with the field's default or this command's own."""
        option = typer.Option(self.flag, help=self.help, rich_help_panel=self.group)
        return inspect.Parameter(
            self.name, _KEYWORD, default=self.default if default is None else default,
            annotation=Annotated[self.annotation, option],
        )

    def argument(self) -> inspect.Parameter:
        """The field as an optional positional argument (see :func:`with_eval_options`)."""
        argument = typer.Argument(help=self.help, show_default=False)
        return inspect.Parameter(
            self.name, _KEYWORD, default=self.default,
            annotation=Annotated[self.annotation, argument],
        )


def _spec(model: type[EvalConfig], name: str, field: FieldInfo) -> OptionSpec:
    cli = Cli.of(field)
    annotation = field.annotation
    codec = Cli.codec_of(field)
    default = field.get_default(call_default_factory=True)
    if codec is not None:
        text_type, default = codec.text_type, codec.format(default)
    else:
        text_type = _text_type(annotation, f"{model.__name__}.{name}")
    dashed = "--" + name.replace("_", "-")
    flag = cli.flag or (f"{dashed}/--no-{name.replace('_', '-')}" if text_type is bool else dashed)
    return OptionSpec(
        name=name, flag=flag, annotation=text_type, default=default, codec=codec,
        help=escape(field.description or ""),  # "[default: user]" is text, not rich markup
        group=str(cli.group) if cli.group is not None else None,
    )


def _text_type(annotation: Any, where: str) -> Any:
    """The type typer reads: a Literal's values are validated by the model, not by typer (one
    error message whatever the source of the value)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return type(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, [_text_type(a, where) for a in get_args(annotation)])
    if annotation in (str, int, float, bool, Path, type(None)):
        return annotation
    raise TypeError(
        f"{where}: no command-line form for {annotation!r}; give the field a codec "
        "(Cli(codec=...) in evaluators/config/fields.py)."
    )


@functools.cache
def option_specs(
    model: type[EvalConfig] = EvalConfig, group: Group | None = None
) -> tuple[OptionSpec, ...]:
    """The options of ``model``'s fields, in field order; only those of help panel ``group``
    when given (``DATA``: the options that say how the log is read)."""
    specs = tuple(_spec(model, name, field) for name, field in model.model_fields.items())
    return specs if group is None else tuple(s for s in specs if s.group == str(group))


#: The key under which a command's options carry the fields it omits (:func:`with_eval_options`).
OMITTED = "_omitted_fields"


def with_eval_options(
    func: Any,
    model: type[EvalConfig] = EvalConfig,
    *,
    group: Group | None = None,
    extra: list[inspect.Parameter] = EXTRA_OPTIONS,
    argument: str | None = None,
    defaults: dict[str, Any] | None = None,
    omit: frozenset[str] = frozenset(),
) -> Any:
    """Give ``func`` (which takes ``**options``) an option per field of ``model`` (of help panel
    ``group`` only, when given), then ``extra`` (:data:`EXTRA_OPTIONS`: ``--config``, ``-v``);
    its own parameters come first. ``defaults`` maps fields to this command's own defaults
    (``{"output": "runs/compare"}``; a --config file without the field gets it from
    :meth:`EvalConfig.output_or`).

    ``argument`` names a field that is also an optional positional argument, with the field's
    help (``sweval inspect [DATA]``); its option stays (parameter ``<field>_option``) and
    ``func`` gets one value under the field's name, from either.

    ``omit`` names fields the command has no use for: they get no option (typing one is
    "No such option"), and :func:`build_config` leaves them at their defaults.
    """
    own = [
        p for p in inspect.signature(func, eval_str=True).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD
    ]
    specs = tuple(spec for spec in option_specs(model, group) if spec.name not in omit)
    own_defaults = defaults or {}
    shared = [spec.parameter(own_defaults.get(spec.name)) for spec in specs] + list(extra)
    positional: list[inspect.Parameter] = []
    if argument is not None:
        spec = next((s for s in specs if s.name == argument), None)
        if spec is None or spec.default is not None or spec.codec is not None:
            raise TypeError(f"{func.__name__}: {argument!r} is not an option with no default")
        positional = [spec.argument()]
        shared = [p.replace(name=f"{argument}_option") if p.name == argument else p
                  for p in shared]  # fmt: skip
    clash = {p.name for p in own} & {p.name for p in shared + positional}
    if clash:
        raise TypeError(f"{func.__name__}: parameters {sorted(clash)} are also evaluation options")
    parameters = [p.replace(kind=_KEYWORD) for p in positional + own + shared]

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        if argument is not None:
            flag_value = kwargs.pop(f"{argument}_option")
            if flag_value is not None:
                if kwargs[argument] is not None:
                    raise SwevalError(
                        f"give {argument.upper()} or --{argument.replace('_', '-')}, not both."
                    )
                kwargs[argument] = flag_value
        if omit:
            kwargs[OMITTED] = omit  # for build_config: a --config file may still set them
        return func(**kwargs)

    del wrapper.__wrapped__
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def build_config(
    ctx: typer.Context,
    options: dict[str, Any],
    model: type[EvalConfig] = EvalConfig,
    group: Group | None = None,
) -> EvalConfig:
    """The EvalConfig of the options (a --config file, overridden by explicit options); with
    ``group``, of that panel's options (as :func:`with_eval_options` gave them), the other
    fields at their defaults, as are the fields the command omits."""
    values = {spec.name: spec.parse(options[spec.name])
              for spec in option_specs(model, group) if spec.name in options}
    if options.get("config") is not None:
        explicit = {name: value for name, value in values.items() if given(ctx, name)}
        config = model.load(options["config"], **explicit)
        _refuse_omitted(config, options.get(OMITTED, frozenset()), ctx)
        return config
    return model.build(**values)


def _refuse_omitted(config: EvalConfig, omitted: frozenset[str], ctx: typer.Context) -> None:
    """Refuse a --config file that sets fields this command does not use (it offers no option
    for them): they would be ignored without a word.

    Raises:
        SwevalError: naming the fields, as the file spells them.
    """
    fields = type(config).model_fields
    used = sorted(name for name in omitted if name in fields
                  and getattr(config, name) != fields[name].get_default(call_default_factory=True))
    if used:
        command = ctx.info_name or "this command"
        raise SwevalError(
            f"{', '.join(used)} in the --config file: sweval {command} does not use "
            f"{'it' if len(used) == 1 else 'them'} (only sweval run does); remove "
            f"{'it' if len(used) == 1 else 'them'} for this command."
        )


def command_output(ctx: typer.Context, config: EvalConfig, default: str) -> str:
    """Where a command other than ``sweval run`` writes: ``--output`` as typed on the command
    line (even ``runs/latest``, ``sweval run``'s default), else the configuration's
    (:meth:`EvalConfig.output_or`: ``default`` when a --config file left it at run's)."""
    return config.output if given(ctx, "output") else config.output_or(default)


def given(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was typed on the command line (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"
