"""What a configuration asks for, checked before anything is planned: the window options as a
:class:`~evaluators.protocols.windows.WindowSpec`, the algorithm configurations (``--tune``'s
candidates included) and those ranked for users without history, what the models can score
(``--repeats``, ``--cold-users``), ``--baseline``, the unused tuning options, and
:func:`precheck`, the cheap checks every command runs first.
"""

from __future__ import annotations

from sweval.data.durations import parse_duration, parse_time
from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.text import parse_variant, split_alias
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.stats.tuning_candidates import (
    Search,
    ordered_labels,
    searches,
    with_candidates,
)
from sweval.evaluators.units.algorithm_spec import AlgorithmSpec


def window_spec(config: EvalConfig) -> WindowSpec:
    """The :class:`WindowSpec` of the configuration's protocol options.

    Raises:
        SwevalError: ``--window`` or ``--train-window`` lists several values: only ``sweval
            run`` (:func:`sweval.widths`, :func:`sweval.history_sweep`) runs one per value.
    """
    for option, text in (("--window", config.window), ("--train-window", config.train_window)):
        if text is not None and "," in text:
            raise SwevalError(
                f"{option} {text}: several values are a comparison, which `sweval run` makes "
                "(and sweval.widths / sweval.history_sweep in Python); this command takes one.")
    return WindowSpec(
        width_s=parse_duration(config.window, option="--window"),
        n_folds=config.folds,
        start=parse_time(config.start) if config.start is not None else None,
        train_window_s=(
            parse_duration(config.train_window, option="--train-window")
            if config.train_window is not None
            else None
        ),
    )


def algorithm_specs(config: EvalConfig, found: list[Search] | None = None) -> list[AlgorithmSpec]:
    """The validated algorithm configurations of ``config``, ``--tune``'s candidates included
    (``found``: the drawn candidates; without it, the whole grid stands in for ``tpe``'s).

    Raises:
        SwevalError: unknown names, bad parameters, or --set for an algorithm not in the run.
    """
    named = {parse_variant(entry)[0] for entry in config.algorithms} | {
        alias for alias, _rest in map(split_alias, config.algorithms) if alias}
    unknown = set(config.params) - named
    if unknown:
        raise SwevalError(
            f"--set names algorithm(s) not in --algorithms: {', '.join(sorted(unknown))}."
        )
    if found is None:
        grid = config.tune_sampler == "tpe"  # its draws need the data: validate the grid now
        found = searches(config.model_copy(update={"tune_sampler": "grid"}) if grid else config)
    entries = with_candidates(config, found)
    return [AlgorithmSpec.from_entry(entry, config.params) for entry in entries]


def unused_tuning_options(config: EvalConfig) -> list[str]:
    """The tuning options (``--tune-windows``, ``--tune-sampler``, ...) set to other than
    their defaults, as the command line spells them."""
    fields = type(config).model_fields
    return [f"--{name.replace('_', '-')}" for name in fields
            if name.startswith("tune_") and getattr(config, name) != fields[name].default]


def cold_specs(specs: list[AlgorithmSpec], fallback: str) -> list[AlgorithmSpec]:
    """The configurations ranked for users without history: those that can score them
    (:meth:`~algorithms.base.Algorithm.scores_cold_users`), and POP as ``--fallback pop`` for
    the others (once, unless a default POP is among them)."""
    from sweval.algorithms.registry import resolve

    able = [spec for spec in specs if resolve(spec.name)[0].scores_cold_users()]
    if fallback == "pop" and len(able) < len(specs):
        fallback_spec = AlgorithmSpec.of("pop", label="pop")
        if all(spec.label != "pop" or spec.canonical != fallback_spec.canonical for spec in able):
            able.append(fallback_spec)
    return able


def check_repeats(config: EvalConfig) -> None:
    """``--repeats`` needs the repeats in the log.

    Raises:
        SwevalError: ``--repeats`` with ``--dedup first``.
    """
    if config.repeats and config.dedup != "none":
        raise SwevalError("--repeats needs --dedup none: with --dedup first a user's second "
                          "consumption of an item is dropped when the log is read.")


def scores_seen(spec: AlgorithmSpec) -> bool:
    """Whether ``spec``'s model can rank the items a user has consumed (``--repeats``)."""
    from sweval.algorithms.registry import resolve

    return bool(resolve(spec.name)[0].scores_seen_items())


def scores_cold(spec: AlgorithmSpec) -> bool:
    """Whether ``spec``'s model can score users without history."""
    from sweval.algorithms.registry import resolve

    return bool(resolve(spec.name)[0].scores_cold_users())


def check_baseline(config: EvalConfig, found: list[Search]) -> None:
    """Refuse a ``--baseline`` that is none of the run's algorithms.

    Raises:
        SwevalError: naming the algorithms it may be.
    """
    if config.baseline is None:
        return
    labels = ordered_labels(config, found)
    if config.baseline not in labels:
        raise SwevalError(
            f"--baseline {config.baseline!r}: not one of the run's algorithms "
            f"({', '.join(labels)})."
        )


def precheck(config: EvalConfig) -> None:
    """The cheap checks of :func:`make_plan`, before any server or data load: algorithm names
    and parameters, durations and times, that the data file exists. Commands run them first, so
    a typo fails in a second, not after Prefect's temporary server started.

    Raises:
        SwevalError: the first problem found.
    """
    from sweval.data.loaders import source_files

    algorithm_specs(config)
    window_spec(config)
    check_repeats(config)
    if config.data is not None:
        source_files(config.data)
