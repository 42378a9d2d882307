"""How a call of the Python API becomes a run's settings: the validated configuration (keyword
settings over a whole ``config=``), the log when ``data`` is a DataFrame, and the executor that
``workers=`` asks for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from sweval.data.log import InteractionLog
from sweval.evaluators.config.model import EvalConfig


def call_config(data: Any, config: EvalConfig | None, output: str | Path | None,
            settings: dict[str, Any]) -> tuple[EvalConfig, InteractionLog | None]:
    """The validated configuration of a call, and the log when ``data`` is a DataFrame."""
    # the fields themselves: a dump masks a tracking URI's password (EvalConfig's records)
    values = {name: getattr(config, name) for name in EvalConfig.model_fields} if config else {}
    values |= settings
    frame = data if isinstance(data, pd.DataFrame) else None
    if data is not None and frame is None:
        values["data"] = str(data)
    values.setdefault("progress", False)
    values.setdefault("tracking", False)
    if output is not None:
        values["output"] = str(output)
    built = EvalConfig.build(**values)
    log = None
    if frame is not None:
        from sweval.evaluators.run.sources import policy_column

        log = InteractionLog.from_frame(
            frame, user_col=built.user_col or "user", item_col=built.item_col or "item",
            time_col=built.time_col or "timestamp",
            policy_col=built.policy_col or policy_column(built), basket_col=built.basket_col,
            time_unit=built.time_unit, dedup=built.dedup, on_invalid=built.on_invalid,
            source=built.data_name or "DataFrame")
    return built, log


def executor_for(workers: int | None) -> Any:
    from sweval.evaluators.run.driver import Sequential, Threads

    return Threads(workers) if workers and workers > 1 else Sequential()
