"""The evaluation options are generated from EvalConfig: the model and the command line cannot
drift (every field is an option with the field's default and help, in its group's help panel,
and maps back onto the field), and a field added to the model needs no command-line edit."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
import typer
from pydantic import Field
from rich.markup import escape
from typer.testing import CliRunner

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import RUN_FIELDS, EvalConfig
from sweval.evaluators.config.text import CommaList, Grids, Group, Settings
from sweval.flows.cli.app import app, main
from sweval.flows.cli.options import EXTRA_OPTIONS, build_config, option_specs, with_eval_options

COMMANDS = ("run", "serve", "compare")

#: Every option name of the evaluation commands before they were generated from EvalConfig:
#: users and scripts depend on them (a new field adds one; none may disappear or change).
KNOWN_FLAGS = {
    "--data", "--format", "--user-col", "--item-col", "--time-col", "--policy-col",
    "--time-unit", "--dedup", "--on-invalid", "--scale", "--seed", "--window", "--folds",
    "--start", "--train-window", "--k", "--u-min", "--relevance", "--stratify-by",
    "--stratify-mode", "--algorithms", "--set", "--output", "--experiment", "--tracking-uri",
    "--tracking", "--no-tracking", "--task-runner", "--workers", "--dask-address", "--progress",
    "--no-progress", "--config", "--verbose", "-v",
}
OWN_FLAGS = {
    "run": {"--rolling", "--no-rolling", "--prefect", "--no-prefect"},
    "serve": {"--cron", "--timezone", "--name", "--rolling", "--full"},
    "compare": {"--protocols", "--loocv-repeats"},
}


def _command(name: str) -> Any:
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


def _default(field: Any) -> Any:
    return field.get_default(call_default_factory=True)


def _help(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(sys, "argv", ["sweval", *args, "--help"])
    try:
        main()
    except SystemExit as exc:
        assert not exc.code
    return capsys.readouterr().out


def _panels(text: str) -> dict[str, list[str]]:
    """{panel title: [the first flag of each row]} of a rich --help page."""
    panels: dict[str, list[str]] = {}
    rows: list[str] = []
    for line in text.splitlines():
        if line.startswith("╭─"):
            rows = panels.setdefault(line.strip("╭─╮ ").rstrip("─ "), [])
        elif re.match(r"│ +-", line):
            rows.append(line.strip("│ ").split()[0])
    return panels


#: The fields whose default a command sets for itself (its own output directory).
OWN_DEFAULTS = {"compare": {"output": "runs/compare"}}
#: The fields a command does not offer: their output is `sweval run`'s alone.
OMITTED = {"compare": {"lag", "metrics", "seeds", "per_user"}}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_field_is_an_option_with_the_field_default_and_help(command: str) -> None:
    params = {p.name: p for p in _command(command).params}
    own = OWN_DEFAULTS.get(command, {})
    for spec in option_specs():
        field = EvalConfig.model_fields[spec.name]
        param = params.get(spec.name)
        if spec.name in OMITTED.get(command, ()):
            assert param is None, f"--{spec.name} is offered by sweval {command}"
            continue
        assert param is not None, f"EvalConfig.{spec.name} is not an option of sweval {command}"
        assert "/".join([*param.opts, *param.secondary_opts]) == spec.flag
        assert spec.parse(param.default) == own.get(spec.name, _default(field)), spec.name
        assert param.help == escape(field.description or "")
        assert param.rich_help_panel == spec.group


@pytest.mark.parametrize("command", COMMANDS)
def test_option_names_are_kept(command: str) -> None:
    flags = {flag for p in _command(command).params for flag in [*p.opts, *p.secondary_opts]}
    assert KNOWN_FLAGS | OWN_FLAGS[command] <= flags


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_each_field_in_its_group_panel(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    panels = _panels(_help(monkeypatch, capsys, command))
    assert list(panels) == ["Options", *Group]
    for spec in option_specs():
        if spec.name not in OMITTED.get(command, ()):
            assert spec.flag.split("/")[0] in panels[spec.group or "Options"], spec.name
    own = {p.opts[0] for p in _command(command).params} - {
        s.flag.split("/")[0] for s in option_specs()
    }
    assert {"--config", "--verbose"} <= own  # with the command's own options
    assert own | {"--help"} <= set(panels["Options"])


def _app(model: type[EvalConfig] = EvalConfig) -> typer.Typer:
    """A command with the evaluation options that prints its EvalConfig as JSON."""

    def evaluate(ctx: typer.Context, **options: Any) -> None:
        print(build_config(ctx, options, model).model_dump_json())

    test_app = typer.Typer()
    test_app.command(name="evaluate")(with_eval_options(evaluate, model))
    test_app.command(name="other")(lambda: None)  # two commands: invoked as `evaluate ...`
    return test_app


def _build(*args: str, model: type[EvalConfig] = EvalConfig) -> dict[str, Any]:
    result = CliRunner().invoke(_app(model), ["evaluate", *map(str, args)])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def _example(name: str, field: Any) -> tuple[list[str], Any]:
    """Command-line arguments that set field ``name`` to a value other than its default."""
    spec = next(s for s in option_specs() if s.name == name)
    flag, default = spec.flag.split("/")[0], _default(field)
    if isinstance(spec.codec, Grids):
        return ([flag, "pop.x=1,2", flag, "als.factors=8"],
                {"pop": {"x": [1, 2]}, "als": {"factors": [8]}})
    if isinstance(spec.codec, Settings):
        return [flag, "pop.x=1", flag, "als.factors=8"], {"pop": {"x": 1}, "als": {"factors": 8}}
    if isinstance(spec.codec, CommaList):
        values = ([3, 7] if spec.codec.item is int
                  else ["precision", "mrr"] if name == "metrics" else ["pop", "als"])
        return [flag, spec.codec.format(values)], values
    annotation = str(field.annotation)
    if name == "sep":  # a separator, by name
        return [flag, "semicolon"], ";"
    if field.annotation is bool:
        return ([f"--no-{flag[2:]}"] if default else [flag]), not default
    if get_origin(field.annotation) is Literal:
        value = next(v for v in get_args(field.annotation) if v != default)
        return [flag, value], value
    if field.annotation is int:
        return [flag, str(default + 2)], default + 2
    if field.annotation == int | None and default is None:  # --workers: unset means every CPU
        return [flag, "3"], 3
    if field.annotation is float:  # halved: valid for a scale (> 0) and a level (in (0, 1))
        return [flag, str(default / 2)], default / 2
    if "str" in annotation:
        return [flag, f"{name}-value"], f"{name}-value"
    raise AssertionError(f"EvalConfig.{name}: add an example value for {annotation}")


def test_no_options_give_the_model_defaults() -> None:
    assert _build() == EvalConfig().model_dump(mode="json")


@pytest.mark.parametrize("name", list(EvalConfig.model_fields))
def test_every_field_is_set_by_its_option(name: str) -> None:
    args, expected = _example(name, EvalConfig.model_fields[name])
    config = _build(*args)
    assert config[name] == expected
    assert {k: v for k, v in config.items() if k != name} == {
        k: v for k, v in EvalConfig().model_dump(mode="json").items() if k != name
    }


def test_explicit_options_win_over_the_config_file_even_at_their_default(tmp_path: Path) -> None:
    path = tmp_path / "eval.toml"
    path.write_text('folds = 7\nformat = "csv"\nk = [5]\ntracking = false\n'
                    'params = {als = {factors = 8}}\n')
    config = _build("--config", path, "--folds", "30", "--set", "pop.x=1")
    assert config["folds"] == 30 and config["params"] == {"pop": {"x": 1}}
    assert config["format"] == "csv" and config["k"] == [5] and config["tracking"] is False


def test_a_field_added_to_the_model_is_an_option_with_no_cli_edit() -> None:
    class Extended(EvalConfig):
        cache: str | None = Field(default=None, description="Shared unit store.")
        strict: bool = True
        seeds: list[int] = Field(default_factory=lambda: [1, 2])

    text = CliRunner().invoke(_app(Extended), ["evaluate", "--help"]).stdout
    assert "--cache" in text and "Shared unit store." in text
    assert "--no-strict" in text and "--seeds" in text
    assert _build(model=Extended)["cache"] is None
    config = _build("--cache", "/srv/units", "--no-strict", "--seeds", "4,5", model=Extended)
    assert config["cache"] == "/srv/units" and config["strict"] is False
    assert config["seeds"] == [4, 5]


def test_a_field_without_a_command_line_form_is_an_error_not_a_silent_gap() -> None:
    class Odd(EvalConfig):
        weights: dict[str, float] = Field(default_factory=dict)

    with pytest.raises(TypeError, match="Odd.weights: no command-line form"):
        option_specs(Odd)


def test_a_command_parameter_named_like_a_field_is_refused() -> None:
    def command(window: str = "x", **options: Any) -> None:
        pass

    with pytest.raises(TypeError, match="window"):
        with_eval_options(command)


def test_extra_options_name_no_field_and_run_fields_change_no_number() -> None:
    """RUN_FIELDS are the fields marked as where and how to run: changing one leaves the
    result hash (every unit and run key) as it is; changing any other field changes it."""
    assert not {p.name for p in EXTRA_OPTIONS} & set(EvalConfig.model_fields)
    assert RUN_FIELDS < set(EvalConfig.model_fields) and "output" in RUN_FIELDS
    base = EvalConfig()
    changed = {"output": "x", "cache": "c", "progress": False, "ci": 0.9, "workers": 2,
               "window": "7D", "folds": 3, "k": [3], "algorithms": ["pop"], "u_min": 5}
    for name, value in changed.items():
        other = base.model_copy(update={name: value})
        assert (other.result_hash() == base.result_hash()) == (name in RUN_FIELDS), name


def test_list_option_errors_name_the_option() -> None:
    result = CliRunner().invoke(_app(), ["evaluate", "--k", "5,x"])
    assert "--k: 'x' is not an integer." in str(result.exception)


@pytest.mark.parametrize(("command", "flag"), [
    ("leakage", "--seeds"), ("leakage", "--tune"), ("leakage", "--per-user"),
    ("leakage", "--metrics"), ("leakage", "--folds"), ("leakage", "--start"),
    ("leakage", "--train-window"), ("leakage", "--relevance"), ("leakage", "--stratify-by"),
    ("leakage", "--test-unit"), ("gap", "--baseline"), ("gap", "--correction"),
    ("gap", "--seeds"), ("gap", "--tune"), ("gap", "--per-user"), ("gap", "--metrics"),
    ("gap", "--stratify-by"), ("compare", "--seeds"), ("compare", "--per-user"),
    ("compare", "--lag"),
])
def test_options_whose_output_a_command_does_not_produce_are_not_offered(
    command: str, flag: str
) -> None:
    """Typed, they were accepted and silently ignored: a user asking `gap` for seeds got none."""
    flags = {f for p in _command(command).params for f in [*p.opts, *p.secondary_opts]}
    assert flag not in flags
    assert {"--data", "--k", "--algorithms", "--no-tracking"} <= flags  # the shared ones stay


def test_gap_keeps_the_options_it_uses() -> None:
    flags = {f for p in _command("gap").params for f in [*p.opts, *p.secondary_opts]}
    assert {"--start", "--train-window", "--relevance", "--window", "--u-min", "--set"} <= flags


def test_a_config_file_cannot_set_what_a_command_does_not_offer(tmp_path: Path) -> None:
    """QA: `sweval gap --config c.toml` with seeds, per_user and a tuning grid in the file ran
    and ignored them, as the command line no longer allows."""
    config = tmp_path / "c.toml"
    config.write_text('seeds = [0, 1]\nper_user = true\nalgorithms = ["pop"]\n')
    result = CliRunner().invoke(app, ["gap", "--config", str(config)])
    assert result.exit_code != 0
    assert isinstance(result.exception, SwevalError)
    assert str(result.exception).startswith("per_user, seeds in the --config file: sweval gap "
                                            "does not use them")
