"""The page of a `sweval gap` output: its table is gap.csv, its rank agreement is Kendall's τ-b
counted by hand, and `sweval report` redraws it from the output's files."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY, unwrapped

from sweval.data.errors import SwevalError
from sweval.evaluators.report.gap_page import gap_section, ranking_agreement, write_gap_report
from sweval.flows.cli.app import main


def _gap(rows: list[tuple[str, str, float, float]], metric: str = "recall", k: float = 10.0
         ) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["algorithm", "validation", "validation_value",
                                        "test_value"])
    frame["drop_pct"] = 100 * (frame["test_value"] / frame["validation_value"] - 1)
    return frame.assign(metric=metric, k=k)


def _tau_by_hand(x: list[float], y: list[float]) -> float:
    """Kendall's τ-b: (concordant − discordant) / sqrt((n0 − ties in x)(n0 − ties in y))."""
    n = len(x)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    signs = [np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i, j in pairs]
    tied_x = sum(x[i] == x[j] for i, j in pairs)
    tied_y = sum(y[i] == y[j] for i, j in pairs)
    return sum(signs) / np.sqrt((len(pairs) - tied_x) * (len(pairs) - tied_y))


def test_rank_agreement_by_hand_with_ties_and_a_missing_algorithm():
    deployed = {"a": 0.30, "b": 0.20, "c": 0.25, "d": 0.10}
    validation = {  # traditional: reversed with a tie; proportional: lacks the deployed best
        "traditional": {"a": 0.1, "b": 0.4, "c": 0.1, "d": 0.5},
        "proportional": {"b": 0.2, "c": 0.3, "d": 0.1},
        "cut-off": {"a": 0.5, "b": 0.2, "c": 0.3, "d": 0.1},
    }
    gap = _gap([(a, name, v, deployed[a]) for name, values in validation.items()
                for a, v in values.items()])
    table = gap_section(gap, "recall", 10, list(deployed)).agreement
    got = {row[0]: row for row in table.rows}
    for name, values in validation.items():
        algorithms = list(values)
        tau = _tau_by_hand([values[a] for a in algorithms], [deployed[a] for a in algorithms])
        assert got[f"val {name}"][1] == str(len(algorithms))
        assert got[f"val {name}"][2] == f"{tau:+.2f}", name
    assert got["val traditional"][3:] == ["d", "no"]
    assert got["val proportional"][3:] == ["c", "no"]  # best of what it scores, but not a
    assert got["val cut-off"][3:] == ["a", "yes"]
    assert got["deployed"][3] == "a"


def test_a_tie_for_best_and_too_few_algorithms():
    validation = pd.DataFrame({"traditional": [0.2, 0.2], "cut-off": [0.1, np.nan]},
                              index=["a", "b"])
    table = ranking_agreement(validation, pd.Series({"a": 0.1, "b": 0.3}))
    got = {row[0]: row for row in table.rows}
    assert got["val traditional"][2:] == ["—", "a, b", "yes"]  # constant validation: no τ
    assert got["val cut-off"][1:] == ["1", "—", "a", "no"]
    assert got["val proportional"][1:] == ["0", "—", "—", "—"]


def test_the_table_is_gap_csv_and_r_precision_has_no_k():
    gap = pd.concat([
        _gap([("a", "traditional", 0.2, 0.1), ("a", "cut-off", 0.08, 0.1)]),
        _gap([("a", "traditional", 0.5, 0.4)], metric="r_precision", k=np.nan),
    ])
    section = gap_section(gap, "recall", 10, ["a"])
    assert section.table.columns == ["algorithm", "val traditional", "change",
                                     "val proportional", "change", "val cut-off", "change",
                                     "deployed"]
    assert section.table.rows == [["a", "0.2000", "-50.0%", "—", "", "0.0800", "+25.0%",
                                   "0.1000"]]
    no_k = gap_section(gap, "r_precision", None, ["a"])
    assert (no_k.label, no_k.figure.file_name) == ("R-precision", "report-gap-r_precision.png")
    assert no_k.table.rows[0][1:3] == ["0.5000", "-20.0%"]


def test_the_command_writes_the_page_and_report_redraws_it(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(0)
    data = tmp_path / "log.csv"
    pd.DataFrame({"user": rng.integers(0, 50, 1200), "item": rng.integers(0, 40, 1200),
                  "timestamp": rng.integers(0, 12 * DAY, 1200)}).to_csv(data, index=False)
    out = tmp_path / "gap"
    monkeypatch.setattr(sys, "argv", [
        "sweval", "gap", "--data", str(data), "--window", "2D", "--start", str(9 * DAY),
        "--algorithms", "pop,item-knn", "--k", "5,10", "--u-min", "0", "--no-tracking",
        "--no-progress", "--output", str(out)])
    main()
    assert unwrapped(f"report: {out / 'report.html'}") in unwrapped(capsys.readouterr().err)
    page = (out / "report.html").read_text()
    assert "<title>Validation-to-deployment gap — log.csv</title>" in page
    gap = pd.read_csv(out / "gap.csv")
    row = gap[(gap["algorithm"] == "item-knn") & (gap["metric"] == "ndcg") & (gap["k"] == 10)
              & (gap["validation"] == "cut-off")].iloc[0]
    assert f"<td>{row['validation_value']:.4f}</td><td>{row['drop_pct']:+.1f}%</td>" in page
    assert {p.name for p in out.glob("report-*.png")} == {"report-gap-recall-at-10.png",
                                                         "report-gap-ndcg-at-10.png"}

    written = write_gap_report(out, metrics=["recall"], k=5, destination=tmp_path / "again")
    assert [p.name for p in written] == ["report.html", "report-gap-recall-at-5.png"]
    monkeypatch.setattr(sys, "argv", ["sweval", "report", str(out)])
    main()
    assert re.search(r"report:.*gap/report\.html", unwrapped(capsys.readouterr().err))
    with pytest.raises(SwevalError, match=r"k=7 not in .*gap\.csv \(it has 5, 10\)"):
        write_gap_report(out, k=7)
    (out / "gap.csv").unlink()
    with pytest.raises(SwevalError, match="no gap.csv: not a complete `sweval gap` output"):
        write_gap_report(Path(out))
