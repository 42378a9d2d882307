"""Streamsight runner: ``SlidingWindowSetting`` + ``EvaluatorStreamer`` (the streaming API).

Streamsight 3.1.7 needs Python ≥ 3.13 (run here with pyenv's CPython 3.13.0) and, outside a
source checkout, ``STREAMSIGHT_ROOT`` pointing at any existing folder (the driver sets it).

Protocol: ``SlidingWindowSetting(background_t=t_0, window_size=W, top_K=10**6)`` (top_K caps the
ground-truth items per user: set high so that every test item is relevant), evaluator built with
``EvaluatorStreamerBuilder(ignore_unknown_user=True)`` and RecallK; per window the algorithm gets
the released data (the background set, then each window), is fitted, predicts for the window's
users and submits. Streamsight has *no* seen-item filter: canonical Recall@10 is computed here
from the top-10 of each returned score row as it is (already-seen items take list slots).

- item-knn: ``ItemKNNIncremental(K=n_neighbors)``: accumulates the released data (expanding
  window, SPEC §5 pruning per row);
- pop: ``MostPop``; when it fails (3.1.7: ``_predict`` still expects the removed ``predict_ui_df``
  argument) ``RecentPopularity`` is run instead and flagged: popularity of the latest released
  window only, not of the whole history (different definition).
"""

import time

T_START = time.perf_counter()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import json  # noqa: E402
import logging  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from common import Canon, Run, bounds, guarded, parse_args, read_log  # noqa: E402

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
import streamsight  # noqa: E402
from streamsight.algorithms import ItemKNNIncremental, MostPop, RecentPopularity  # noqa: E402
from streamsight.evaluators import EvaluatorStreamerBuilder  # noqa: E402
from streamsight.matrix import InteractionMatrix  # noqa: E402
from streamsight.settings import SlidingWindowSetting  # noqa: E402

DEFAULTS = {"pop": {}, "item-knn": {"n_neighbors": 100}}


def top10(scores, requests: np.ndarray):
    """Long-format top-10 (user, item, rank) of a sparse score matrix.

    Streamsight 3.1.7 returns either one row per prediction request (ItemKNN*: row j belongs to
    the user of request j) or one row per user id (popularity models); both are handled.
    """
    scores = scores.tocsr()
    if scores.shape[0] == len(requests):
        users, rows = np.unique(requests, return_index=True)
    else:
        users = np.unique(requests)
        users = users[users < scores.shape[0]]
        rows = users
    out_u, out_i, out_r = [], [], []
    for u, row in zip(users, rows):
        lo, hi = scores.indptr[row], scores.indptr[row + 1]
        if hi == lo:
            continue
        vals, cols = scores.data[lo:hi], scores.indices[lo:hi]
        order = np.lexsort((cols, -vals))[:10]
        out_u.append(np.full(len(order), u))
        out_i.append(cols[order])
        out_r.append(np.arange(len(order)))
    if not out_u:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0, int)
    return np.concatenate(out_u), np.concatenate(out_i), np.concatenate(out_r)


def main() -> None:
    args = parse_args()
    run = Run(args, "streamsight", getattr(streamsight, "__version__", "3.1.7"), T_START)

    def body() -> None:
        params = DEFAULTS[args.algorithm] | json.loads(args.params)
        run.record["params"] = params
        clock = time.perf_counter()
        frame = read_log(args.data)
        # Streamsight sizes its matrices by the number of users/items seen so far, so ids must be
        # 0..n-1 in order of first appearance: re-code (and map back for the canonical recall).
        users, user_ids = pd.factorize(frame["user"])
        items, item_ids = pd.factorize(frame["item"])
        recoded = pd.DataFrame({"user": users, "item": items, "timestamp": frame["timestamp"]})
        matrix = InteractionMatrix(recoded, item_ix="item", user_ix="user",
                                   timestamp_ix="timestamp")
        run.record["load_s"] = time.perf_counter() - clock
        canon = Canon(frame)
        want = bounds(args)

        def attempt(make):
            run.eval_s = run.eval_cpu_s = 0.0
            run.begin()
            setting = SlidingWindowSetting(background_t=args.t0, window_size=args.width,
                                           top_K=10**6)
            setting.split(matrix)
            builder = EvaluatorStreamerBuilder(ignore_unknown_user=True)
            builder.add_setting(setting)
            builder.set_metric_K(10)
            builder.add_metric("RecallK")
            evaluator = builder.build()
            algorithm = make()
            algo_id = evaluator.register_algorithm(algorithm)
            evaluator.start_stream()
            folds = []
            for lo, hi in want[: setting.num_split]:
                algorithm.fit(evaluator.get_training_data(algo_id))
                unlabeled = evaluator.get_unlabeled_data(algo_id)
                prediction = algorithm.predict(unlabeled)
                evaluator.submit_prediction(algo_id, prediction)
                users = unlabeled._df["uid"].to_numpy()  # noqa: SLF001 (one per request)
                folds.append((lo, hi, prediction, users))
                if time.perf_counter() - run._marks[0] >= args.budget > 0:  # noqa: SLF001
                    run.note(f"stopped after {len(folds)} folds (budget {args.budget:.0f} s)")
                    break
            run.end()
            try:
                native = evaluator.metric_results("window")
                column = [c for c in native.columns if "Recall" in str(c)][0]
                run.record["native_window_recall"] = [float(v) for v in native[column]]
            except Exception as exc:  # noqa: BLE001
                run.note(f"metric_results failed: {type(exc).__name__}: {exc}")
            return folds

        if args.algorithm == "item-knn":
            folds = attempt(lambda: ItemKNNIncremental(K=params["n_neighbors"]))
        else:
            try:
                folds = attempt(lambda: MostPop(K=200))
            except Exception as exc:  # noqa: BLE001
                run.note(f"MostPop failed ({type(exc).__name__}: {str(exc)[:120]}); "
                         "ran RecentPopularity (popularity of the last window only) instead")
                run.record["algorithm_used"] = "RecentPopularity"
                folds = attempt(lambda: RecentPopularity(K=200))
        native = run.record.get("native_window_recall") or []
        for f, (lo, hi, prediction, users) in enumerate(folds):
            u, i, r = top10(prediction, users)
            value = canon.recall(lo, hi, np.asarray(user_ids)[u], np.asarray(item_ids)[i], r)
            if f < len(native):
                value["native_recall10"] = native[f]
            run.record["folds"].append(value)

    guarded(run, body)


if __name__ == "__main__":
    main()
