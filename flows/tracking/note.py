"""The parent run's description (``mlflow.note.content``, Markdown): the summary table and the
protocol in words, as the MLflow UI shows it on the run's page."""

from __future__ import annotations

import pandas as pd

from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.metrics.names import LABELS

#: The run tag MLflow's UI shows (and edits) as the run's description.
NOTE_TAG = "mlflow.note.content"


def _cell(mean: float, delta: float) -> str:
    """``0.1234 (−12%)``; the best value bold; ``—`` when no fold was used."""
    if pd.isna(mean):
        return "—"
    if pd.isna(delta):  # every algorithm scored 0: no best, no Δ%
        return f"{mean:.4f}"
    if abs(delta) < 1e-12:
        return f"**{mean:.4f}**"
    return f"{mean:.4f} ({100 * delta:+z.0f}%)"


def _escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("*", "\\*").replace("_", "\\_")


def summary_markdown(summary: pd.DataFrame, *, metric: str = "recall") -> str:
    """Per stratum, a Markdown table: one row per algorithm, the mean ``metric``@k over the used
    folds per k (Δ% to the best at that k; the best in bold) and the folds used/skipped."""
    label = LABELS.get(metric, metric)
    blocks = []
    part = summary[summary["metric"] == metric]
    strata = list(dict.fromkeys(part["stratum"]))
    for stratum in strata:
        rows = part[part["stratum"] == stratum]
        ks = sorted(int(k) for k in rows["k"].dropna().unique())
        lines = []
        if len(strata) > 1:
            lines.append(f"**stratum {_escape(stratum)}**\n")
        lines.append("| algorithm | " + " | ".join(f"{label}@{k}" for k in ks) + " | folds used/skipped |")
        lines.append("|---|" + "---:|" * len(ks) + "---:|")
        for algorithm, own in rows.groupby("algorithm", sort=False):
            cells = []
            for k in ks:
                at_k = own[own["k"] == k]
                cells.append(_cell(at_k["mean"].iloc[0], at_k["delta"].iloc[0])
                             if len(at_k) else "—")
            folds = f"{int(own['n_folds'].max())}/{int(own['n_skipped'].max())}"
            lines.append(f"| {_escape(algorithm)} | " + " | ".join(cells) + f" | {folds} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def protocol_words(config: EvalConfig, *, n_folds: int | None = None) -> str:
    """The protocol of the run in words (SPEC §2, §4, §6)."""
    folds = n_folds if n_folds is not None else config.folds
    start = (f"the first starting at {config.start}" if config.start else
             "the last ending at the first window boundary after the log's last event")
    train = (f"the interactions of the {config.train_window} before the window's start"
             if config.train_window else "every interaction before the window's start")
    relevance = ("every item the user interacted with in the window is relevant"
                 if config.relevance == "all" else
                 "only the user's first item in the window is relevant")
    if config.stratify_by is None:
        strata = "No stratification."
    elif config.stratify_mode == "subset":
        strata = (f"Stratified by `{config.stratify_by}` (subset): the whole protocol "
                  "also runs on each stratum's transactions alone, u_min per stratum; stratum "
                  "`all` is the unstratified result.")
    else:
        strata = (f"Stratified by `{config.stratify_by}` (test): models train on all "
                  "the history; eligible users are grouped by the policy of their test "
                  "transactions; stratum `all` is the unstratified result.")
    ks = ", ".join(map(str, config.k))
    return (
        f"Sliding-window evaluation (SW-EVAL) of {', '.join(map(_escape, config.algorithms))} on "
        f"{_escape(config.dataset_name)}: {folds} consecutive windows of {config.window} "
        f"(folds), {start}. Each fold trains on {train} and tests on the window. Eligible users "
        "have at least one interaction before the window and one in it; a fold with fewer than "
        f"u_min = {config.u_min} eligible users is skipped. Relevance `{config.relevance}`: "
        f"{relevance}; already-seen items are never recommended. Cut-offs k = {ks}. A fold's "
        "value is the mean over its eligible users; the run's value is the mean over the used "
        f"folds (macro). {strata}"
    )


def run_note(config: EvalConfig, summary: pd.DataFrame, *, n_folds: int | None = None) -> str:
    """The parent run's description: the summary table, then the protocol in words."""
    label = LABELS.get("recall", "recall")
    return (
        f"### {label}@k on {_escape(config.dataset_name)}, {config.window} windows\n\n"
        f"Mean over the used folds, Δ% to the best (bold).\n\n"
        f"{summary_markdown(summary)}\n\n"
        "Every metric per fold: the child runs' charts and `per_fold.csv`; all summaries: "
        "`summary.csv`, the report: `report.html` (artifacts).\n\n"
        f"### Protocol\n\n{protocol_words(config, n_folds=n_folds)}\n"
    )
