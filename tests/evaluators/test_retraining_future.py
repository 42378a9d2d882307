"""Property: nothing at or after the start of a scored window reaches a fit, a served history
or an update (``--horizon``, ``--cadence``, :meth:`Algorithm.update`).

Black-box form: the value of (model fitted at f, window w) depends only on the log before t_w
and on window w itself, so a run on the log truncated at the end of window w gives it exactly;
and a model fitted then updated to t_w lists the same whatever the log holds from t_w on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sweval
from sweval.algorithms.registry import build_algorithm
from sweval.algorithms.serving import Delta
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.windows import WindowSpec

DAY = 86_400
T0 = 1_704_067_200  # 2024-01-01T00:00:00Z
FOLDS = 3
START = T0 + 2 * DAY  # windows: days 2, 3, 4

#: (user, item, hour since T0): five days, the last three the windows.
rows = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 5), st.integers(0, 5 * 24 - 1)),
                min_size=8, max_size=60)


#: One interaction a day at noon (user 9, a new item each day): every window lies inside the log.
ANCHORS = [(9, 10 + day, day * 24 + 12) for day in range(5)]


def frame_of(log_rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame([(f"u{u}", f"i{i}", T0 + h * 3600) for u, i, h in log_rows],
                        columns=["user", "item", "timestamp"])


def served_values(frame: pd.DataFrame, store: Path, folds: int) -> pd.DataFrame:
    run = sweval.evaluate(frame, cache=str(store), window="1D", folds=folds, start=str(START),
                          u_min=1, k=[1, 3], metrics=["recall", "ndcg"],
                          algorithms=["pop", "item-knn"], horizon=2, cadence=[2])
    if run.retraining is None:  # every window skipped: nothing served
        return pd.DataFrame(columns=["fit_fold", "fold", "algorithm", "metric", "k", "value"])
    table = run.retraining.staleness
    return table[["fit_fold", "fold", "algorithm", "metric", "k", "value"]]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log_rows=rows, future=rows)
@pytest.mark.slow
def test_a_served_window_reads_nothing_after_its_start(log_rows, future, tmp_path: Path) -> None:
    """Every (fit fold, window w) value of the full run equals the run's on the log cut at the
    end of window w, with the rows after it replaced by others (``future``, moved past it)."""
    frame = frame_of(log_rows + ANCHORS)
    full = served_values(frame, tmp_path / "full", FOLDS)
    for window in range(FOLDS - 1):
        end = START + (window + 1) * DAY
        moved = [(u, i, h % 24 + (window + 3) * 24) for u, i, h in future]
        later = [row for row in ANCHORS if T0 + row[2] * 3600 >= end]
        cut = pd.concat([frame[frame["timestamp"] < end], frame_of(moved + later)],
                        ignore_index=True)
        cut = cut[cut["timestamp"] < T0 + 5 * DAY]
        part = served_values(cut, tmp_path / f"cut{window}", FOLDS)
        mine = full[full["fold"] == window].reset_index(drop=True)
        theirs = part[part["fold"] == window].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, theirs, check_dtype=False)


@settings(max_examples=25, deadline=None)
@given(log_rows=rows, future=rows, name=st.sampled_from(["pop", "pop-n", "decay-pop",
                                                          "item-knn", "als"]))
def test_an_update_reads_nothing_at_or_after_its_cutoff(log_rows, future, name) -> None:
    """fit(D_{t_0}) + update(delta to t_1) lists the same for the users of window 1 whatever
    the log holds at or after t_1 (there: ``future``'s rows, moved to days 3 and 4)."""
    params = {"als": {"factors": 2, "iterations": 3, "device": "cpu"},
              "decay-pop": {"period": "1D", "horizon": 2}}.get(name, {})
    moved = [(u, i, h % 48 + 3 * 24) for u, i, h in future]
    base = [r for r in log_rows if r[2] < 3 * 24]
    lists = []
    for extra in ([], moved):
        log = InteractionLog.from_frame(frame_of(base + ANCHORS + extra))
        folds = build_folds(log, WindowSpec(width_s=DAY, n_folds=2, start=START), u_min=0)
        first, second = folds
        model = build_algorithm(name, params).fit(first.train_data(log))
        later = second.train_data(log)
        delta = Delta.between(later, first.t_start, n_users=log.n_users, n_items=log.n_items)
        assert len(delta) == 0 or int(delta.timestamps.max()) < second.t_start
        model.update(delta)
        ids = [log.user_ids[u] for u in later.user_codes]
        ranked = model.recommend(np.arange(len(later.user_codes)), 3)
        lists.append({user: [None if c < 0 else log.item_ids[later.item_codes[c]] for c in row]
                      for user, row in zip(ids, ranked, strict=True)})
    assert lists[0] == lists[1]

