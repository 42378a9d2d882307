"""Item-side metrics (ILD, novelty, category coverage) with --items, on a hand-built log
(evaluators/metrics/item_side.py, docs/protocol.md §4d)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sweval_testing import DAY

from sweval.data.errors import SwevalError
from sweval.data.items import load_items
from sweval.data.loaders import load_log
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.run.evaluate import evaluate_config

# Day 0 is history: counts 10 ×4, 11 ×3, 12 ×2, 13 ×1 (N = 10); day 1 the test window.
#   user 1: history 10              POP lists [11, 12, 13]
#   user 2: history 10, 11          POP lists [12, 13]
#   user 3: history 10, 11, 12      POP lists [13]
#   user 4: history 10, 11, 12, 13  POP lists [] (nothing left)
# Categories: 10 A|B, 11 A, 12 A|C, 13 D (B only on 10, which no list holds).
ROWS = [
    (1, 10, 0), (2, 10, 1), (3, 10, 2), (4, 10, 3), (2, 11, 4), (3, 11, 5), (4, 11, 6),
    (3, 12, 7), (4, 12, 8), (4, 13, 9),
    (1, 11, DAY + 1), (2, 12, DAY + 2), (3, 13, DAY + 3), (4, 14, DAY + 4),
]
ITEMS = "movie,genre\n10,A|B\n11,A\n12,A|C\n13,D\n99,E\n"
# d(11, 12) = 1 - |{A}| / |{A, C}| = 1/2; d(11, 13) = d(12, 13) = 1
BITS = {item: -math.log2(count / 10) for item, count in {11: 3, 12: 2, 13: 1}.items()}


def run(tmp_path, name="out", **options):
    path = tmp_path / "log.csv"
    pd.DataFrame(ROWS, columns=["user", "item", "timestamp"]).to_csv(path, index=False)
    (tmp_path / "items.csv").write_text(ITEMS)
    base = dict(data=str(path), window="1D", folds=1, u_min=0, k=[1, 2, 3],
                algorithms=["pop"], progress=False, tracking=False, report=False,
                items=str(tmp_path / "items.csv"),
                metrics=["recall", "ild", "novelty", "category_coverage"],
                output=str(tmp_path / name), cache=str(tmp_path / "units"))
    return evaluate_config(EvalConfig.build(**(base | options))).results


def row(results, metric, k, stratum="all"):
    found = results[(results["metric"] == metric) & (results["k"] == k)
                    & (results["stratum"] == stratum)]
    return found.iloc[0]


def test_ild_by_hand(tmp_path):
    results = run(tmp_path)
    # k=2: user 1 d(11,12) = 1/2, user 2 d(12,13) = 1; users 3, 4 have no pair
    assert (row(results, "ild", 2)["value"], row(results, "ild", 2)["n_users"]) == (0.75, 2)
    # k=3: user 1 (1/2 + 1 + 1) / 3, user 2 1
    assert row(results, "ild", 3)["value"] == pytest.approx((2.5 / 3 + 1) / 2)
    one = row(results, "ild", 1)  # no list has a pair
    assert one["skipped"] and np.isnan(one["value"]) and one["n_users"] == 0


def test_novelty_by_hand(tmp_path):
    results = run(tmp_path)
    users = [(BITS[11] + BITS[12]) / 2, (BITS[12] + BITS[13]) / 2, BITS[13]]  # user 4: empty
    assert row(results, "novelty", 2)["value"] == pytest.approx(sum(users) / 3)
    assert row(results, "novelty", 2)["n_users"] == 3
    assert row(results, "novelty", 1)["value"] == pytest.approx(
        (BITS[11] + BITS[12] + BITS[13]) / 3)


def test_category_coverage_per_fold_and_stratum_by_hand(tmp_path):
    results = run(tmp_path, stratify_by="user-history", user_bins=[1, 3])
    # the catalogue's categories A, B, C, D; shown at k=1: 11, 12, 13 -> A, C, D
    assert row(results, "category_coverage", 1)["value"] == 0.75
    # stratum 1-2 (users 1, 2): 11, 12 -> A, C; stratum 3+ (users 3, 4): 13 -> D
    assert row(results, "category_coverage", 1, "1-2")["value"] == 0.5
    assert row(results, "category_coverage", 1, "3+")["value"] == 0.25
    assert row(results, "ild", 2, "1-2")["value"] == 0.75


def test_item_metrics_need_items():
    with pytest.raises(SwevalError, match="--items"):
        EvalConfig.build(metrics=["ild"])
    assert "ild" not in EvalConfig.build(metrics=["all"]).metrics
    assert "novelty" in EvalConfig.build(metrics=["all"]).metrics  # training counts only
    chosen = EvalConfig.build(metrics=["all"], items="movielens-latest-small").metrics
    assert {"ild", "category_coverage"} <= set(chosen)


def test_item_file_errors_name_the_file(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("id,genre\n1,A\n1,B\n")
    with pytest.raises(SwevalError, match="listed twice, at lines \\[2, 3\\]"):
        load_items(str(path))
    path.write_text("id,genre\n1,A\n")
    with pytest.raises(SwevalError, match="--item-columns colour"):
        load_items(str(path), ["colour"])
    with pytest.raises(SwevalError, match="no such file"):
        load_items(str(tmp_path / "none.csv"))


def test_any_reader_format_gives_the_same_features(tmp_path):
    (tmp_path / "items.csv").write_text(ITEMS)
    frame = pd.read_csv(tmp_path / "items.csv")
    frame.to_parquet(tmp_path / "items.parquet")
    frame.to_json(tmp_path / "items.jsonl", orient="records", lines=True)
    csv = load_items(str(tmp_path / "items.csv"))
    for name in ("items.parquet", "items.jsonl"):
        other = load_items(str(tmp_path / name))
        assert other.categories == csv.categories and list(other.ids) == list(csv.ids)
        assert (other.matrix != csv.matrix).nnz == 0


def test_bundled_movielens_genres_cover_its_log():
    items = load_items("movielens-latest-small")
    assert len(items.categories) == 20 and "genres=Animation" in items.categories
    log = load_log("movielens-latest-small")
    features = items.for_log(log)
    assert features.shape[0] == log.n_items
    assert (np.asarray(features.sum(axis=1)).ravel() > 0).all()  # every rated movie listed
    toy_story = int(np.flatnonzero(log.item_ids.astype(str) == "1")[0])
    listed = {items.categories[c] for c in features[toy_story].indices}
    assert listed == {f"genres={g}" for g in
                      ("Adventure", "Animation", "Children", "Comedy", "Fantasy")}
