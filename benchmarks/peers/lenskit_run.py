"""LensKit runner: ``split_global_time`` (temporal splits) + ``topn_pipeline`` + ``batch.recommend``.

LensKit 2025.8.1 (the newest release installable on Python 3.11; 2026.x needs Python ≥ 3.13).
Configuration (SPEC §5 as far as LensKit allows):

- pop: ``PopScorer(score="count")``;
- pop-n: ``TimeBoundedPopScore(score="count", cutoff=...)`` with the cutoff set per fold just
  before the N-th latest training interaction (LensKit counts ``timestamp > cutoff``);
- item-knn: ``ItemKNNScorer(feedback="implicit", max_nbrs=n_neighbors)``: LensKit caps the
  neighbours used *per scored item* (among the user's history), while SPEC §5 prunes each history
  item's row of S: a definition difference;
- user-knn: ``UserKNNScorer(feedback="implicit", max_nbrs=n_neighbors)``: LensKit scores with the
  sum of the neighbours' similarities (SW-EVAL's ``weighting=cosine``, not the default ``count``);
- svd: ``BiasedSVDScorer(embedding_size=factors)``: a biased SVD of rating residuals, not
  PureSVD (different model, reported for cost only);
- als: ``lenskit.implicit.ALS(weight=alpha, factors, regularization, iterations, random_state)``.

Per fold: ``split_global_time(data, [t_0..t_{n-1}], end=t_n, filter_test_users=True)`` (all folds
built up front, inside the timed section), a fresh pipeline trained on the split's training set,
``batch.recommend(pipeline, test users, n=20)`` (the default candidate selector drops training
items), and ``RunAnalysis`` with Recall, NDCG and Hit at k = 5, 10, 15, 20. LensKit's Recall
divides by min(|Rel|, k), so its native Recall@10 differs where a user has more than 10 test items.
"""

import time

T_START = time.perf_counter()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datetime as dt  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import lenskit  # noqa: E402
import pandas as pd  # noqa: E402
from common import KS, Canon, Run, bounds, guarded, parse_args, read_log  # noqa: E402
from lenskit import batch, topn_pipeline  # noqa: E402
from lenskit.basic import PopScorer  # noqa: E402
from lenskit.basic.popularity import TimeBoundedPopScore  # noqa: E402
from lenskit.data import from_interactions_df  # noqa: E402
from lenskit.knn import ItemKNNScorer, UserKNNScorer  # noqa: E402
from lenskit.metrics import NDCG, Hit, Recall, RunAnalysis  # noqa: E402
from lenskit.splitting import split_global_time  # noqa: E402

#: batch.recommend workers: LK_BENCH_JOBS (default 1 = in process; LensKit's own default
#: starts a process pool per call, which costs seconds per fold on 2 cores).
N_JOBS = int(os.environ.get("LK_BENCH_JOBS", "1")) or None

DEFAULTS = {
    "pop": {},
    "pop-n": {"n_recent": 1000},
    "item-knn": {"n_neighbors": 100},
    "user-knn": {"n_neighbors": 50},
    "svd": {"factors": 50},
    "als": {"factors": 64, "regularization": 0.01, "alpha": 1.0, "iterations": 15, "seed": 0},
}


def utc(t: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC).replace(tzinfo=None)


def scorer(name: str, p: dict, train):
    if name == "pop":
        return PopScorer(score="count")
    if name == "pop-n":
        times = train.interaction_table(format="pandas")["timestamp"]
        nth = times.nlargest(p["n_recent"]).min()
        return TimeBoundedPopScore(score="count", cutoff=nth - pd.Timedelta(microseconds=1))
    if name == "item-knn":
        return ItemKNNScorer(feedback="implicit", max_nbrs=p["n_neighbors"])
    if name == "user-knn":
        return UserKNNScorer(feedback="implicit", max_nbrs=p["n_neighbors"])
    if name == "svd":
        from lenskit.sklearn.svd import BiasedSVDScorer

        return BiasedSVDScorer(embedding_size=p["factors"])
    if name == "als":
        from lenskit.implicit import ALS

        return ALS(weight=p["alpha"], factors=p["factors"], regularization=p["regularization"],
                   iterations=p["iterations"], random_state=p["seed"],
                   calculate_training_loss=False)
    raise KeyError(f"LensKit runner has no {name}")


def main() -> None:
    args = parse_args()
    run = Run(args, "lenskit", lenskit.__version__, T_START)

    def body() -> None:
        params = DEFAULTS[args.algorithm] | json.loads(args.params)
        run.record["params"] = params
        run.record["n_jobs_env"] = os.environ.get("LK_NUM_PROCS")
        clock = time.perf_counter()
        frame = read_log(args.data)
        df = pd.DataFrame({
            "user_id": frame["user"].to_numpy(),
            "item_id": frame["item"].to_numpy(),
            "timestamp": pd.to_datetime(frame["timestamp"].to_numpy(), unit="s"),
        })
        data = from_interactions_df(df, timestamp_col="timestamp")
        run.record["load_s"] = time.perf_counter() - clock
        canon = Canon(frame)
        want = bounds(args)

        run.begin()
        splits = split_global_time(
            data, [utc(lo) for lo, _ in want], end=utc(want[-1][1]), filter_test_users=True
        )
        run.end()
        for (lo, hi), split in zip(want, splits):
            run.begin()
            pipe = topn_pipeline(scorer(args.algorithm, params, split.train), n=max(KS))
            pipe.train(split.train)
            recs = batch.recommend(pipe, list(split.test.keys()), n=max(KS), n_jobs=N_JOBS)
            analysis = RunAnalysis()
            for k in KS:
                analysis.add_metric(Recall(k), f"recall@{k}")
                analysis.add_metric(NDCG(k), f"ndcg@{k}")
                analysis.add_metric(Hit(k), f"hit@{k}")
            native = analysis.measure(recs, split.test).list_summary()
            run.end()

            table = recs.to_df()
            value = canon.recall(lo, hi, table["user_id"].to_numpy(), table["item_id"].to_numpy(),
                                 table["rank"].to_numpy() - 1)
            value["native_recall10"] = float(native.loc["recall@10", "mean"])
            run.record["folds"].append(value)
            if run.stop_at_budget():
                break

    guarded(run, body)


if __name__ == "__main__":
    main()
