"""``sweval compare``: one log, several evaluation protocols, the paper's Table 2 and the leakage.

::

    sweval compare --data u.data.gz --format movielens --protocols sw-eval,loocv,leave-last-one-out

runs every algorithm under every protocol (:mod:`evaluators.protocols`), then prints

1. the paper's Table 2 layout per protocol: mean Recall@k per algorithm, Δ% to the best;
2. the ranking of the algorithms under each protocol, and Kendall's τ between every pair of
   protocols (``scipy.stats.kendalltau`` on the mean Recall@k of the algorithms both evaluate);
3. the leakage diagnostic (papers/000 Table 4): how many recommended items first appear in the
   log after the test instance's time. Zero by construction for ``sw-eval`` and
   ``temporal-global``; it is computed anyway and a non-zero value is flagged as a bug.

Output directory (``--output``, default ``runs/compare``)::

    compare.csv            the long table (SPEC §8) of every protocol, ``protocol`` first
    compare_summary.csv    mean ± std over splits per protocol, algorithm, metric and k, Δ%
    table2.csv             the Recall rows of the summary (what Table 2 prints)
    kendall.csv            τ and p-value per protocol pair and k
    leakage.csv            future items per protocol, algorithm and k, pooled over splits
    leakage_per_split.csv  the same per split (fold / repetition seed)
    compare.txt            the printed tables
    compare.json           configuration, protocol parameters, data facts, timings
    sw-eval/               exactly what ``sweval run`` writes (results.csv, summary.csv, ...)
    <protocol>/            results.csv, splits.csv, units.csv; units/ for resuming

Finished (split, algorithm) units are stored per protocol, so an interrupted comparison resumes.

MLflow (unless ``--no-track``): in the experiment of ``sweval run`` (``sweval/<dataset>``), a
parent run ``compare-<dataset>-<stamp>`` per comparison holds the Kendall τ values, the leakage
shares and every file above as artifacts. Each protocol is logged by :class:`flows.tracking.Tracker`
exactly as ``sweval run`` logs an evaluation (a run with one child per algorithm, metrics stepped
by fold or LOOCV seed), re-parented under the comparison run and tagged ``sweval.protocol``; each
algorithm child also gets ``future_items_at_k`` and ``future_share_at_k``.
"""

from __future__ import annotations

import io
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.config import EvalConfig
from sweval.evaluators.metrics import LABELS
from sweval.evaluators.protocols import (
    COMPARE_COLUMNS,
    LOOCV,
    LeaveLastOneOut,
    Protocol,
    ProtocolRun,
    SlidingWindow,
    TemporalGlobal,
    compare_summary,
    count_units,
    kendall_table,
    leakage_summary,
    parse_protocols,
    rankings,
    run_protocol,
    table2,
)
from sweval.evaluators.run import Plan, collect, make_plan, window_spec, write_outputs
from sweval.evaluators.store import UnitStore
from sweval.flows.pipeline import write_report_quietly

_log = logging.getLogger(__name__)

DEFAULT_PROTOCOLS = "sw-eval,loocv,leave-last-one-out"
PROTOCOLS_HELP = "Comma-separated: sw-eval, loocv, leave-last-one-out, temporal-global."
DEFAULT_OUTPUT = "runs/compare"
#: ``sweval run``'s default output; compare writes to :data:`DEFAULT_OUTPUT` instead.
DEFAULT_RUN_OUTPUT = "runs/latest"
STATE_FILE = "tracking.json"
#: Width of the printed tables when the output is not a terminal (and of ``compare.txt``).
PRINT_WIDTH = 160


# ---------------------------------------------------------------------- the comparison
@dataclass
class Comparison:
    """Everything a comparison produced.

    Attributes:
        config: the run's configuration (its ``output`` is the ``sw-eval`` sub-directory).
        directory: the comparison's output directory.
        protocols: the protocol names, in the order given.
        runs: per protocol, its :class:`~evaluators.protocols.ProtocolRun`.
        results: the long table of every protocol (``compare.csv``).
        summary: per protocol, the macro means with Δ% (``compare_summary.csv``).
        kendall: τ per protocol pair and k (``kendall.csv``).
        leakage: future items pooled over splits (``leakage.csv``).
        log: the log compared on.
        timings: seconds per protocol.
        mlflow_run_id: the comparison's MLflow parent run, when tracked.
    """

    config: EvalConfig
    directory: Path
    protocols: list[str]
    runs: dict[str, ProtocolRun]
    results: pd.DataFrame
    summary: pd.DataFrame
    kendall: pd.DataFrame
    leakage: pd.DataFrame
    log: InteractionLog
    loocv_repeats: int
    timings: dict[str, float] = field(default_factory=dict)
    mlflow_run_id: str | None = None

    @property
    def ks(self) -> list[int]:
        return list(self.config.k)

    @property
    def leakage_per_split(self) -> pd.DataFrame:
        return pd.concat([run.leakage for run in self.runs.values()], ignore_index=True)


def build_protocol(
    name: str, config: EvalConfig, *, loocv_repeats: int, plan: Plan | None = None
) -> Protocol:
    """The protocol ``name`` with the options of ``config`` (u_min, relevance, start, ...)."""
    if name == "sw-eval":
        if plan is None:
            raise ValueError("sw-eval needs the plan's folds")
        return SlidingWindow(plan.folds, relevance=config.relevance)
    if name == "loocv":
        return LOOCV(repeats=loocv_repeats, u_min=config.u_min)
    if name == "leave-last-one-out":
        return LeaveLastOneOut(u_min=config.u_min)
    if name == "temporal-global":
        spec = window_spec(config)
        return TemporalGlobal(start=spec.start, train_window_s=spec.train_window_s,
                              u_min=config.u_min, relevance=config.relevance)
    raise SwevalError(f"unknown protocol {name!r}")


def _protocol_key(protocol: Protocol, config: EvalConfig, fingerprint: str) -> str:
    import hashlib

    text = json.dumps(
        {"protocol": protocol.name, "params": protocol.describe(), "config": config.result_hash()},
        sort_keys=True, default=str,
    )
    return f"{protocol.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}-{fingerprint}"


def run_compare(
    config: EvalConfig,
    protocols: list[str],
    *,
    output: str | Path,
    loocv_repeats: int = 10,
    console: Console | None = None,
    log: InteractionLog | None = None,
) -> Comparison:
    """Run every protocol, write the tables, and track them in MLflow when ``config.tracking``.

    Args:
        config: the options of ``sweval run`` (its ``output`` is ignored: the SW-EVAL part goes
            to ``<output>/sw-eval``).
        protocols: protocol names (:data:`evaluators.protocols.PROTOCOLS`).
        output: the comparison's output directory.
        loocv_repeats: LOOCV repetitions (seeds 0..n−1).
        console: where the progress bar goes (none when ``config.progress`` is false).
        log: an already loaded log (tests); default: load ``config.data``.

    Raises:
        SwevalError: bad options, data or protocol problems, tracking failures.
    """
    protocols = parse_protocols(protocols)
    if loocv_repeats < 1:
        raise SwevalError(f"--loocv-repeats must be at least 1, got {loocv_repeats}.")
    directory = Path(output)
    config = config.model_copy(update={"output": str(directory / "sw-eval")})
    plan = make_plan(config, log)  # validates algorithms, --set, windows; loads the data
    log = plan.log

    built = [build_protocol(name, config, loocv_repeats=loocv_repeats, plan=plan)
             for name in protocols]
    names = list(config.algorithms)
    tracker_group = _Tracking.open(config, directory, protocols, loocv_repeats, log) \
        if config.tracking else None
    runs: dict[str, ProtocolRun] = {}
    timings: dict[str, float] = {}
    try:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(
            TextColumn("[bold]{task.description}[/bold]"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console, disable=not config.progress, transient=True,
        ) as progress:
            for protocol in built:
                task = progress.add_task(protocol.name, total=count_units(log, protocol, names))
                clock = time.perf_counter()
                if protocol.name == "sw-eval":
                    key, store = plan.key, plan.store()
                else:
                    key = _protocol_key(protocol, config, log.fingerprint())
                    store = UnitStore(directory / protocol.name, key)
                run = run_protocol(
                    log, protocol, names, ks=config.k, params=config.params, config_hash=key,
                    store=store, progress=lambda n, task=task: progress.advance(task, n),
                )
                timings[protocol.name] = time.perf_counter() - clock
                runs[protocol.name] = run
                files = _write_protocol(directory, protocol, run, plan, store)
                if tracker_group is not None:
                    tracker_group.log_protocol(protocol, run, key, files)
        comparison = _assemble(config, directory, protocols, runs, log, loocv_repeats, timings)
        if tracker_group is not None:
            comparison.mlflow_run_id = tracker_group.parent_run_id
        write_comparison(comparison)
        write_report_quietly(directory)
        if tracker_group is not None:
            tracker_group.finish(comparison)
    except BaseException as exc:
        if tracker_group is not None:
            tracker_group.fail("KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED")
        raise
    return comparison


def _write_protocol(
    directory: Path, protocol: Protocol, run: ProtocolRun, plan: Plan, store: UnitStore
) -> list[Path]:
    """A protocol's own files; for ``sw-eval`` exactly those of ``sweval run``."""
    if protocol.name == "sw-eval":
        outputs = collect(plan, store)
        write_outputs(plan, outputs)
        return [outputs.directory / name for name in
                ("results.csv", "summary.csv", "folds.csv", "units.csv", "config.json")]
    target = directory / protocol.name
    try:
        target.mkdir(parents=True, exist_ok=True)
        run.results.drop(columns="protocol").to_csv(target / "results.csv", index=False,
                                                    float_format="%.10g")
        run.splits.to_csv(target / "splits.csv", index=False)
        run.units.to_csv(target / "units.csv", index=False, float_format="%.4f")
    except OSError as exc:
        raise SwevalError(f"{target}: cannot write the results ({exc}).") from exc
    return [target / name for name in ("results.csv", "splits.csv", "units.csv")]


def _assemble(
    config: EvalConfig,
    directory: Path,
    protocols: list[str],
    runs: dict[str, ProtocolRun],
    log: InteractionLog,
    loocv_repeats: int,
    timings: dict[str, float],
) -> Comparison:
    results = pd.concat([runs[name].results for name in protocols], ignore_index=True)
    results = results[COMPARE_COLUMNS]
    summary = compare_summary(results)
    leakage = leakage_summary(
        pd.concat([runs[name].leakage for name in protocols], ignore_index=True)
    )
    return Comparison(
        config=config,
        directory=directory,
        protocols=protocols,
        runs=runs,
        results=results,
        summary=summary,
        kendall=kendall_table(summary, protocols),
        leakage=leakage,
        log=log,
        loocv_repeats=loocv_repeats,
        timings=timings,
    )


def write_comparison(comparison: Comparison) -> None:
    """Write the comparison's tables and the printed text (see the module docstring)."""
    directory = comparison.directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
        kw: dict[str, Any] = {"index": False, "float_format": "%.10g"}
        comparison.results.to_csv(directory / "compare.csv", **kw)
        comparison.summary.to_csv(directory / "compare_summary.csv", **kw)
        table2(comparison.summary).to_csv(directory / "table2.csv", **kw)
        comparison.kendall.to_csv(directory / "kendall.csv", **kw)
        comparison.leakage.to_csv(directory / "leakage.csv", **kw)
        comparison.leakage_per_split.to_csv(directory / "leakage_per_split.csv", **kw)
        recorder = Console(record=True, width=PRINT_WIDTH, file=io.StringIO())
        print_comparison(comparison, recorder)
        (directory / "compare.txt").write_text(recorder.export_text())
        _write_record(comparison)
    except OSError as exc:
        raise SwevalError(f"{directory}: cannot write the comparison ({exc}).") from exc


def _write_record(comparison: Comparison) -> None:
    from sweval.algorithms.registry import default_params

    log = comparison.log
    record = {
        "config": comparison.config.model_dump(),
        "protocols": {name: run.params for name, run in comparison.runs.items()},
        "loocv_repeats": comparison.loocv_repeats,
        "data": {
            "source": log.source, "fingerprint": log.fingerprint(), "n_interactions": len(log),
            "n_users": log.n_users, "n_items": log.n_items, "t_min": log.t_min,
            "t_max": log.t_max,
        },
        "resolved_params": {
            name: default_params(name) | comparison.config.params.get(name, {})
            for name in comparison.config.algorithms
        },
        "devices": {name: device for run in comparison.runs.values()
                    for name, device in run.devices.items()},
        "devices_per_protocol": {name: run.devices for name, run in comparison.runs.items()},
        "seconds": comparison.timings,
        "mlflow_run_id": comparison.mlflow_run_id,
    }
    (comparison.directory / "compare.json").write_text(
        json.dumps(record, indent=2, default=lambda v: v.item() if hasattr(v, "item") else str(v))
    )


# ---------------------------------------------------------------------- printing
def _protocol_title(comparison: Comparison, name: str) -> str:
    run = comparison.runs[name]
    used = int((~run.splits["skipped"]).sum()) if len(run.splits) else 0
    skipped = len(run.splits) - used
    what = {
        "sw-eval": f"{len(run.splits)}-fold SW-EVAL ({comparison.config.window} windows"
                   + (f", {skipped} skipped" if skipped else "") + ")",
        "loocv": f"{used}-repetition LOOCV (seeds 0..{comparison.loocv_repeats - 1})",
        "leave-last-one-out": "leave-last-one-out",
        "temporal-global": "temporal-global (one cut-off)",
    }[name]
    return what


def table2_table(comparison: Comparison, name: str, *, metric: str = "recall") -> Table:
    """The paper's Table 2 block of one protocol: rows k, per algorithm the mean and Δ%."""
    part = table2(comparison.summary, metric=metric)
    part = part[part["protocol"] == name]
    label = LABELS.get(metric, metric)
    table = Table(title=f"Mean {label}@k — {_protocol_title(comparison, name)}",
                  title_justify="left")
    table.add_column("k", justify="right", style="bold")
    algorithms = list(dict.fromkeys(part["algorithm"]))
    for algorithm in algorithms:
        table.add_column(algorithm, justify="right", overflow="fold")
        table.add_column("Δ%", justify="right", style="dim", overflow="fold")
    for k in comparison.ks:
        cells = [str(k)]
        for algorithm in algorithms:
            row = part[(part["algorithm"] == algorithm) & (part["k"] == k)]
            if row.empty or pd.isna(row["mean"].iloc[0]):
                cells += ["—", ""]
                continue
            mean, delta = float(row["mean"].iloc[0]), float(row["delta"].iloc[0])
            best = not np.isnan(delta) and abs(delta) < 1e-12
            cells += [f"[bold]{mean:.4f}[/bold]" if best else f"{mean:.4f}",
                      "best" if best else (f"{100 * delta:+.0f}%" if not np.isnan(delta) else "")]
        table.add_row(*cells)
    return table


def skip_notes(comparison: Comparison, name: str) -> list[str]:
    """Why algorithms or splits of protocol ``name`` were not evaluated (one line per reason)."""
    results = comparison.runs[name].results
    skipped = results.loc[results["skipped"], ["fold", "algorithm", "skip_reason"]]
    notes = []
    for reason, rows in skipped.groupby("skip_reason", sort=False):
        algorithms = ", ".join(dict.fromkeys(rows["algorithm"]))
        n_splits = rows["fold"].nunique()
        notes.append(f"skipped ({algorithms}; {n_splits} split(s)): {reason}")
    return notes


def ranking_table(comparison: Comparison, *, metric: str = "recall") -> Table:
    """The ranking of the algorithms under every protocol, per k (best first)."""
    table = Table(title=f"Ranking by mean {LABELS.get(metric, metric)}@k (best first)",
                  title_justify="left")
    table.add_column("protocol", style="bold")
    for k in comparison.ks:
        table.add_column(f"k={k}")
    per_k = {k: rankings(comparison.summary, k, metric=metric) for k in comparison.ks}
    for name in comparison.protocols:
        table.add_row(name, *(" > ".join(per_k[k].get(name, [])) for k in comparison.ks))
    return table


def kendall_rich(comparison: Comparison) -> Table:
    """Kendall's τ (p-value) between the rankings of every pair of protocols, per k."""
    table = Table(title="Kendall's τ between the protocols' rankings (p-value; n = algorithms "
                  "both protocols rank)",
                  title_justify="left")
    table.add_column("protocols", style="bold")
    table.add_column("n", justify="right")
    for k in comparison.ks:
        table.add_column(f"k={k}", justify="right")
    frame = comparison.kendall
    for (first, second), rows in frame.groupby(["protocol_a", "protocol_b"], sort=False):
        cells = [f"{first} vs {second}", str(int(rows["n_algorithms"].max()))]
        for k in comparison.ks:
            row = rows[rows["k"] == k]
            if row.empty or pd.isna(row["tau"].iloc[0]):
                cells.append("—")
            else:
                r = row.iloc[0]
                cells.append(f"{r['tau']:+.2f} (p={r['p_value']:.2f})")
        table.add_row(*cells)
    return table


def leakage_rich(comparison: Comparison, k: int | None = None) -> Table:
    """Future items among the top-k lists (papers/000 Table 4), pooled over splits."""
    k = k if k is not None else max(comparison.ks)
    table = Table(
        title=f"Leakage: recommended items (top-{k}) that first appear in the log after the test "
        "instance's time",
        title_justify="left",
    )
    for column, justify in (("protocol", "left"), ("algorithm", "left"), ("lists", "right"),
                            ("recommended", "right"), ("future items", "right"),
                            ("share", "right"), ("lists with one", "right"),
                            ("note", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    frame = comparison.leakage[comparison.leakage["k"] == k]
    timeline = {name: _observes_timeline(name) for name in comparison.protocols}
    for row in frame.itertuples():
        share = "—" if pd.isna(row.share_future) else f"{100 * row.share_future:.2f}%"
        if timeline[row.protocol]:
            note = "0 by construction" if row.n_future == 0 else "[bold red]BUG: must be 0[/]"
        else:
            note = "ignores the timeline"
        table.add_row(row.protocol, row.algorithm, f"{row.n_lists:,}", f"{row.n_recommended:,}",
                      f"{row.n_future:,}", share, f"{row.n_lists_with_future:,}", note)
    return table


def _observes_timeline(name: str) -> bool:
    return name in ("sw-eval", "temporal-global")


def print_comparison(comparison: Comparison, console: Console | None = None) -> None:
    """Print Table 2 per protocol, the rankings, Kendall's τ and the leakage diagnostic."""
    if console is None:
        console = Console()
        if not console.is_terminal:  # a file or a pipe: never squeeze the numbers to 80 columns
            console = Console(width=PRINT_WIDTH)
    log = comparison.log
    console.print(
        f"[bold]compare[/bold] on {comparison.config.dataset_name}: {len(log):,} interactions, "
        f"{log.n_users:,} users, {log.n_items:,} items; protocols: "
        f"{', '.join(comparison.protocols)}"
    )
    for name in comparison.protocols:
        console.print(table2_table(comparison, name))
        for note in skip_notes(comparison, name)[:4]:
            console.print(f"  {note}", style="dim", highlight=False)
    console.print(ranking_table(comparison))
    if len(comparison.protocols) > 1:
        console.print(kendall_rich(comparison))
    console.print(leakage_rich(comparison))
    console.print(
        "  first appearance = an item's first timestamp in the whole log; test instance = the "
        "held-out transaction (hold-out protocols) or the user's first test transaction; counts "
        "are summed over splits (LOOCV: over all repetitions)", style="dim", highlight=False,
    )
    console.print(
        f"files: {comparison.directory}/compare.csv, kendall.csv, leakage.csv, table2.csv, "
        "compare.txt" + (f"; MLflow run {comparison.mlflow_run_id}" if comparison.mlflow_run_id
                         else "")
    )


# ---------------------------------------------------------------------- MLflow
class _Tracking:
    """The comparison's MLflow runs: a parent; per protocol a :class:`flows.tracking.Tracker`."""

    def __init__(self, config: EvalConfig, directory: Path, protocols: list[str],
                 loocv_repeats: int, log: InteractionLog) -> None:
        self.config = config
        self.directory = directory
        self.protocols = protocols
        self.loocv_repeats = loocv_repeats
        self.log = log
        self.client: Any = None
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.trackers: dict[str, Any] = {}

    @classmethod
    def open(cls, config: EvalConfig, directory: Path, protocols: list[str],
             loocv_repeats: int, log: InteractionLog) -> _Tracking:
        return cls(config, directory, protocols, loocv_repeats, log)

    def _key(self) -> str:
        import hashlib

        text = json.dumps({"protocols": self.protocols, "loocv_repeats": self.loocv_repeats,
                           "config": self.config.result_hash()}, sort_keys=True)
        return f"compare-{hashlib.sha256(text.encode()).hexdigest()[:12]}-{self.log.fingerprint()}"

    def _ensure_parent(self, tracker: Any) -> str:
        """Create (or reopen, same key) the comparison's parent run in the tracker's experiment."""
        if self.parent_run_id is not None:
            return self.parent_run_id
        self.client, self.experiment_id = tracker.client, tracker.experiment_id
        state_path = self.directory / STATE_FILE
        key = self._key()
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("key") == key and state.get("experiment_id") == self.experiment_id:
            try:
                run = self.client.get_run(state["parent_run_id"])
                if run.info.lifecycle_stage == "active":
                    self.parent_run_id = run.info.run_id
                    self.client.update_run(self.parent_run_id, status="RUNNING")
            except Exception:  # deleted meanwhile: start a new one
                self.parent_run_id = None
        if self.parent_run_id is None:
            stamp = time.strftime("%Y%m%dT%H%M", time.gmtime())
            run = self.client.create_run(
                self.experiment_id,
                run_name=f"compare-{self.config.dataset_name}-{stamp}",
                tags={"sweval.mode": "compare", "sweval.run_key": key,
                      "sweval.dataset": self.config.dataset_name,
                      "sweval.data_fingerprint": self.log.fingerprint(),
                      "sweval.output_dir": str(self.directory.resolve())},
            )
            self.parent_run_id = run.info.run_id
            self.directory.mkdir(parents=True, exist_ok=True)
            state_path.write_text(json.dumps({"key": key, "experiment_id": self.experiment_id,
                                              "parent_run_id": self.parent_run_id}, indent=2))
        params = {
            "protocols": ",".join(self.protocols),
            "loocv_repeats": str(self.loocv_repeats),
            "algorithms": ",".join(self.config.algorithms),
            "k": ",".join(map(str, self.config.k)),
            "window": self.config.window, "folds": str(self.config.folds),
            "u_min": str(self.config.u_min), "relevance": self.config.relevance,
            "start": str(self.config.start), "data": str(self.config.data),
        }
        existing = dict(self.client.get_run(self.parent_run_id).data.params)
        from mlflow.entities import Param

        new = [Param(k, v) for k, v in params.items() if k not in existing]
        if new:
            self.client.log_batch(self.parent_run_id, params=new)
        return self.parent_run_id

    def log_protocol(self, protocol: Protocol, run: ProtocolRun, key: str,
                     files: list[Path]) -> None:
        """Log one protocol like ``sweval run`` does, as a child of the comparison run."""
        from mlflow.entities import Metric

        from sweval.flows.tracking import Tracker, metric_key

        sub = self.config.model_copy(update={"output": str(self.directory / protocol.name)})
        mode = "batch" if protocol.name == "sw-eval" else protocol.name
        tracker = Tracker.open(sub, key=key, fingerprint=self.log.fingerprint(),
                               source=self.log.source, mode=mode)
        self.trackers[protocol.name] = tracker
        parent = self._ensure_parent(tracker)
        client = tracker.client
        try:
            client.set_tag(tracker.parent_run_id, "mlflow.parentRunId", parent)
            client.set_tag(tracker.parent_run_id, "sweval.protocol", protocol.name)
            client.update_run(tracker.parent_run_id,
                              name=f"{protocol.name} ({self.config.dataset_name})")
            for name, value in protocol.describe().items():
                client.set_tag(tracker.parent_run_id, f"sweval.protocol.{name}", str(value))
            results = run.results.drop(columns="protocol")
            summary = compare_summary(run.results).drop(columns="protocol")
            tracker.log_rows(results.to_dict("records"))
            pooled = leakage_summary(run.leakage)
            now = int(time.time() * 1000)
            for (algorithm, _stratum), run_id in tracker.children.items():
                rows = pooled[pooled["algorithm"] == algorithm]
                metrics = []
                for row in rows.itertuples():
                    metrics.append(Metric(metric_key("future_items", row.k),
                                          float(row.n_future), now, 0))
                    if not pd.isna(row.share_future):
                        metrics.append(Metric(metric_key("future_share", row.k),
                                              float(row.share_future), now, 0))
                if metrics:
                    client.log_batch(run_id, metrics=metrics)
                client.set_tag(run_id, "sweval.protocol", protocol.name)
            n_splits = len(run.splits)
            tracker.finish(results, summary, run.devices, files, n_folds=n_splits)
        except SwevalError:
            raise
        except Exception as exc:
            raise SwevalError(f"MLflow tracking: {type(exc).__name__}: {exc}") from exc

    def finish(self, comparison: Comparison) -> str | None:
        """Log the comparison's metrics and files on the parent run and close it."""
        from mlflow.entities import Metric

        from sweval.flows.tracking import metric_key

        if self.parent_run_id is None:
            return None
        try:
            now = int(time.time() * 1000)
            metrics = []
            for row in comparison.kendall.itertuples():
                if not pd.isna(row.tau):
                    metrics.append(Metric(
                        metric_key(f"kendall_tau_{row.protocol_a}_vs_{row.protocol_b}", row.k),
                        float(row.tau), now, 0))
            for row in comparison.leakage.itertuples():
                base = f"{row.protocol}_{row.algorithm}"
                metrics.append(Metric(metric_key(f"future_items_{base}", row.k),
                                      float(row.n_future), now, 0))
                if not pd.isna(row.share_future):
                    metrics.append(Metric(metric_key(f"future_share_{base}", row.k),
                                          float(row.share_future), now, 0))
            summary = table2(comparison.summary)
            for row in summary.itertuples():
                if not pd.isna(row.mean):
                    metrics.append(Metric(
                        metric_key(f"mean_recall_{row.protocol}_{row.algorithm}", row.k),
                        float(row.mean), now, 0))
            for lo in range(0, len(metrics), 900):
                self.client.log_batch(self.parent_run_id, metrics=metrics[lo : lo + 900])
            reports = sorted(p.name for p in comparison.directory.glob("report*"))
            for name in ("compare.csv", "compare_summary.csv", "table2.csv", "kendall.csv",
                         "leakage.csv", "leakage_per_split.csv", "compare.txt", "compare.json",
                         *reports):
                path = comparison.directory / name
                if path.exists():
                    self.client.log_artifact(self.parent_run_id, str(path))
            self.client.set_terminated(self.parent_run_id, "FINISHED")
        except Exception as exc:
            raise SwevalError(f"MLflow tracking: {type(exc).__name__}: {exc}") from exc
        return self.parent_run_id

    def fail(self, status: str) -> None:
        for tracker in self.trackers.values():
            tracker.fail(status)
        if self.parent_run_id is not None:
            try:
                self.client.set_terminated(self.parent_run_id, status)
            except Exception as exc:  # the comparison's own error matters more
                _log.warning("MLflow: could not mark the comparison %s: %s", status, exc)


# ---------------------------------------------------------------------- the command
def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def compare(
    ctx: typer.Context,
    protocols: Annotated[str, typer.Option(help=PROTOCOLS_HELP)] = DEFAULT_PROTOCOLS,
    loocv_repeats: Annotated[int, typer.Option(help="LOOCV repetitions (seeds 0..n-1).")] = 10,
    **options: Any,
) -> None:
    from sweval.flows.cli import _setup_logging
    from sweval.flows.options import build_config

    _setup_logging(options["verbose"])
    cfg = build_config(ctx, options)
    if cfg.stratify_by is not None:
        raise SwevalError(
            "--stratify-by: compare reports the unstratified results only; run "
            "`sweval run --stratify-by ...` for per-policy results."
        )
    output = cfg.output if cfg.output != DEFAULT_RUN_OUTPUT else DEFAULT_OUTPUT
    comparison = run_compare(cfg, _split(protocols), output=output, loocv_repeats=loocv_repeats,
                             console=Console(stderr=True))
    print_comparison(comparison)


# Typer keeps a docstring's line breaks: the help text is built from one-line paragraphs.
compare.__doc__ = "\n\n".join([
    "Compare evaluation protocols on one log: the paper's Table 2 per protocol, the rankings "
    "with Kendall's τ between protocols, and the future-item leakage diagnostic.",
    "Takes every option of [bold]sweval run[/bold] (data, windows, k, u_min, algorithms, --set, "
    "MLflow, ...). --start is also the temporal-global cut-off (default: the start of the last "
    "20% of the log's time span); --output defaults to runs/compare. Runs in this process (no "
    "Prefect; --task-runner and --workers are ignored). Rerunning the same command resumes.",
])
