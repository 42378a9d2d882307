"""The report: tables against a recomputation from results.csv, figures, HTML, command line."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from sweval_testing import DAY, MANY_SERIES, assert_legend_inside, line_colours
from typer.testing import CliRunner

from sweval.data.errors import SwevalError
from sweval.evaluators.report.figures import (
    _over_time_panels,
    figure_over_time,
    figure_vs_k,
    series_colours,
)
from sweval.evaluators.report.page import (
    load,
    metric_table,
    protocol_groups,
    write_report,
)
from sweval.evaluators.run.results import results_frame

T0 = 1_600_000_000
ALGORITHMS = ["pop", "pop-n", "item-knn"]


def fake_results(
    *, protocol: str | None = None, algorithms: list[str] = ALGORITHMS, seed: int = 0,
    time_folds: bool = True,
) -> pd.DataFrame:
    """A long table like results.csv: 6 folds, fold 2 skipped everywhere, stratum A skipped on
    fold 4, stratum "NA" skipped on every fold, random values elsewhere."""
    rng = np.random.default_rng(seed)
    rows = []
    for fold in range(6):
        t_start = T0 + fold * DAY if time_folds else T0
        for algorithm in algorithms:
            for stratum, n_eligible in (("all", 120 + fold), ("A", 60 + 3 * fold), ("NA", 7)):
                skipped = fold == 2 or (stratum == "A" and fold == 4) or stratum == "NA"
                for metric, k in [(m, k) for m in ("recall", "ndcg") for k in (5, 10)] + [
                    ("r_precision", None)
                ]:
                    rows.append({
                        "fold": fold, "t_start": t_start, "t_end": t_start + DAY,
                        "algorithm": algorithm, "stratum": stratum, "metric": metric, "k": k,
                        "value": np.nan if skipped else float(rng.uniform(0.0, 0.3)),
                        "n_users": n_eligible, "n_eligible": n_eligible, "skipped": skipped,
                        "skip_reason": f"n_eligible={n_eligible} < u_min=50" if skipped else "",
                        "config_hash": "h",
                    })
    frame = results_frame(rows, algorithms)
    if protocol is not None:
        frame.insert(0, "protocol", protocol)
    return frame


def write_output(directory: Path, results: pd.DataFrame, name: str = "results.csv") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    results.to_csv(directory / name, index=False, float_format="%.10g")
    (directory / "config.json").write_text(json.dumps({
        "config": {"u_min": 50, "window": "1D", "folds": 6, "k": [5, 10]},
        "data": {"source": "fake"}, "resolved_params": {"pop-n": {"n_recent": 100}},
    }))
    return directory


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    directory = write_output(tmp_path_factory.mktemp("out"), fake_results())
    write_report(directory, metrics=["recall", "r_precision"])
    return directory


def expected_summary(path: Path) -> pd.DataFrame:
    """Mean, folds and Δ% recomputed from the CSV with plain pandas (not summarise)."""
    raw = pd.read_csv(path, keep_default_na=False, na_values={"value": [""], "k": [""]})
    if "protocol" not in raw:
        raw["protocol"] = ""
    raw["k"] = raw["k"].fillna(-1).astype(int)
    raw["stratum"] = raw["stratum"].astype(str)
    skipped = raw[raw["skipped"].astype(str) == "True"]
    keys = ["protocol", "stratum", "algorithm", "metric", "k"]
    out = raw.groupby(keys)["value"].mean().rename("mean").reset_index()
    n_skipped = skipped.groupby(keys)["fold"].nunique().rename("n_skipped")
    out = out.merge(n_skipped, on=keys, how="left").fillna({"n_skipped": 0})
    best = out.groupby(["protocol", "stratum", "metric", "k"])["mean"].transform("max")
    out["best"] = out["mean"].notna() & (out["mean"] == best) & (best > 0)
    out["delta"] = out["mean"] / best - 1
    # the bootstrap interval over folds, scipy's, with the defaults (the record has no --ci...)
    used = raw[(raw["skipped"].astype(str) != "True") & raw["value"].notna()]
    values = used.groupby(keys)["value"].apply(lambda v: v.to_numpy())
    out["ci_text"] = [_interval_text(values.get(tuple(key))) for key in out[keys].itertuples(
        index=False)]
    return out


def _interval_text(values: np.ndarray | None) -> str:
    from scipy import stats

    if values is None or len(values) < 2:
        return ""
    ci = stats.bootstrap((values,), np.mean, method="percentile",
                         rng=np.random.default_rng(0)).confidence_interval
    return f"{ci.low:.3f}–{ci.high:.3f}"


class ReportCells(HTMLParser):
    """Every value cell of the report's metric tables: its data-* keys, text, bold, Δ% text."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict] = []
        self.metric = self.stratum = None
        self._cell: dict | None = None
        self._delta_of: dict | None = None
        self.protocol_headers: list[str] = []
        self._header = False
        self._in_ci = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "span" and a.get("class") == "ci" and self._cell is not None:
            self._in_ci = True
            self._cell["ci_text"] = ""
        elif tag == "table" and a.get("class") == "metric":
            self.metric = a["data-metric"]
        elif tag == "tbody" and "data-stratum" in a:
            self.stratum = a["data-stratum"]
        elif tag == "td" and a.get("class") == "v" and "data-mean" in a:
            self._cell = {"metric": self.metric, "stratum": self.stratum, **a, "text": "",
                          "bold": False}
        elif tag == "td" and a.get("class") == "d" and self._delta_of is not None:
            self._delta_of["delta_text"] = ""
        elif tag == "strong" and self._cell is not None:
            self._cell["bold"] = True
        elif tag == "th" and a.get("class") == "protocol":
            self._header = True
            self.protocol_headers.append("")

    def handle_endtag(self, tag):
        if tag == "span":
            self._in_ci = False
        elif tag == "td" and self._cell is not None:
            self.cells.append(self._cell)
            self._delta_of, self._cell = self._cell, None
        elif tag == "td" and self._delta_of is not None and "delta_text" in self._delta_of:
            self._delta_of = None
        elif tag == "th":
            self._header = False

    def handle_data(self, data):
        if self._cell is not None and self._in_ci:
            self._cell["ci_text"] += data
        elif self._cell is not None:
            self._cell["text"] += data
        elif self._delta_of is not None and "delta_text" in self._delta_of:
            self._delta_of["delta_text"] += data
        elif self._header:
            self.protocol_headers[-1] += data


def parse_report(path: Path) -> ReportCells:
    parser = ReportCells()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def check_cells_against_csv(cells: list[dict], csv: Path) -> int:
    expected = expected_summary(csv).set_index(["protocol", "stratum", "algorithm", "metric", "k"])
    for cell in cells:
        key = (cell.get("data-protocol", ""), cell["stratum"], cell["data-algorithm"],
               cell["metric"], int(cell["data-k"]) if cell["data-k"] else -1)
        row = expected.loc[key]
        if np.isnan(row["mean"]):
            assert cell["text"] == "—" and cell["delta_text"] == "—", key
            continue
        assert float(cell["data-mean"]) == pytest.approx(row["mean"], rel=1e-9), key
        assert cell["text"] == f"{row['mean']:.4f}", key
        assert cell.get("ci_text", "") == row["ci_text"], key
        assert cell["bold"] == bool(row["best"]), key
        if row["best"]:
            assert cell["delta_text"] == "best"
        else:
            assert cell["delta_text"] == f"{100 * row['delta']:+.1f}%".replace("-", "−"), key
    return len(expected)


def test_html_tables_match_a_recomputation_from_results_csv(report_dir):
    report = parse_report(report_dir / "report.html")
    n_expected = check_cells_against_csv(report.cells, report_dir / "results.csv")
    # every (stratum, algorithm, metric, k) reported has its cell:
    # 3 strata x 3 algorithms x (recall@5, recall@10, R-precision)
    assert n_expected == 3 * 3 * 5
    assert len(report.cells) == 3 * 3 * 3
    assert {c["metric"] for c in report.cells} == {"recall", "r_precision"}
    assert {c["stratum"] for c in report.cells} == {"all", "A", "NA"}  # "NA" is not missing
    assert sum(c["bold"] for c in report.cells) == 2 * 3  # one best per (stratum, metric, k)
    assert report.protocol_headers == []  # a single run: no protocol header row


def test_metric_table_counts_folds_and_marks_the_best(report_dir):
    data = load(report_dir)
    table = metric_table(data.summary, "recall")
    assert table.strata == ["all", "A", "NA"]
    assert table.ks == [5, 10]
    assert table.columns == [("", a) for a in ALGORITHMS]
    assert table.folds_used("", "all", "pop") == (5, 1)
    assert table.folds_used("", "A", "pop") == (4, 2)
    assert table.folds_used("", "NA", "pop") == (0, 6)
    assert table.cells[("", "all", "pop", 5)].n_folds == 5
    expected = expected_summary(report_dir / "results.csv")
    for (protocol, stratum, algorithm, k), cell in table.cells.items():
        row = expected[(expected["stratum"] == stratum) & (expected["algorithm"] == algorithm)
                       & (expected["metric"] == "recall") & (expected["k"] == k)].iloc[0]
        assert cell.mean == pytest.approx(row["mean"], nan_ok=True)
        assert cell.best == bool(row["best"])
    assert metric_table(data.summary, "r_precision").ks == [None]


def test_files_are_self_contained_small_pngs(report_dir):
    page = (report_dir / "report.html").read_text(encoding="utf-8")
    pngs = sorted(report_dir.glob("report-*.png"))
    # recall: vs-k + over time; r_precision (no k): over time only
    assert [p.name for p in pngs] == sorted([
        "report-recall-vs-k.png", "report-recall-at-10-over-time.png",
        "report-r-precision-over-time.png",
    ])
    for png in pngs:
        content = png.read_bytes()
        assert content.startswith(b"\x89PNG") and len(content) < 300_000
        assert base64.b64encode(content).decode() in page  # the same figure, embedded
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_over_time_figure_has_a_panel_per_stratum_and_marks_skipped_folds(report_dir):
    data = load(report_dir)
    fig = figure_over_time(data, "recall", 10)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == [
        "all users: 5 folds used, 1 skipped",
        "stratum A: 4 folds used, 2 skipped",
        "stratum NA: 0 folds used, 6 skipped",
    ]
    first = fig.axes[0]
    lines = [line for line in first.get_lines() if line.get_label() in ALGORITHMS]
    assert len(lines) == 3 and all(len(line.get_xdata()) == 6 for line in lines)
    crosses = [line for line in first.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == 1 and len(crosses[0].get_xdata()) == 1  # fold 2


def test_every_series_has_its_own_colour_the_same_in_every_figure(tmp_path):
    data = load(write_output(tmp_path, fake_results(algorithms=MANY_SERIES)))
    vs_k = line_colours(figure_vs_k(data, "recall"), MANY_SERIES)
    over_time = line_colours(figure_over_time(data, "recall", 10), MANY_SERIES)
    assert set(vs_k) == set(MANY_SERIES) and len(set(vs_k.values())) == len(MANY_SERIES)
    assert over_time == vs_k
    # a built-in keeps its registry's tab10 colour whatever else the report has
    tab10 = matplotlib.colormaps["tab10"].colors
    assert vs_k["item-knn"] == to_rgba(tab10[2])
    assert series_colours(["item-knn"]) == {"item-knn": tab10[2]}
    assert series_colours(["my:A", "pop"]) == {"my:A": tab10[1], "pop": tab10[0]}


def test_colours_stay_distinct_past_the_qualitative_maps():
    labels = [f"item-knn(n_neighbors={n})" for n in range(75)]
    assert len(set(series_colours(labels).values())) == 75


LONG = ["pop", 'user-knn(n_neighbors=50,weighting="cosine")',
        'item-knn(n_neighbors=50,similarity="cosine",shrinkage=10)',
        "my_package.models.experimental:VeryLongModelName", "item-knn[tuned]"]


@pytest.mark.parametrize("labels", [LONG, MANY_SERIES], ids=["long-labels", "many-labels"])
def test_legends_fit_their_figures(tmp_path, labels):
    data = load(write_output(tmp_path, fake_results(algorithms=labels)))
    assert_legend_inside(figure_vs_k(data, "recall"))
    assert_legend_inside(figure_over_time(data, "recall", 10))


def test_compare_table_has_protocol_blocks(tmp_path):
    sw = fake_results(protocol="sw-eval", seed=1)
    loocv = fake_results(protocol="loocv", algorithms=["pop", "item-knn"], seed=2,
                         time_folds=False)
    out = write_output(tmp_path / "cmp", pd.concat([loocv, sw], ignore_index=True), "compare.csv")
    written = write_report(out)
    report = parse_report(out / "report.html")
    assert report.protocol_headers == ["loocv", "sw-eval"]
    check_cells_against_csv(report.cells, out / "compare.csv")
    assert len(report.cells) == 3 * (2 + 3) * 2  # strata x (loocv + sw-eval algorithms) x k
    data = load(out)
    table = metric_table(data.summary, "recall")
    # POP-N does not run under LOOCV: no column there (as in the paper's Table 2)
    assert [a for p, a in table.columns if p == "loocv"] == ["pop", "item-knn"]
    assert 'class="v na"' not in (out / "report.html").read_text()
    assert protocol_groups(table) == [["loocv", "sw-eval"]]  # side by side, as in Table 2
    assert protocol_groups(table, limit=4) == [["loocv"], ["sw-eval"]]
    assert protocol_groups(table, limit=5) == [["loocv", "sw-eval"]]
    # one best per (protocol, stratum with values, k)
    assert sum(c["bold"] for c in report.cells) == 2 * 2 * 2
    assert data.protocols == ["loocv", "sw-eval"]
    assert _over_time_panels(data) == [("sw-eval", s) for s in ("all", "A", "NA")]
    assert len(figure_vs_k(data, "recall").axes) == 2 * 3  # protocols x strata
    one_stratum = load(write_output(tmp_path / "one", pd.concat(
        [loocv[loocv["stratum"] == "all"], sw[sw["stratum"] == "all"]]), "compare.csv"))
    assert figure_vs_k(one_stratum, "recall").axes[1].get_subplotspec().colspan.start == 1
    assert [p.name for p in written] == [
        "report.html", "report-recall-vs-k.png", "report-recall-at-10-over-time.png",
    ]


def test_report_of_a_real_run_matches_its_summary_csv(tmp_path):
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.run.evaluate import evaluate_config

    config = EvalConfig.build(
        data="movielens-latest-small", window="7D", folds=4, u_min=3, algorithms=["pop", "pop-n"],
        params={"pop-n": {"n_recent": 500}}, output=str(tmp_path / "run"), progress=False,
    )
    evaluate_config(config)
    write_report(config.output, destination=tmp_path / "rep")
    summary = pd.read_csv(Path(config.output) / "summary.csv")
    cells = parse_report(tmp_path / "rep" / "report.html").cells
    assert len(cells) == 2 * 4
    for cell in cells:
        row = summary[(summary["algorithm"] == cell["data-algorithm"])
                      & (summary["metric"] == "recall")
                      & (summary["k"] == int(cell["data-k"]))].iloc[0]
        assert float(cell["data-mean"]) == pytest.approx(row["mean"], rel=1e-8)
        assert cell["text"] == f"{row['mean']:.4f}"


def test_errors_name_the_problem(tmp_path, report_dir):
    with pytest.raises(SwevalError, match="no such directory"):
        write_report(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SwevalError, match="no results.csv"):
        write_report(tmp_path / "empty")
    with pytest.raises(SwevalError, match="metric.*hit_rate.*not in the results"):
        write_report(report_dir, metrics=["all", "hit_rate"], destination=tmp_path / "x")
    with pytest.raises(SwevalError, match="--k 7"):
        write_report(report_dir, k=7, destination=tmp_path / "x")


def test_cli_report_of_a_directory(tmp_path, report_dir):
    from sweval.flows.cli.app import app

    out = tmp_path / "copy"
    shutil.copytree(report_dir, out)
    for old in out.glob("report*"):
        old.unlink()
    result = CliRunner().invoke(app, ["report", str(out), "--metrics", "ndcg", "--k", "5"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.glob("report*")) == [
        "report-ndcg-at-5-over-time.png", "report-ndcg-vs-k.png", "report.html",
    ]


class FakeRun:
    def __init__(self, tags):
        self.data = type("D", (), {"tags": tags})()


class FakeClient:
    """The three MlflowClient calls the report uses: a child run without artifacts whose parent
    holds an output directory's files."""

    def __init__(self, parent_dir: Path):
        self.parent_dir = parent_dir
        self.logged: list[tuple[str, str, str]] = []

    def get_run(self, run_id):
        return FakeRun({"mlflow.parentRunId": "p" * 32} if run_id == "c" * 32 else {})

    def download_artifacts(self, run_id, path, dst_path):
        if run_id == "p" * 32:
            for name in ("results.csv", "config.json"):
                shutil.copy(self.parent_dir / name, Path(dst_path) / name)
        return dst_path

    def log_artifact(self, run_id, local_path, artifact_path=None):
        self.logged.append((run_id, Path(local_path).name, artifact_path))


def test_report_of_an_mlflow_child_run_uses_its_parent(tmp_path, report_dir, monkeypatch):
    from sweval.flows.cli import report as report_cli

    client = FakeClient(report_dir)
    monkeypatch.setattr(report_cli, "_client", lambda uri: client)
    written = report_cli.report_from_run("c" * 32, destination=tmp_path / "rep")
    assert [p.name for p in written] == [
        "report.html", "report-recall-vs-k.png", "report-recall-at-10-over-time.png",
    ]
    assert f"MLflow run {'p' * 32}" in written[0].read_text()
    assert client.logged == [("p" * 32, p.name, "report") for p in written]
    check_cells_against_csv(parse_report(written[0]).cells, report_dir / "results.csv")


class PageText(HTMLParser):
    """The tags, attribute values and text of a page, entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attributes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attributes += [v for _, v in attrs if v is not None]

    def handle_data(self, data):
        self.text.append(data)


def failed_section(page: str) -> str | None:
    """The report's notice of failed units (None when it has none)."""
    start = page.find('<section class="failed">')
    return None if start < 0 else page[start:page.index("</section>", start)]


def test_the_report_lists_the_failed_units_and_where_their_errors_are(tmp_path, report_dir):
    out = write_output(tmp_path / "out", fake_results())
    record = json.loads((out / "config.json").read_text())
    record["failed_units"] = [
        {"fold": fold, "label": "item-knn", "key": f"key{fold}", "stratum": "all",
         "error": "RuntimeError: <boom>", "traceback": "Traceback (most recent call last): ..."}
        for fold in (1, 3)
    ]
    (out / "config.json").write_text(json.dumps(record))
    write_report(out)
    notice = failed_section((out / "report.html").read_text(encoding="utf-8"))
    assert notice is not None and "2 failed units" in notice
    rows = [[html.unescape(cell) for cell in re.findall(r"<td>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", notice)]
    assert rows[1:] == [["1", "all", "item-knn", "RuntimeError: <boom>"],  # [0]: the header
                    ["3", "all", "item-knn", "RuntimeError: <boom>"]]
    assert "config.json" in notice and "failed_units" in notice and "log" in notice
    # a run where nothing failed has no notice
    assert failed_section((report_dir / "report.html").read_text(encoding="utf-8")) is None


def test_names_and_sources_reach_the_page_as_text(tmp_path):
    """Autoescaping: an algorithm, stratum, data source, skip reason, title or origin that looks
    like markup is shown as text, never parsed as tags."""
    evil = '<script>alert("x")</script>'
    algorithm = f"{evil}&'pop"
    results = fake_results(algorithms=["pop", algorithm])
    results["stratum"] = results["stratum"].replace("A", "<b>A</b>")
    directory = write_output(tmp_path / "out", results)
    (directory / "config.json").write_text(json.dumps({
        "config": {"u_min": 50, "window": "1D", "folds": 6, "k": [5, 10]},
        "data": {"source": f"{evil} data"}, "resolved_params": {algorithm: {"n": evil}},
    }))
    pd.DataFrame({"fold": [0, 1], "t_start": [T0, T0 + DAY], "t_end": [T0 + DAY, T0 + 2 * DAY],
                  "skipped": [False, True], "skip_reason": ["", evil]}).to_csv(
        directory / "folds.csv", index=False)
    write_report(directory, metrics=["recall"])
    write_report(directory, metrics=["recall"], destination=tmp_path / "titled",
                 title=f"{evil} title", origin=f"{evil} origin")
    texts = []
    for page in (directory / "report.html", tmp_path / "titled" / "report.html"):
        html = page.read_text(encoding="utf-8")
        assert "<script" not in html and "<b>" not in html
        parsed = PageText()
        parsed.feed(html)
        assert not parsed.tags & {"script", "b"}
        assert algorithm in parsed.text  # the table header, and the run facts' term
        assert "<b>A</b>" in parsed.text  # a stratum
        assert algorithm in parsed.attributes  # data-algorithm
        texts.append("".join(parsed.text))
    for shown in (f"SW-EVAL report — {evil} data", f"{evil} (1 fold)", f"n={evil}"):
        assert shown in texts[0], shown
    for shown in (f"{evil} title", f"{evil} origin"):
        assert shown in texts[1], shown


class SignificanceCells(HTMLParser):
    """The who-beats-whom matrices of Recall: per (stratum, row, column) the cell's class, text
    and title; and each matrix's caption."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[dict]]] = {}
        self.captions: dict[str, str] = {}
        self._stratum: str | None = None
        self._item: dict | None = None
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("class") == "sig" and a["data-metric"] == "recall":
            self._stratum = a["data-stratum"]
            self.tables[self._stratum], self.captions[self._stratum] = [], ""
        elif self._stratum is None:
            return
        elif tag == "caption":
            self._in_caption = True
        elif tag == "tr":
            self.tables[self._stratum].append([])
        elif tag in ("th", "td"):
            self._item = {"class": a.get("class"), "title": a.get("title", ""), "text": ""}
            self.tables[self._stratum][-1].append(self._item)

    def handle_endtag(self, tag):
        if tag == "table":
            self._stratum = None
        elif tag == "caption":
            self._in_caption = False
        elif tag in ("th", "td"):
            self._item = None

    def handle_data(self, data):
        if self._item is not None:
            self._item["text"] += data
        elif self._in_caption and self._stratum is not None:
            self.captions[self._stratum] += data

    @property
    def cells(self) -> dict[tuple[str, str, str], dict]:
        out = {}
        for stratum, (header, *rows) in self.tables.items():
            columns = [item["text"] for item in header[1:]]
            for name, *cells in rows:
                for column, cell in zip(columns, cells, strict=True):
                    out[(stratum, name["text"], column)] = cell
        return out


def test_who_beats_whom_matrix_matches_scipy_on_results_csv(report_dir):
    from scipy import stats

    html = (report_dir / "report.html").read_text(encoding="utf-8")
    parser = SignificanceCells()
    parser.feed(html)
    cells = parser.cells
    raw = pd.read_csv(report_dir / "results.csv", keep_default_na=False,
                      na_values={"value": [""], "k": [""]})
    used = raw[(raw["metric"] == "recall") & (raw["k"] == 10) & raw["value"].notna()]
    wide = used[used["stratum"] == "all"].pivot(index="fold", columns="algorithm", values="value")
    # 5 folds in stratum all: tests run; the p-values of the 3 pairs, Holm by hand
    pairs = [("pop", "pop-n"), ("pop", "item-knn"), ("pop-n", "item-knn")]
    p = np.array([stats.wilcoxon(wide[a] - wide[b]).pvalue for a, b in pairs])
    floor = np.array([stats.wilcoxon(np.abs(wide[a] - wide[b])).pvalue for a, b in pairs])
    order = np.argsort(p)
    holm = np.empty(3)
    holm[order] = np.minimum(1, np.maximum.accumulate(p[order] * [3, 2, 1]))
    for (a, b), p_holm, lowest in zip(pairs, holm, floor, strict=True):
        for row, column, sign in ((a, b, 1), (b, a, -1)):
            cell = cells[("all", row, column)]
            diff = sign * (wide[a] - wide[b]).mean()
            assert cell["text"].startswith(f"{diff:+.3f}"), (row, column, cell)
            assert f"Holm {p_holm:.3g}" in cell["title"]
            # 5 folds: Wilcoxon cannot go below 2/32, 3 × 0.0625 after Holm: cannot tell
            expected = ("win" if diff > 0 else "loss") if p_holm < 0.05 else (
                "cannot" if 3 * lowest >= 0.05 else "ns")
            assert cell["class"] == expected
            assert f"smallest reachable {min(1, 3 * lowest):.3g}" in cell["title"]
    # stratum A has 4 folds: the matrix says no test has power, its cells carry no p-value
    assert "no test has power" in parser.captions["A"]
    assert all("Holm" not in c["title"] for (s, _, _), c in cells.items() if s == "A")


def test_a_lead_that_rounds_to_zero_prints_plus_zero_both_ways():
    """The who-beats-whom cell of a lead of -0.0002 printed -0.000, its mirror +0.000."""
    from sweval.evaluators.report.significance import _matrix_cell

    table = pd.DataFrame([{"algorithm_a": "a", "algorithm_b": "b", "mean_diff": -0.0002,
                           "ci_low": -0.001, "ci_high": 0.0, "n_folds": 6, "p_value": 0.8,
                           "p_holm": 0.8, "note": ""}])
    cells = [_matrix_cell(table, "a", "b"), _matrix_cell(table, "b", "a")]
    assert [cell.text for cell in cells] == ["+0.000", "+0.000"]
    assert "interval +0 to +0.001" in cells[1].title  # was "-0 to +0.001"


def test_given_intervals_are_the_ones_shown(report_dir, tmp_path):
    """``write_report(intervals=...)`` shows the run's intervals instead of computing them."""
    from sweval.evaluators.report.data import load

    summary = load(report_dir).summary.drop(columns="protocol")
    given = summary.assign(ci_low=0.5, ci_high=0.625)
    write_report(report_dir, destination=tmp_path, intervals=given)
    cells = parse_report(tmp_path / "report.html").cells
    with_values = [cell for cell in cells if cell["text"] != "—"]
    assert with_values
    assert {cell.get("ci_text", "") for cell in with_values} == {"0.500–0.625"}


def test_a_leakage_output_is_refused_with_what_it_has_instead(tmp_path):
    """`sweval leakage` writes a results.csv too, but its overlap.csv and periods are not a
    run's: the report says where its figure and tables are instead of failing half-way."""
    out = write_output(tmp_path / "leak", fake_results(protocol="leak-severity"))
    pd.DataFrame({"k": [10], "jaccard_vs_j0": [1.0]}).to_csv(out / "overlap.csv", index=False)
    (out / "leakage.json").write_text("{}")
    with pytest.raises(SwevalError, match="a `sweval leakage` output.*severity.png"):
        write_report(out)


def test_a_report_that_cannot_be_written_leaves_no_partial_page(tmp_path, monkeypatch):
    """QA, disk full while the report was written: a 98 KB half of report.html stayed, without
    its figures, and the summary pointed at it. The report's files are staged whole before any
    takes its place, so a full disk leaves none of them (and no temporary file), and a report
    that failed removes the earlier one (it would not match)."""
    import os
    import shutil

    from sweval.evaluators.run import output_dir
    from sweval.evaluators.run.evaluate import write_report_quietly

    directory = write_output(tmp_path / "out", fake_results())
    (directory / "report.html").write_text("an earlier run's report")
    real = os.fsync
    calls = []

    def full_disk(handle):
        calls.append(handle)
        if len(calls) == 2:  # the second file: the disk fills up in the middle of it
            raise OSError(28, "No space left on device")
        return real(handle)

    monkeypatch.setattr(output_dir.os, "fsync", full_disk)
    assert write_report_quietly(directory) == []
    assert not (directory / "report.html").exists()
    assert not [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]
    assert not [p for p in directory.iterdir() if p.suffix == ".png"]
    monkeypatch.setattr(output_dir.os, "fsync", real)
    assert write_report_quietly(directory)[0] == directory / "report.html"
    shutil.rmtree(directory)


@pytest.mark.slow
def test_a_dozen_configurations_get_small_multiples_and_headers_that_break(tmp_path):
    """Issue 46: with 11 configurations the per-fold chart had 11 overlapping lines and the
    tables' headers ran wide. Past MAX_LINES algorithms the chart is one small panel per
    algorithm (its line in colour, the others grey); a label breaks before its parameters and
    after commas (<wbr>), never mid-word."""
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.report.data import load
    from sweval.evaluators.report.figures import figure_over_time
    from sweval.evaluators.report.html import breakable
    from sweval.evaluators.report.multiples import MAX_LINES
    from sweval.evaluators.run.evaluate import evaluate_config

    algorithms = ["pop", "decay-pop", *(f"pop-n(n_recent={n})" for n in (10, 100, 300, 3000)),
                  "my=decay-pop(decay=0.5,horizon=3)", "pop-n"]
    assert len(algorithms) > MAX_LINES
    evaluate_config(EvalConfig.build(
        data="movielens-latest-small", window="7D", folds=3, u_min=3, k=[10],
        algorithms=algorithms, output=str(tmp_path / "out"), progress=False, tracking=False))
    data = load(tmp_path / "out")
    figure = figure_over_time(data, "recall", 10)
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [
        "pop", "decay-pop", *(f"pop-n(n_recent={n})" for n in (10, 100, 300, 3000)), "my",
        "pop-n"]
    for ax in panels:  # its own line in colour, the 7 others in grey behind it
        assert len([line for line in ax.get_lines() if line.get_color() == "0.82"]) == 7
    assert str(breakable('item-knn(n_neighbors=50,weighting="cosine")')) == \
        'item-knn<wbr>(n_neighbors=50,<wbr>weighting=&#34;cosine&#34;)'
    assert str(breakable("<b>pop</b>")) == "&lt;b&gt;pop&lt;/b&gt;"
    page = (tmp_path / "out" / "report.html").read_text()
    assert '<th class="alg">pop-n<wbr>(n_recent=3000)</th>' in page
