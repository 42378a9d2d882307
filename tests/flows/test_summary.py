"""The summary table printed at the end of a run."""

from __future__ import annotations

import pandas as pd
import pytest
from rich.console import Console

from sweval.evaluators.stats.significance import NO_POWER
from sweval.flows.cli.summary import summary_table


def render(summary: pd.DataFrame) -> str:
    console = Console(width=120, record=True)
    console.print(summary_table(summary, metric="recall", stratum="all", title="t"))
    return console.export_text()


def test_best_is_marked_and_others_show_their_gap():
    summary = pd.DataFrame({
        "algorithm": ["pop", "als"], "stratum": "all", "metric": "recall", "k": 10,
        "mean": [0.02, 0.04], "delta": [-0.5, 0.0], "n_folds": 6, "n_skipped": 0,
    })
    text = render(summary)
    assert "0.0200 -50%" in text and "0.0400" in text and "0.0400 +" not in text


def test_the_folds_column_counts_the_failed_units():
    summary = pd.DataFrame({
        "algorithm": ["pop", "my_models:Boom"], "stratum": "all", "metric": "recall", "k": 10,
        "mean": [0.02, float("nan")], "delta": [0.0, float("nan")], "n_folds": [6, 0],
        "n_skipped": 1,
    })
    console = Console(width=120, record=True, emoji=False)
    console.print(summary_table(summary, metric="recall", stratum="all", title="t",
                                failed={"my_models:Boom": 5}))
    rows = {line.split("│")[1].strip(): line for line in console.export_text().splitlines()
            if line.startswith("│")}
    assert "0/1 5 failed" in rows["my_models:Boom"] and "failed" not in rows["pop"]


def test_a_k_where_every_algorithm_scored_zero_shows_no_percentage():
    summary = pd.DataFrame({
        "algorithm": "als", "stratum": "all", "metric": "recall", "k": [5, 10],
        "mean": [0.0, 0.0024], "delta": [float("nan"), 0.0], "n_folds": 6, "n_skipped": 0,
    })
    text = render(summary)
    assert "nan" not in text and "0.0000" in text and "0.0024" in text


def long_results(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = [{"fold": f, "algorithm": a, "stratum": "all", "metric": "recall", "k": 10,
             "value": v, "skipped": False} for a, vs in values.items() for f, v in enumerate(vs)]
    frame = pd.DataFrame(rows)
    frame["k"] = frame["k"].astype("Int64")
    return frame


def summary_of(results: pd.DataFrame):
    from sweval.evaluators.run.results import summarise
    from sweval.evaluators.stats.significance import Bootstrap, compare_algorithms, with_intervals

    settings = Bootstrap(n_resamples=999)
    return (with_intervals(summarise(results), results, settings),
            compare_algorithms(results, settings))


def render_with_lead(results: pd.DataFrame) -> str:
    summary, significance = summary_of(results)
    console = Console(width=120, record=True)
    console.print(summary_table(summary, metric="recall", stratum="all", title="t",
                                significance=significance))
    return console.export_text()


def test_each_mean_shows_its_interval_and_the_best_lead_its_significance():
    # b beats a on all 8 folds by distinct margins: Wilcoxon exact p = 2/256, one pair: p_holm = p
    a = [0.10, 0.12, 0.11, 0.13, 0.10, 0.12, 0.14, 0.11]
    margins = [0.101, 0.112, 0.105, 0.125, 0.117, 0.083, 0.121, 0.133]
    results = long_results({"a": a, "b": [x + m for x, m in zip(a, margins, strict=True)]})
    summary, significance = summary_of(results)
    text = render_with_lead(results)
    for row in summary.itertuples():
        assert f"{row.ci_low:.3f}–{row.ci_high:.3f}" in text
    assert "best's lead" in text and "p=0.0078 ✓" in text
    # a and b alike: no significant lead
    results = long_results({"a": [0.10, 0.12, 0.11, 0.13, 0.10, 0.12, 0.14, 0.11],
                            "b": [0.11, 0.11, 0.12, 0.12, 0.11, 0.11, 0.13, 0.12]})
    assert "n.s." in render_with_lead(results)


def test_fewer_than_five_folds_say_no_power():
    results = long_results({"a": [0.1, 0.2, 0.1, 0.2], "b": [0.3, 0.4, 0.3, 0.4]})
    text = render_with_lead(results)
    assert "no power" in text and "p=" not in text


def test_no_power_advice_says_why_the_pairs_are_short():
    """QA: a run of 8 folds whose runner-up failed on 4 said "Evaluate more folds (--folds)"."""
    from sweval.flows.cli.significance import no_power_advice

    eight = [0.10, 0.12, 0.11, 0.13, 0.10, 0.12, 0.14, 0.11]
    results = long_results({"a": eight, "b": [x + 0.05 for x in eight]})
    results = results[~((results["algorithm"] == "b") & (results["fold"] >= 4))]
    summary, significance = summary_of(results)
    powerless = significance[significance["note"] == NO_POWER]
    assert set(powerless[["algorithm_a", "algorithm_b"]].to_numpy().ravel()) == {"a", "b"}
    folds = pd.DataFrame({"fold": range(8), "skipped": False})
    said = no_power_advice(powerless, summary, folds)
    assert "b on 4 of the 8 folds the run scored (its other units failed" in said
    assert "--folds" not in said
    folds["skipped"] = [False] * 4 + [True] * 4  # the run itself scored 4 folds
    assert "Evaluate more folds (--folds)" in no_power_advice(powerless, summary, folds)


def test_overlap_table_is_the_symmetric_matrix_with_stability_on_the_diagonal():
    from sweval.flows.cli.summary import MAX_OVERLAP_ALGORITHMS, overlap_table, shown_metric

    overlap = pd.DataFrame([
        ("algorithms", 0, 0, "pop", "als", 10, 0.25, 5),
        ("algorithms", 1, 1, "pop", "als", 10, 0.75, 5),
        ("folds", 0, 1, "pop", "pop", 10, 0.9, 4),
        ("algorithms", 0, 0, "pop", "als", 5, 0.1, 5),
    ], columns=["kind", "fold_a", "fold_b", "algorithm_a", "algorithm_b", "k", "jaccard",
                "n_users"])
    console = Console(width=120, record=True)
    console.print(overlap_table(overlap, 10))
    lines = console.export_text().splitlines()
    assert lines[0].startswith("Top-10 overlap — mean Jaccard over folds; diagonal:")  # one
    assert lines[0].rstrip().endswith("consecutive folds (overlap.csv)")  # line, not the table's
    pop = next(line for line in lines if line.startswith("│ pop"))
    als = next(line for line in lines if line.startswith("│ als"))
    assert pop.split("│")[2:4] == [" 0.90 ", " 0.50 "]  # stability, mean of 0.25 and 0.75
    assert als.split("│")[2:4] == [" 0.50 ", "      "]  # als: one fold, no stability
    many = pd.concat([overlap.assign(algorithm_b=f"v{i}") for i in range(MAX_OVERLAP_ALGORITHMS)])
    assert overlap_table(many, 10) is None  # too many for the terminal: overlap.csv has them
    assert shown_metric(pd.DataFrame({"metric": ["r_precision", "mrr"], "k": [None, 5]})) == "mrr"


def test_a_tuned_series_that_no_fold_scores_gets_a_line_saying_why():
    """With --tune-windows at least --folds every fold of ALG[tuned] is skipped: its column is
    all dashes and it has no optimism row, so the summary says why."""
    from sweval.flows.cli.summary import unscored_tuned_lines

    reason = "no validation window before this fold (--tune-windows 10, --tune-mode rolling)"
    results = pd.DataFrame({
        "fold": [0, 1, 0, 1, 0, 1],
        "algorithm": ["item-knn[tuned]"] * 2 + ["pop-n[tuned]"] * 2 + ["pop"] * 2,
        "skipped": [True, True, True, False, False, False],
        "skip_reason": [reason, reason, reason, "", "", ""],
    })
    assert unscored_tuned_lines(results) == [f"item-knn[tuned]: no fold scored: {reason}"]


def test_a_series_with_fewer_folds_is_compared_on_its_own_folds_and_never_best_for_it():
    """A and B are scored on folds 0-3, T (a tuned series, a failed unit) only on 2-3, where
    everything scores higher. Means: A 0.25, B 0.2, T 0.3: by the means T would be best. The best
    is A, the highest mean on all 4 folds; T is compared with A on folds 2-3 (A: 0.35 there):
    0.3 / 0.35 − 1."""
    from sweval.evaluators.report.tables import metric_table
    from sweval.evaluators.stats.significance import best_lead, ranked_algorithms
    from sweval.flows.cli.summary import common_folds_lines

    results = long_results({"A": [0.1, 0.2, 0.3, 0.4], "B": [0.2] * 4})
    results = pd.concat([results, long_results({"T": [0.5, 0.1]}).assign(fold=[2, 3])])
    summary, significance = summary_of(results)
    by = summary.set_index("algorithm")
    assert list(by["mean"]) == pytest.approx([0.25, 0.2, 0.3])
    assert by.loc["A", "delta"] == 0.0 and by.loc["B", "delta"] == pytest.approx(0.2 / 0.25 - 1)
    assert by.loc["T", "delta"] == pytest.approx(0.3 / 0.35 - 1)
    assert list(by["delta_folds"]) == [4, 4, 2]
    assert ranked_algorithms(summary) == ["A", "T", "B"]
    lead = best_lead(summary, significance, stratum="all", metric="recall", k=10)
    assert (lead.best, lead.runner_up) == ("A", "T")
    table = metric_table(summary.assign(protocol="sw-eval"), "recall")
    assert [a for (_, _, a, _), cell in table.cells.items() if cell.best] == ["A"]
    assert common_folds_lines(summary, "recall") == [
        "T (2 of 4 folds): Δ% against the best (A) on the folds both have; the best is the "
        "highest mean among the algorithms scored on all 4 folds"]
    text = render(summary)
    assert "0.3000 -14%" in text and "0.2000 -20%" in text


def test_a_series_ahead_on_fewer_folds_is_the_runner_up_and_the_best_stays_the_summarys():
    """T, scored on folds 2-3 only, beats A there (0.6 against A's 0.35): Δ% > 0 ranks it first,
    but the best is the summary's, A (the highest mean on all 4 folds, green in the tables);
    the lead row names T as the runner-up A is behind, not a significant lead of T's."""
    from sweval.evaluators.report.tables import metric_table
    from sweval.evaluators.stats.significance import best_lead, ranked_algorithms
    from sweval.flows.cli.significance import lead_cell

    results = long_results({"A": [0.1, 0.2, 0.3, 0.4], "B": [0.2] * 4})
    results = pd.concat([results, long_results({"T[tuned]": [0.5, 0.7]}).assign(fold=[2, 3])])
    summary, significance = summary_of(results)
    by = summary.set_index("algorithm")
    assert by.loc["A", "delta"] == 0.0 and by.loc["T[tuned]", "delta"] == pytest.approx(0.6 / 0.35 - 1)
    assert ranked_algorithms(summary)[0] == "T[tuned]"
    lead = best_lead(summary, significance, stratum="all", metric="recall", k=10)
    assert (lead.best, lead.runner_up) == ("A", "T[tuned]")
    assert lead.mean_diff == pytest.approx(0.35 - 0.6) and lead.n_folds == 2
    assert lead_cell(summary, significance, stratum="all", metric="recall", k=10) == (
        "[yellow]behind T\\[tuned][/]")
    table = metric_table(summary.assign(protocol="sw-eval"), "recall")
    assert [a for (_, _, a, _), cell in table.cells.items() if cell.best] == ["A"]


def test_a_series_equal_to_the_best_on_its_fewer_folds_is_not_marked_best():
    """F is A where it was scored (its units failed on folds 2-3): Δ% = 0 on the folds both
    have, but the best is A, scored on all 4; F was shown bold green / "best" beside it."""
    from rich.console import Console

    from sweval.evaluators.report.tables import metric_table
    from sweval.evaluators.run.results import is_best
    from sweval.evaluators.stats.significance import best_lead

    results = pd.concat([long_results({"F": [0.1, 0.2]}),
                         long_results({"A": [0.1, 0.2, 0.3, 0.4], "B": [0.2] * 4})])
    summary, significance = summary_of(results)
    by = summary.set_index("algorithm")
    assert by.loc["F", "delta"] == 0.0 and by.loc["F", "delta_folds"] == 2
    assert dict(zip(summary["algorithm"], is_best(summary), strict=True)) == {
        "F": False, "A": True, "B": False}
    lead = best_lead(summary, significance, stratum="all", metric="recall", k=10)
    assert lead.best == "A"
    table = metric_table(summary.assign(protocol="sw-eval"), "recall")
    assert [a for (_, _, a, _), cell in table.cells.items() if cell.best] == ["A"]
    console = Console(width=120, record=True, color_system="truecolor")
    console.print(summary_table(summary, metric="recall", stratum="all", title="t"))
    bold_green = [line for line in console.export_text(styles=True).splitlines()
                  if "1;32m" in line]
    assert len(bold_green) == 1 and "0.2500" in bold_green[0]  # A's mean


def test_the_same_folds_give_delta_as_mean_over_best_mean():
    results = long_results({"a": [0.1, 0.3], "b": [0.2, 0.2], "c": [0.0, 0.0]})
    summary = summary_of(results)[0].set_index("algorithm")
    assert summary.loc["a", "delta"] == 0.0 and list(summary["delta_folds"]) == [2, 2, 2]
    assert summary.loc["b", "delta"] == summary.loc["b", "mean"] / summary.loc["a", "mean"] - 1
    assert summary.loc["c", "delta"] == -1.0


def test_a_stratum_that_no_fold_scores_says_why(tmp_path):
    """Policy B's only transaction is before the folds: no fold has B data, also with u_min 0;
    the line gives the folds' reason, not "fewer than u_min=0"."""
    from sweval.data.log import InteractionLog
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.run.evaluate import evaluate_config
    from sweval.flows.cli.summary import print_summary

    day = 86_400
    rows = [(u, f"i{(d + n) % 5}", d * day + n, "A") for n, u in enumerate("abc") for d in range(5)]
    rows.append(("z", "i0", 10, "B"))
    log = InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp",
                                                                "policy"]), policy_col="policy")
    config = EvalConfig.build(window="1D", folds=3, start=str(2 * day), u_min=0, k=[1],
                              algorithms=["pop"], stratify_by="policy", progress=False,
                              tracking=False, output=str(tmp_path / "out"))
    outputs = evaluate_config(config, log=log)
    console = Console(width=200, record=True)
    print_summary(outputs, config, console)
    text = console.export_text()
    reasons = outputs.results.loc[outputs.results["stratum"] == "B", "skip_reason"].unique()
    assert len(reasons) == 1 and "u_min" not in reasons[0]
    assert f"stratum B: every fold skipped ({reasons[0]} (3 folds))" in text
    assert "folds: 3 used, 0 skipped" in text  # all users'
    assert "folds per stratum (each skips its own by u_min): A 3 used, 0 skipped; B 0 used, " \
           "3 skipped" in text


def test_the_folds_a_stratum_skips_are_counted_apart_from_all_users():
    """The folds line counts all users' folds; a stratum that skips some adds a line of its
    own (with 12 used for all users and 11 for a policy, the console said 12 used only)."""
    from sweval.flows.cli.summary import stratum_fold_counts

    def rows(stratum: str, skipped: list[bool]) -> list[dict]:
        return [{"fold": f, "stratum": stratum, "algorithm": a, "skipped": s}
                for f, s in enumerate(skipped) for a in ("x", "y")]

    results = pd.DataFrame(rows("all", [False] * 4) + rows("A", [False, True, False, False])
                           + rows("B", [False] * 4))
    results.loc[(results["stratum"] == "B") & (results["fold"] == 2)
                & (results["algorithm"] == "x"), "skipped"] = True  # one unit: not the fold
    assert stratum_fold_counts(results) == {"A": (3, 1), "B": (4, 0)}


def test_std_is_none_for_one_fold_and_exactly_zero_for_equal_values():
    """ddof = 1 over one fold is undefined (0 would claim no spread); three equal folds give 0,
    not the float noise of their mean (0.1 + 0.1 + 0.1 = 0.30000000000000004)."""
    results = long_results({"one": [0.25], "equal": [0.1, 0.1, 0.1], "two": [0.1, 0.3]})
    results = results[results["fold"].lt(3)]
    summary = summary_of(results)[0].set_index("algorithm")["std"]
    assert pd.isna(summary["one"]) and summary["equal"] == 0.0
    assert summary["two"] == pytest.approx(0.1414213562373095)


LONG_LABEL = 'user-knn(n_neighbors=50,weighting="cosine")'


def first_column(text: str) -> str:
    """The first column of a rendered table, its lines joined (a folded label made whole)."""
    return "".join(line.split("│")[1].strip() for line in text.splitlines()
                   if line.startswith("│"))


def test_in_80_columns_a_long_label_folds_and_the_numbers_stay_whole():
    """Every column was no_wrap: the label took the width and the means became "0.01…"."""
    summary = pd.DataFrame({
        "algorithm": ["pop"] * 4 + [LONG_LABEL] * 4, "stratum": "all", "metric": "recall",
        "k": [5, 10, 15, 20] * 2, "mean": [0.0106, 0.0106, 0.0106, 0.0223, 0.0798, 0.0967,
                                           0.1331, 0.1351],
        "delta": [-0.868, -0.891, -0.921, -0.83, 0.0, 0.0, 0.0, 0.0], "n_folds": 6,
        "n_skipped": 0, "ci_low": 0.011, "ci_high": 0.143,
    })
    console = Console(width=80, record=True)
    console.print(summary_table(summary, metric="recall", stratum="all", title="t"))
    text = console.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for cell in ("Recall@20", "0.0106 -87%", "0.0223 -83%", "0.1351", "0.011–0.143", "6/0"):
        assert cell in text
    assert LONG_LABEL in first_column(text)


def test_in_80_columns_the_lead_note_wraps_within_the_numbers_width():
    """The runner-up the best is behind has a long label: its note wraps in the column of
    numbers instead of widening it (which squeezed the numbers into ellipses)."""
    results = long_results({"A": [0.1, 0.2, 0.3, 0.4], "B": [0.2] * 4})
    runner_up = f"{LONG_LABEL}[tuned]"
    results = pd.concat([results, long_results({runner_up: [0.5, 0.7]}).assign(fold=[2, 3])])
    summary, significance = summary_of(results)
    console = Console(width=80, record=True)
    console.print(summary_table(summary, metric="recall", stratum="all", title="t",
                                significance=significance))
    text = console.export_text()
    assert "…" not in text and "0.6000 +71%" in text and "0.2000 -20%" in text
    lead = "".join(line.split("│")[2].strip() for line in text.splitlines()
                   if line.startswith("│") and "0." not in line.split("│")[2])
    assert f"behind{runner_up}" in lead


def test_a_value_just_below_the_best_never_reads_plus_zero():
    """QA on real data: 0.0399 against a best of 0.04 printed "+0%", as if level or ahead."""
    summary = pd.DataFrame({
        "algorithm": ["pop", "als"], "stratum": "all", "metric": "recall", "k": 10,
        "mean": [0.0399, 0.04], "delta": [-0.0025, 0.0], "n_folds": 6, "n_skipped": 0,
    })
    text = render(summary)
    assert "0.0399 -0.2%" in text and "+0%" not in text and "-0%" not in text


@pytest.mark.parametrize(("delta", "text"), [
    (-0.0025, "-0.2%"), (-0.00001, "-<0.1%"), (0.00001, "+<0.1%"), (0.0, "0%"),
    (-0.012, "-1%"), (-0.4, "-40%"), (0.0049, "+0.5%"), (-0.0096, "-1%"),
])
def test_delta_text(delta, text):
    from sweval.flows.cli.summary import delta_text

    assert delta_text(delta) == text


def test_one_scored_fold_says_n_a_and_counts_it_in_the_singular(tmp_path):
    """One fold gives no interval and no test: the summary's title and note said a 95% interval
    and "the intervals are rough" over none, the report "1 folds" and "interval +nan to +nan"."""
    import html

    from sweval.data.log import InteractionLog
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.report.page import write_report
    from sweval.evaluators.run.evaluate import evaluate_config
    from sweval.flows.cli.summary import print_summary

    day = 86_400
    rows = [(u, f"i{(d + n) % 5}", d * day + n) for n, u in enumerate("abcd") for d in range(5)]
    log = InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]))
    config = EvalConfig.build(window="1D", folds=1, start=str(4 * day), u_min=0, k=[1, 2],
                              algorithms=["pop", "pop-n"], progress=False, tracking=False,
                              output=str(tmp_path / "out"), test_unit="folds")
    outputs = evaluate_config(config, log=log)
    console = Console(width=200, record=True)
    print_summary(outputs, config, console)
    text = console.export_text()
    assert "bootstrap interval n/a (one fold)" in text and "95%" not in text
    assert "the intervals are n/a (one fold)" in text and "rough" not in text
    write_report(outputs.directory)
    page = html.unescape((outputs.directory / "report.html").read_text(encoding="utf-8"))
    assert "interval n/a (one fold), 1 paired fold;" in page
    assert "no std over 1 fold (0 skipped), bootstrap interval n/a (one fold)" in page
    assert "window 1D, 1 fold," in page and "<h2>Folds</h2><p>1 fold:" in page
    assert "nan to" not in page and "1 folds" not in page


def test_counts_of_one_are_singular():
    from sweval.evaluators.wording import units_line

    assert units_line(1, 2, 0) == "reused 1 unit, computed 2"
    assert units_line(0, 1, 1) == "reused 0 units, computed 1 (1 because the code changed)"
    # at the start (-v), before any unit is computed, the line says what will be done
    assert units_line(3, 24, 0, planned=True) == "reusing 3 units, computing 24"
    # units whose algorithm raised are tried on every run and counted (QA: they were not)
    assert units_line(26, 6, 0, failed=4) == "reused 26 units, computed 6, 4 failed"


def test_skip_reasons_list_five_then_say_how_many_more(tmp_path):
    """Eight folds skipped, each for its own n_eligible: the stratum line, the "skipped:" lines
    and the exit-2 error name five reasons and "… and 3 more folds" (they named 2, 3 and 3
    with no count of the rest)."""
    from sweval.data.errors import SwevalError
    from sweval.data.log import InteractionLog
    from sweval.evaluators.config.model import EvalConfig
    from sweval.evaluators.run.evaluate import evaluate_config
    from sweval.flows.cli.summary import check_something_scored, print_summary

    day = 86_400
    users = "abcdefghij"  # user n starts on day n: fold d has d eligible users
    rows = [(u, f"i{d}", d * day + n) for n, u in enumerate(users) for d in range(n, 10)]
    log = InteractionLog.from_frame(pd.DataFrame(rows, columns=["user", "item", "timestamp"]))
    config = EvalConfig.build(window="1D", folds=8, start=str(2 * day), u_min=100, k=[1],
                              algorithms=["pop"], progress=False, tracking=False,
                              output=str(tmp_path / "out"))
    outputs = evaluate_config(config, log=log)
    console = Console(width=300, record=True)
    print_summary(outputs, config, console)
    lines = console.export_text().splitlines()
    reasons = [f"n_eligible={n} < u_min=100" for n in range(2, 7)]
    assert "stratum all: every fold skipped" in lines  # the reasons follow once, under folds:
    assert [line for line in lines if line.startswith("  skipped: ")] == [
        *(f"  skipped: {reason}" for reason in reasons), "  skipped: … and 3 more folds"]
    with pytest.raises(SwevalError, match=r"=6 < u_min=100; … and 3 more folds\)\. Lower"):
        check_something_scored(outputs.results, u_min=100)


def test_skip_reasons_count_the_rest_per_split_of_each_protocol():
    from sweval.flows.cli.summary import skip_reasons

    rows = pd.DataFrame({
        "protocol": ["sw-eval"] * 6 + ["loocv"] * 2, "fold": [0, 1, 2, 3, 4, 5, 0, 0],
        "skip_reason": [f"r{i}" for i in range(6)] + ["r6", "r6"],
    })
    assert skip_reasons(rows, "split") == ["r0", "r1", "r2", "r3", "r4", "… and 2 more splits"]
    # a sixth reason is shown rather than counted (QA: "… and 1 more fold" hid it)
    assert skip_reasons(rows.iloc[:6]) == ["r0", "r1", "r2", "r3", "r4", "r5"]
    assert skip_reasons(rows.iloc[:5].assign(skip_reason=["a", "", None, "a", "b"])) == [
        "a (2 folds)", "b"]


def test_skip_reasons_count_the_folds_of_a_repeated_reason():
    """QA: 8 folds skipped for 3 distinct reasons printed the 3 reasons and no count, so the
    list read as 3 folds; each reason now says how many folds it skipped."""
    from sweval.flows.cli.summary import skip_reasons

    rows = pd.DataFrame({"fold": [0, 0, 1, 2, 3, 4, 5, 6, 7],  # fold 0 twice: two metrics' rows
                         "skip_reason": ["r15", "r15", "r15", "r15", "r9", "r9", "r9", "r2", "r2"]})
    assert skip_reasons(rows) == ["r15 (3 folds)", "r9 (3 folds)", "r2 (2 folds)"]
    many = pd.DataFrame({"fold": range(9), "skip_reason": ["a", "a", "b", "c", "d", "e", "f", "f", "g"]})
    assert skip_reasons(many) == ["a (2 folds)", "b", "c", "d", "e", "… and 3 more folds"]


def test_labels_of_one_configuration_are_said_to_be_one():
    """QA: with --tune pop-n.n_recent=100,1000 (1000 the default) the table showed pop-n and
    pop-n(n_recent=1000) as two rows of equal numbers, unexplained."""
    from sweval.flows.cli.summary import same_configuration_lines

    units = pd.DataFrame({
        "fold": [1, 0, 0, 1, 0, 1, 0, 1],
        "algorithm": ["pop-n", "pop-n", "pop-n(n_recent=100)", "pop-n(n_recent=100)",
                      "pop-n(n_recent=1000)", "pop-n(n_recent=1000)", "pop", "pop"],
        "unit_key": ["b", "a", "c", "d", "a", "b", "e", "f"],
    })
    assert same_configuration_lines(units) == [
        "pop-n(n_recent=1000) is pop-n: one configuration, the same units, so the same numbers"]
    assert same_configuration_lines(units[units["algorithm"] != "pop-n"]) == []
    assert same_configuration_lines(pd.DataFrame()) == []


def test_a_design_that_cannot_reach_alpha_says_cannot_tell_never_n_s():
    """6 folds, 6 pairs: Wilcoxon's floor 2/64 times 6 under Holm is 0.19: "n.s." would claim
    a test that could have said yes; the cell says "cannot tell" and the power statement says
    why, with the minimum detectable lead of the paired t-test."""
    import numpy as np

    from sweval.flows.cli.significance import power_lines

    rng = np.random.default_rng(4)
    a = np.array([0.10, 0.12, 0.11, 0.13, 0.10, 0.12])
    results = long_results({name: list(np.round(a + lift + rng.normal(0, 0.003, 6), 6))
                            for name, lift in (("a", 0.0), ("b", 0.02), ("c", 0.05),
                                               ("d", 0.06))})
    text = render_with_lead(results)
    assert "cannot tell" in text and "n.s." not in text
    _, significance = summary_of(results)
    lines = power_lines(significance, "recall", 10, "folds")
    assert len(lines) == 1
    line, style = lines[0]
    assert style == "yellow"
    assert line.startswith("folds (6 paired folds, 6 pairs): this design cannot tell. The "
                           "Wilcoxon test cannot go below p = 0.0312, 0.188 after Holm, not "
                           "below 0.05 whatever the data. Minimum detectable lead at 80% power")
    assert line.endswith(" Recall@10.")


def test_the_best_of_each_k_is_named_when_it_differs_by_k():
    """QA on real data: the footnote named one best (k's first) for every k."""
    from sweval.flows.cli.summary import common_folds_lines

    summary = pd.DataFrame({
        "algorithm": ["A", "B", "T"] * 2, "stratum": "all", "metric": "recall",
        "k": [5, 5, 5, 10, 10, 10], "mean": [0.3, 0.2, 0.4, 0.3, 0.5, 0.6],
        "n_folds": [4, 4, 2] * 2, "n_skipped": 0,
    })
    assert common_folds_lines(summary, "recall") == [
        "T (2 of 4 folds): Δ% against the best (A at k=5, B at k=10) on the folds both have; "
        "the best is the highest mean among the algorithms scored on all 4 folds"]


def test_a_dozen_long_labels_get_short_names_and_a_legend_in_80_columns():
    """Issue 46: with 11 configurations, import-path labels wrapped mid-word in 80 columns. A
    label longer than LABEL_WIDTH shows as its algorithm's short name and a letter, and the
    legend spells each one out; short labels stay as they are."""
    from sweval.flows.cli.labels import label_room, legend_lines, short_labels

    labels = ["pop", "pop-n", "item-knn[tuned]", "item-knn(n_neighbors=10)",
              *(f'item-knn(n_neighbors={n},weighting="cosine")' for n in (10, 50, 200)),
              "my_pkg.models:CoVisit(days=1)", "cv", "svd(factors=8)", "svd(factors=128)"]
    width = label_room(80, 4)
    shown = short_labels(labels, width)
    assert width == 12 and [shown[label] for label in labels] == [
        "pop", "pop-n", "item-knn\n[tuned]", "item-knn ·a", "item-knn ·b", "item-knn ·c",
        "item-knn ·d", "CoVisit ·e", "cv", "svd\n(factors=8)", "svd ·f"]
    assert legend_lines(shown) == [
        "·a = item-knn(n_neighbors=10)",
        '·b = item-knn(n_neighbors=10,weighting="cosine")',
        '·c = item-knn(n_neighbors=50,weighting="cosine")',
        '·d = item-knn(n_neighbors=200,weighting="cosine")',
        "·e = my_pkg.models:CoVisit(days=1)", "·f = svd(factors=128)"]
    assert short_labels(['item-knn(n_neighbors=10,weighting="cosine")'], 24) == {
        'item-knn(n_neighbors=10,weighting="cosine")':
            'item-knn\n(n_neighbors=10,\nweighting="cosine")'}
    summary = pd.DataFrame({
        "algorithm": [label for label in labels for _ in range(4)], "stratum": "all",
        "metric": "recall", "k": [5, 10, 15, 20] * len(labels),
        "mean": [0.05 + 0.001 * i for i in range(4 * len(labels))],
        "delta": [-0.1] * (4 * len(labels)), "n_folds": 10, "n_skipped": 0,
        "ci_low": 0.011, "ci_high": 0.143,
    })
    console = Console(width=80, record=True)
    console.print(summary_table(summary, metric="recall", stratum="all", title="t",
                                shown=shown))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    shown_lines = [line for label in labels for line in shown[label].split("\n")]
    assert [cell for cell in cells if cell] == shown_lines  # nothing folds mid-word


def test_a_run_of_more_strata_than_shown_prints_the_largest_and_says_so(
    tmp_path, write_log, capsys
):
    """A run of hundreds of strata printed a table for each; more strata than
    ``MAX_STRATA_SHOWN`` print those of the largest, and a line says so (every one is in
    summary.csv)."""
    import re

    from sweval_testing import log_frame, sweval_cli

    from sweval.evaluators.run.results import MAX_STRATA_SHOWN

    frame = log_frame(8)
    frame["policy"] = [f"p{int(user[1:]) % 14:02d}" for user in frame["user"]]
    data = write_log(frame=frame)
    assert sweval_cli("run", "--data", data, "--window", "1D", "--folds", "3", "--k", "10",
                      "--u-min", "1", "--algorithms", "pop,pop-n", "--stratify-by", "policy",
                      "--stratify-mode", "test", "--no-prefect", "--no-tracking",
                      "--no-progress", "--no-report", "--bootstrap", "100", "--output",
                      tmp_path / "out") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (f"14 strata: the tables below show the {MAX_STRATA_SHOWN} with the most eligible "
            "users; summary.csv has every one") in out
    assert len(set(re.findall(r"1D windows, stratum (p\d\d)", out))) == MAX_STRATA_SHOWN
    assert pd.read_csv(tmp_path / "out" / "summary.csv")["stratum"].nunique() == 15
