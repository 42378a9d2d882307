"""``sweval serve``: serve a scheduled deployment of the flow (:mod:`flows.serve`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sweval.flows.cli.logs import setup_logging
from sweval.flows.cli.options import build_config, with_eval_options
from sweval.flows.cli.run import reaching_prefect
from sweval.flows.cli.terminal import message_console
from sweval.flows.settings import apply_env_defaults

console = message_console()


@with_eval_options
def serve(
    ctx: typer.Context,
    cron: Annotated[str, typer.Option(help="Cron schedule of the runs (5 fields).")] = "0 3 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of the cron schedule.")] = "UTC",
    name: Annotated[str, typer.Option(help="Deployment name: sliding-window-eval/NAME.")] = "rolling",
    rolling: Annotated[bool, typer.Option("--rolling/--full", help="Each run evaluates only the new complete windows (rolling), or re-evaluates the whole configuration (full).")] = True,
    **options: Any,
) -> None:
    """Serve a scheduled deployment of the flow (needs a Prefect server, PREFECT_API_URL).

    Registers [bold]sliding-window-eval/NAME[/bold] with the cron schedule and runs its flow runs from this process until interrupted. Each run re-reads --data; in rolling mode it evaluates the windows completed since the previous run and appends them to the same MLflow runs. Without --start, the first run fixes the series' start so it evaluates the last --folds complete windows. Trigger a run now with:

    prefect deployment run 'sliding-window-eval/NAME'"""
    verbose = options["verbose"]
    setup_logging(verbose)
    apply_env_defaults(verbose=verbose)
    cfg = build_config(ctx, options)
    from sweval.evaluators.run.specs import precheck
    from sweval.flows.serve import serve as serve_deployment

    precheck(cfg)

    with reaching_prefect("Start it (`sweval up`, or `prefect server start`), or point "
                           "PREFECT_API_URL at a running Prefect server."):
        serve_deployment(
            cfg, name=name, cron=cron, timezone=timezone, rolling=rolling,
            announce=lambda: console.print(
                f"serving sliding-window-eval/{name} ({'rolling' if rolling else 'full'}"
                f", cron {cron!r} {timezone}); trigger a run now with `prefect "
                f"deployment run 'sliding-window-eval/{name}'`; stop with Ctrl-C",
                markup=False))
