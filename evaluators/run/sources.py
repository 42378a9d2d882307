"""Where a run reads its log and keeps its units: :func:`load_data` (the file, bundled dataset
or generated log of ``--data``, read once per process for the same options and files) and
:func:`unit_store` (``--cache``, ``$SWEVAL_CACHE``, else the user's cache directory).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sweval.data.errors import SwevalError
from sweval.data.loaders import load_log
from sweval.data.log import InteractionLog
from sweval.data.user_dirs import cache_home
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.protocols.user_strata import DERIVED
from sweval.evaluators.units.store import UnitStore

#: Where units go without --cache: the environment's store, else the user's (user_store).
CACHE_ENV = "SWEVAL_CACHE"


def user_store() -> Path:
    """The unit store every command uses unless told otherwise: ``units`` in the user's cache
    directory (:func:`data.user_dirs.cache_home`: ``~/.cache/sweval/units`` on Linux,
    ``~/Library/Caches/sweval/units`` on macOS, ``%LOCALAPPDATA%\\sweval\\Cache\\units`` on
    Windows), shared by every run, output directory and command."""
    return cache_home() / "units"


def store_directory(config: EvalConfig) -> Path:
    """The directory of the run's unit store: ``--cache``, else ``$SWEVAL_CACHE``, else
    :func:`user_store`."""
    return Path(config.cache or os.environ.get(CACHE_ENV) or user_store()).expanduser()


def unit_store(config: EvalConfig) -> UnitStore:
    """The run's unit store (:func:`store_directory`), created if need be."""
    return UnitStore(store_directory(config)).prepare()


#: The last log this process loaded, by what it was read from (:func:`load_data`).
_LOADED: dict[tuple[Any, ...], InteractionLog] = {}
#: The options that say how a log is read (the same options and files: the same log).
_READ_OPTIONS = ("data", "format", "sep", "user_col", "item_col", "time_col", "policy_col",
                 "stratify_by", "basket_col", "time_unit", "dedup", "on_invalid", "scale", "seed")


def load_data(config: EvalConfig) -> InteractionLog:
    """The run's log: the file or bundled dataset of ``config.data``, else a generated one.

    The last log loaded is kept: read again with the same options from the same files (each
    file's size and modification time), it is not read twice (``sweval run`` loads it while
    Prefect's API starts, the flow's first task takes it; a notebook's second question).

    Raises:
        SwevalError: unreadable or invalid data, or ``--policy-col`` and ``--stratify-by``
            naming different columns (the strata are the values of the one policy column).
    """
    key = _read_key(config)
    if key is not None and key in _LOADED:
        return _LOADED[key]
    log = _read_data(config)
    if key is not None:
        _LOADED.clear()
        _LOADED[key] = log
    return log


def _read_key(config: EvalConfig) -> tuple[Any, ...] | None:
    """What a log is read from: the reading options and each source file's identity; None
    for a stream (read once, never again)."""
    from sweval.data.loaders import source_files
    from sweval.data.streams import is_stream

    options = tuple(str(getattr(config, name)) for name in _READ_OPTIONS)
    if config.data is None:
        return options
    if is_stream(config.data):
        return None
    try:
        files = source_files(config.data)
        return options + tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size)
                               for path in map(Path, files))
    except (OSError, SwevalError):
        return None


def _read_data(config: EvalConfig) -> InteractionLog:
    """:func:`load_data`'s reading."""
    if config.policy_col and policy_column(config) and config.policy_col != config.stratify_by:
        raise SwevalError(
            f"--policy-col {config.policy_col!r} and --stratify-by {config.stratify_by!r} name "
            "different columns: the strata are the values of one policy column; give "
            f"--stratify-by {config.stratify_by!r} alone (or both naming the same column)."
        )
    if config.data is None:
        if policy_column(config) not in (None, "policy"):
            raise SwevalError(
                f"--stratify-by {config.stratify_by!r}: the generated log's policy column is 'policy'."
            )
        frame = generated(config)
        return InteractionLog.from_frame(
            frame, policy_col="policy", source=config.dataset_name, dedup=config.dedup
        )
    return load_log(
        config.data,
        fmt=config.format,
        sep=config.sep,
        user_col=config.user_col,
        item_col=config.item_col,
        time_col=config.time_col,
        policy_col=config.policy_col or policy_column(config),
        time_unit=config.time_unit,
        dedup=config.dedup,
        on_invalid=config.on_invalid,
        basket_col=config.basket_col,
    )


def generated(config: EvalConfig) -> Any:
    """The generated log of ``--scale`` and ``--seed`` (:func:`data.synthetic.generate_log`),
    kept in the run's unit store once it exists (:mod:`evaluators.units.memo`: the same
    options and code, the same frame, read in milliseconds instead of generated again)."""
    from sweval.data.synthetic import generate_log
    from sweval.evaluators.units.memo import Memo
    from sweval.evaluators.units.ownership import STORE_TAG

    def generate() -> Any:
        return generate_log(scale=config.scale, seed=config.seed)

    store = store_directory(config)
    if not (store / STORE_TAG).is_file() or store.is_symlink():  # not a store (yet)
        return generate()
    return Memo(store).table("generated-log", (config.scale, config.seed), generate)


def policy_column(config: EvalConfig) -> str | None:
    """The policy column ``--stratify-by`` names (None for the derived strata:
    ``user-history``, ``returning``)."""
    return None if config.stratify_by in DERIVED else config.stratify_by
