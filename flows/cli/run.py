"""``sweval run``: evaluate algorithms with the sliding-window protocol, as the Prefect flow
``sliding-window-eval`` (:mod:`flows.sliding_window`) or in this process (``--no-prefect``:
:mod:`flows.execute`), and print the summary."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from sweval.data.errors import SwevalError
from sweval.flows.cli.logs import setup_logging
from sweval.flows.cli.options import build_config, with_eval_options
from sweval.flows.cli.terminal import message_console
from sweval.flows.settings import apply_env_defaults

if TYPE_CHECKING:
    from sweval.evaluators.config.model import EvalConfig

console = message_console()


class RunCommand(TyperCommand):
    """``sweval run``: its help ends with every algorithm's parameters, read from the registry
    only when the help is shown (importing every model costs seconds; ``--help`` must not)."""

    @property  # type: ignore[override]
    def epilog(self) -> str:
        return ("[bold]Algorithm parameters[/bold] (set with --set NAME.PARAM=VALUE):\n\n"
                + algorithm_help())

    @epilog.setter
    def epilog(self, value: str | None) -> None:
        """click sets the epilog it was given (none): the property makes it."""


def algorithm_help() -> str:
    from sweval.algorithms.registry import ALGORITHMS

    lines = []
    for name, cls in ALGORITHMS.items():
        fields = [
            f"{param}={field.default!r}" + (f" ({field.description})" if field.description else "")
            for param, field in cls.Config.model_fields.items()
        ]
        lines.append(f"{name}: " + ("; ".join(fields) if fields else "no parameters"))
    return "\n\n".join(lines)


@with_eval_options
def run(
    ctx: typer.Context,
    rolling: Annotated[bool, typer.Option(help="Rolling mode: evaluate only the complete windows from --start that no earlier run into --output evaluated (what scheduled runs do).")] = False,
    prefect: Annotated[bool, typer.Option("--prefect/--no-prefect", help="Run as the Prefect flow sliding-window-eval (ephemeral local API unless PREFECT_API_URL is set); --no-prefect computes in this process without Prefect.")] = True,
    **options: Any,
) -> None:
    """Evaluate algorithms with the sliding-window protocol (SW-EVAL) and print the summary.

    Runs the Prefect flow [bold]sliding-window-eval[/bold] and logs to MLflow. Rerunning the same command resumes: finished (fold, algorithm) units in --output are not recomputed."""
    verbose = options["verbose"]
    setup_logging(verbose)
    apply_env_defaults(verbose=verbose)
    cfg = build_config(ctx, options)
    api = None
    if prefect:
        from sweval.flows.startup import TemporaryApi

        api = TemporaryApi.start()  # first: it answers seconds later, while the run gets ready
    silent_api = silent_prefect_api() if prefect and api is None else None
    if silent_api is not None:  # evaluate without it, then say so (exit 2)
        console.print(f"warning: {silent_api}; evaluating in this process (as --no-prefect)",
                      markup=False, highlight=False)
        prefect = False
    console.print(f"evaluating {cfg.dataset_name}: " + (
        "starting Prefect's temporary API..." if api is not None else
        "Prefect flow sliding-window-eval..." if prefect else "in this process (--no-prefect)..."),
        markup=False, highlight=False)
    from sweval.evaluators.experiments.widths import listed
    from sweval.flows.cli.summary import print_summary

    if listed(cfg.window) or listed(cfg.train_window):
        from sweval.flows.cli.sweeps import run_sweep

        run_sweep(cfg, rolling=rolling,
                  evaluate=lambda one: evaluate_one(one, prefect=prefect, api=api))
        if silent_api is not None:
            raise evaluated_without(silent_api, cfg)
        return
    outputs = evaluate_one(cfg, prefect=prefect, api=api, rolling=rolling)
    if outputs is None:
        console.print(
            f"rolling: no complete {cfg.window} window yet in {cfg.data or cfg.dataset_name}; "
            "nothing to evaluate.", markup=False
        )
        if silent_api is not None:
            raise evaluated_without(silent_api, cfg)
        return
    print_summary(outputs, cfg)
    if rolling:
        from sweval.evaluators.run.rolling import progress_line, read_state

        state = read_state(Path(cfg.output))
        if "n_folds" in state:
            folds = outputs.folds
            skipped = folds.loc[folds["skipped"].astype(bool), "fold"].astype(int)
            console.print(progress_line(state, skipped), markup=False, highlight=False)
    print_tracking(cfg)
    if silent_api is not None:
        raise evaluated_without(silent_api, cfg)
    if outputs.failed:
        from sweval.evaluators.units.failures import UnitsFailed

        raise UnitsFailed(outputs.failed)
    if not rolling:  # a scheduled run's new window may be quiet; the next one is evaluated
        from sweval.flows.cli.summary import check_something_scored

        check_something_scored(outputs.results, u_min=cfg.u_min)


def evaluate_one(cfg: EvalConfig, *, prefect: bool, api: Any = None,
                 rolling: bool = False) -> Any:
    """One evaluation of ``cfg``: as the Prefect flow or in this process; its outputs (None:
    a rolling run found no complete window)."""
    from sweval.evaluators.run.specs import precheck

    precheck(cfg)
    if prefect:
        from sweval.evaluators.run.output_dir import claim
        from sweval.evaluators.run.sources import unit_store

        # a live run of its store from here, not once the flow starts: Prefect's start-up takes
        # seconds, in which `sweval cache prune` could delete units; the output directory is
        # claimed first (its units/ may be the store)
        claim(cfg.output)
        with unit_store(cfg).in_use():
            return run_flow(cfg, rolling=rolling, api=api)
    from sweval.flows.execute import execute

    return execute(cfg, rolling=rolling, tracking=cfg.tracking)


def run_flow(cfg: EvalConfig, *, rolling: bool, api: Any = None) -> Any:
    """Call the flow, turning an unreachable Prefect API into one clear error; the log is
    loaded and MLflow set up while Prefect's temporary API (``api``) starts
    (:mod:`flows.startup`), and the flow starts once that set-up has ended."""
    from sweval.evaluators.run.sources import load_data
    from sweval.flows.startup import finish_preloading, preload, ready_api

    preload(cfg)
    try:
        if api is not None and not rolling:
            load_data(cfg)  # kept for the flow's load-log task
        # The flow imports what the preload imports too (FastAPI: Prefect's parameters, MLflow's
        # client); two threads importing one package at once can fail (KeyError: 'fastapi').
        finish_preloading()
        with reaching_prefect("Start it (`sweval up`, or `prefect server start`), unset "
                              "PREFECT_API_URL to use a temporary local one, or run with "
                              "--no-prefect."):
            from sweval.flows.settings import flow_run_settings, hide_reported_errors_in_terminal
            from sweval.flows.sliding_window import sliding_window_eval

            hide_reported_errors_in_terminal()
            ready_api(api)
            with flow_run_settings():
                return sliding_window_eval(config=cfg, rolling=rolling)
    finally:
        finish_preloading()


@contextmanager
def reaching_prefect(remedy: str) -> Iterator[None]:
    """Turn a Prefect API that does not answer, raised in the block (httpx's errors, or
    Prefect's own "Failed to reach API"), into one SwevalError naming the API, then ``remedy``;
    any other error passes through."""
    try:
        yield
    except SwevalError:
        raise
    except Exception as exc:
        import httpx

        if not isinstance(exc, httpx.HTTPError) and not any(
            text in str(exc) for text in ("Prefect API", "Failed to reach API")  # Prefect's own
        ):
            raise
        from sweval.flows.serve import api_url
        from sweval.flows.tracking import shown_uri

        where = api_url() or (
            f"the ephemeral API (PREFECT_HOME={os.environ.get('PREFECT_HOME', '?')})")
        raise UnreachablePrefectApi(
            shown_uri(f"cannot reach the Prefect API at {where}: {exc}. {remedy}")) from exc


def silent_prefect_api() -> str | None:
    """Why the configured Prefect API (``PREFECT_API_URL``) cannot be used: it accepts
    connections but does not answer within :data:`~flows.answers.ANSWER_TIMEOUT_S` (Prefect's
    client waited 60 s a request, four times, minutes before the flow failed); None when it
    answers or refuses (Prefect's own error then names it)."""
    from sweval.flows.answers import ANSWER_TIMEOUT_S, silent
    from sweval.flows.serve import api_url
    from sweval.flows.tracking import shown_uri

    url = api_url()
    if not url or not silent(url.rstrip("/") + "/health"):
        return None
    return shown_uri(f"the Prefect API at {url} does not answer (no response within "
                     f"{ANSWER_TIMEOUT_S:g} s; it may be hung or stopped)")


def evaluated_without(silent_api: str, cfg: EvalConfig) -> SwevalError:
    """The error a run ends with when it evaluated without its silent Prefect API."""
    return SwevalError(f"{silent_api}: the run was evaluated in this process (as --no-prefect), "
                       f"its tables are in {cfg.output}. Check the server, or unset "
                       "PREFECT_API_URL to use a temporary local API.")


class UnreachablePrefectApi(SwevalError):
    """The Prefect API did not answer: at the start, or gone in the middle of a run (``sweval
    down``, a crash). The command's exit then leaves Prefect's queued logs and events behind
    (:func:`entry_point`)."""


def print_tracking(cfg: EvalConfig) -> None:
    """Where the run is in MLflow (from the run record in the output directory)."""
    if not cfg.tracking:
        return
    from sweval.flows.tracking import STATE_FILE, shown_uri

    record = Path(cfg.output) / STATE_FILE
    try:
        state = json.loads(record.read_text())
    except (OSError, ValueError):
        return
    uri = state["tracking_uri"]
    if uri.split(":", 1)[0] in ("http", "https"):  # a server (`sweval up`'s): its UI is there
        from sweval.flows.tracking.view import comparison_url

        browse = comparison_url(uri, state["experiment_id"], state["parent_run_id"])
    else:
        browse = "sweval ui" + (f" --tracking-uri {uri}" if cfg.tracking_uri else "")
    message_console(stderr=False).print(  # stdout, under the summary's "results:" line
        f"MLflow: experiment {state['experiment_id']}, parent run {state['parent_run_id']} "
        f"in {shown_uri(uri)} (browse: {shown_uri(browse)})",
        markup=False,
    )
