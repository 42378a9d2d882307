"""Top-k overlap (overlap.csv) and --seeds: Jaccard by hand and against a slow set-based
reference; pairs of algorithms, seeds and consecutive folds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig
from sweval.evaluators.config.seeds import expand_seeds, seed_pairs
from sweval.evaluators.stats.overlap import jaccard, list_overlap, overlap_matrix, overlap_means
from sweval.evaluators.stats.tuning_candidates import ordered_labels


def slow_jaccard(a, b, k):
    first = {int(i) for i in a[:k] if i >= 0}
    second = {int(i) for i in b[:k] if i >= 0}
    union = first | second
    return len(first & second) / len(union) if union else 1.0


def test_jaccard_by_hand():
    a = np.array([[1, 2, 3], [4, 5, -1], [-1, -1, -1]])
    b = np.array([[2, 1, 9], [6, 7, 8], [-1, -1, -1]])
    values = jaccard(a, b, [1, 2, 3])
    assert values[1] == pytest.approx([0, 0, 1])  # {1} vs {2}; {4} vs {6}; both empty
    assert values[2] == pytest.approx([1, 0, 1])  # {1,2} vs {2,1}
    assert values[3] == pytest.approx([2 / 4, 0, 1])  # {1,2,3} vs {2,1,9}; {4,5} vs {6,7,8}


def test_jaccard_counts_a_repeated_item_once(rng):
    a = rng.integers(-1, 8, (50, 6))  # repeats within rows, as arbitrary matrices may have
    b = rng.integers(-1, 8, (50, 6))
    values = jaccard(a, b, [1, 3, 6])
    for k in (1, 3, 6):
        assert values[k] == pytest.approx([slow_jaccard(a[i], b[i], k) for i in range(50)])


def test_jaccard_matches_sets(rng):
    n, width = 40, 6
    a = np.array([np.concatenate([rng.permutation(12)[: rng.integers(0, width + 1)],
                                  np.full(width, -1)])[:width] for _ in range(n)])
    b = np.array([np.concatenate([rng.permutation(12)[: rng.integers(0, width + 1)],
                                  np.full(width, -1)])[:width] for _ in range(n)])
    values = jaccard(a, b, list(range(1, width + 1)))
    for k in range(1, width + 1):
        assert values[k] == pytest.approx([slow_jaccard(a[i], b[i], k) for i in range(n)])


def test_jaccard_of_lists_deeper_than_every_k(rng):
    """Lists as deep as a user's relevant set: the slots past max(k) change nothing, even
    where they hold the other list's top items or repeats."""
    a = rng.integers(-1, 9, (200, 40))
    b = rng.integers(-1, 9, (200, 40))
    values = jaccard(a, b, [1, 3, 5])
    for k in (1, 3, 5):
        assert values[k] == pytest.approx([slow_jaccard(a[i], b[i], k) for i in range(200)])


def test_list_overlap_pairs_users_and_folds():
    users = np.array([0, 1, 2])
    lists = {
        (0, "x"): (users, np.array([[1, 2], [3, 4], [5, 6]])),
        (0, "y"): (users, np.array([[2, 1], [3, 9], [7, 8]])),
        # fold 2 (fold 1 skipped): users 1, 2, 3; user 0 not eligible
        (2, "x"): (np.array([1, 2, 3]), np.array([[3, 4], [6, 7], [1, 2]])),
    }
    frame = list_overlap(lists, [0, 2], ["x", "y"], [2])
    rows = {(r.kind, r.fold_a, r.fold_b, r.algorithm_a, r.algorithm_b): (r.jaccard, r.n_users)
            for r in frame.itertuples()}
    # x vs y on fold 0: 1, 1/3, 0
    assert rows[("algorithms", 0, 0, "x", "y")] == pytest.approx(((1 + 1 / 3 + 0) / 3, 3))
    # x on folds 0 -> 2, users 1 and 2: {3,4} vs {3,4} = 1, {5,6} vs {6,7} = 1/3
    assert rows[("folds", 0, 2, "x", "x")] == pytest.approx(((1 + 1 / 3) / 2, 2))
    assert len(rows) == 2  # y has no fold 2
    means = overlap_means(frame)
    assert set(means["kind"]) == {"algorithms", "folds"}
    matrix = overlap_matrix(frame, 2)
    assert matrix.loc["x", "y"] == matrix.loc["y", "x"] == pytest.approx((1 + 1 / 3) / 3)
    assert matrix.loc["x", "x"] == pytest.approx((1 + 1 / 3) / 2)  # stability over folds
    assert np.isnan(matrix.loc["y", "y"])  # y was evaluated on one fold only


def test_seeds_expand_stochastic_algorithms_only():
    assert expand_seeds(["pop", "als", "svd(factors=8)"], [0, 3]) == [
        "pop", "als(seed=0)", "als(seed=3)", "svd(factors=8,seed=0)", "svd(factors=8,seed=3)",
    ]
    assert expand_seeds(["pop", "als"], []) == ["pop", "als"]
    with pytest.raises(SwevalError, match="--seeds.*sets its seed"):
        expand_seeds(["als(seed=1)"], [0, 1])
    with pytest.raises(SwevalError, match="--seeds: none of pop, item-knn has a seed"):
        expand_seeds(["pop", "item-knn"], [0, 1])
    with pytest.raises(SwevalError, match="--set als.seed"):
        expand_seeds(["als"], [0, 1], {"als": {"seed": 4}})
    config = EvalConfig.build(algorithms=["item-knn", "als"], seeds=[0, 1, 2])
    labels = ordered_labels(config)
    assert labels == ["item-knn", "als(seed=0)", "als(seed=1)", "als(seed=2)"]
    assert seed_pairs(labels) == [("als(seed=0)", "als(seed=1)"), ("als(seed=0)", "als(seed=2)"),
                                  ("als(seed=1)", "als(seed=2)")]
    assert seed_pairs(["als(factors=8,seed=0)", "als(seed=1)"]) == []  # other configurations


def test_a_run_with_seeds_writes_intrinsic_overlap(tmp_path):
    from sweval_testing import log_frame

    from sweval.data.log import InteractionLog
    from sweval.evaluators.run.evaluate import evaluate_config

    config = EvalConfig.build(
        window="1D", folds=3, u_min=3, algorithms=["pop", "als(factors=4,iterations=2)"],
        seeds=[0, 1], k=[3, 5], output=str(tmp_path), progress=False, tracking=False,
    )
    outputs = evaluate_config(config, log=InteractionLog.from_frame(log_frame()))
    frame = pd.read_csv(tmp_path / "overlap.csv")
    pd.testing.assert_frame_equal(frame, outputs.overlap, check_exact=False, rtol=1e-9)
    a, b = "als(factors=4,iterations=2,seed=0)", "als(factors=4,iterations=2,seed=1)"
    seeds = frame[frame["kind"] == "seeds"]
    assert set(zip(seeds["algorithm_a"], seeds["algorithm_b"])) == {(a, b)}
    assert ((seeds["jaccard"] >= 0) & (seeds["jaccard"] <= 1)).all()
    assert set(frame["kind"]) == {"algorithms", "seeds", "folds"}
    evaluated = (~outputs.folds["skipped"]).sum()
    assert len(seeds) == evaluated * 2  # per fold and k

    from sweval.evaluators.report.page import write_report

    written = write_report(tmp_path)
    assert tmp_path / "report-overlap-at-5.png" in written  # no k=10: the largest k
    assert "How different are the lists?" in (tmp_path / "report.html").read_text()
