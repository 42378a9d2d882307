"""``sweval generate``: write a synthetic retail-like log with an A/B policy column."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sweval.data.errors import SwevalError
from sweval.flows.cli.logs import setup_logging
from sweval.flows.cli.terminal import message_console

console = message_console()


def generate(
    out: Annotated[Path, typer.Argument(help="Output file: .csv, .csv.gz or .parquet.")],
    scale: Annotated[float, typer.Option(help="1.0 ≈ 735k interactions, 189k users, 10.7k items, 120 days.")] = 0.1,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same log).")] = 0,
    days: Annotated[int, typer.Option(help="Length of the log in days.")] = 120,
    bias: Annotated[float, typer.Option(help="Share of clicks driven by the user's A/B bucket policy (presentation bias), 0..1.")] = 0.3,
) -> None:
    """Write a synthetic retail-like log with an A/B policy column."""
    from sweval.data.synthetic import generate_log

    setup_logging(False)
    if scale <= 0:
        raise SwevalError(f"--scale must be > 0, got {scale}.")
    frame = generate_log(scale=scale, seed=seed, days=days, bias=bias)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    else:
        frame.to_csv(out, index=False)
    console.print(
        f"wrote {out}: {len(frame):,} interactions, {frame['user'].nunique():,} users, "
        f"{frame['item'].nunique():,} items", markup=False
    )
