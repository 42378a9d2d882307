"""RecTools runner: ``TimeRangeSplitter`` + ``cross_validate`` on the shared log and folds.

Configuration (matching SPEC §5 as far as RecTools allows):

- pop: ``PopularModel(popularity="n_interactions")`` (the log is de-duplicated, so = n_users);
- pop-n: ``PopularModel`` with ``begin_from`` set at each fit to the timestamp of the N-th latest
  training interaction (RecTools only has time-based recency: ties at that second are included);
- item-knn: ``ImplicitItemKNNWrapperModel(CosineRecommender(K=n_neighbors))``;
- svd: ``PureSVDModel(factors)`` (scipy ``svds``); ``random_state`` is left unset: with
  scipy 1.17, RecTools 0.19 passes a ``RandomState`` on to ``svds``, which fails
  (``TypeError: SeedSequence expects int or sequence of ints ... not RandomState``);
- als: ``ImplicitALSWrapperModel(AlternatingLeastSquares(factors, regularization, alpha,
  iterations, random_state))``;
- no user-kNN in RecTools.

``TimeRangeSplitter(test_size=<W in days>D, n_splits=N, filter_cold_users=True,
filter_cold_items=False, filter_already_seen=True)``, ``cross_validate(k=20, filter_viewed=True)``
with Recall, NDCG and HitRate at k = 5, 10, 15, 20. RecTools anchors the folds at the ceiling of
the last timestamp; the driver chooses t0 that way and this script checks the borders agree.
"""

import time

T_START = time.perf_counter()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import json  # noqa: E402

import pandas as pd  # noqa: E402
import rectools  # noqa: E402
from common import KS, Canon, Run, bounds, guarded, parse_args, read_log  # noqa: E402
from implicit.als import AlternatingLeastSquares  # noqa: E402
from implicit.nearest_neighbours import CosineRecommender  # noqa: E402
from rectools import Columns  # noqa: E402
from rectools.dataset import Dataset  # noqa: E402
from rectools.metrics import NDCG, HitRate, Recall  # noqa: E402
from rectools.model_selection import TimeRangeSplitter, cross_validate  # noqa: E402
from rectools.models import (  # noqa: E402
    ImplicitALSWrapperModel,
    ImplicitItemKNNWrapperModel,
    PopularModel,
    PureSVDModel,
)

DEFAULTS = {
    "pop": {},
    "pop-n": {"n_recent": 1000},
    "item-knn": {"n_neighbors": 100},
    "svd": {"factors": 50, "seed": 0},
    "als": {"factors": 64, "regularization": 0.01, "alpha": 1.0, "iterations": 15, "seed": 0},
}


class LastNPopularModel(PopularModel):
    """PopularModel counting only interactions at or after the N-th latest one of each fold."""

    def __init__(self, n_recent: int) -> None:
        super().__init__(popularity="n_interactions")
        self.n_recent = n_recent

    def _fit(self, dataset):  # noqa: ANN001
        times = dataset.interactions.df[Columns.Datetime]
        self.begin_from = times.nlargest(self.n_recent).min()
        super()._fit(dataset)


def build(name: str, p: dict):
    if name == "pop":
        return PopularModel(popularity="n_interactions")
    if name == "pop-n":
        return LastNPopularModel(p["n_recent"])
    if name == "item-knn":
        return ImplicitItemKNNWrapperModel(CosineRecommender(K=p["n_neighbors"]))
    if name == "svd":
        return PureSVDModel(factors=p["factors"])  # random_state=seed crashes (see above)
    if name == "als":
        return ImplicitALSWrapperModel(
            AlternatingLeastSquares(
                factors=p["factors"], regularization=p["regularization"], alpha=p["alpha"],
                iterations=p["iterations"], random_state=p["seed"],
                calculate_training_loss=False,
            )
        )
    raise KeyError(f"RecTools has no {name}")


def main() -> None:
    args = parse_args()
    run = Run(args, "rectools", rectools.__version__, T_START)

    def body() -> None:
        params = DEFAULTS[args.algorithm] | json.loads(args.params)
        run.record["params"] = params
        clock = time.perf_counter()
        frame = read_log(args.data)
        interactions = pd.DataFrame({
            Columns.User: frame["user"].to_numpy(),
            Columns.Item: frame["item"].to_numpy(),
            Columns.Weight: 1.0,
            Columns.Datetime: pd.to_datetime(frame["timestamp"].to_numpy(), unit="s"),
        })
        dataset = Dataset.construct(interactions)
        run.record["load_s"] = time.perf_counter() - clock
        canon = Canon(frame)

        days = args.width // 86400
        if days * 86400 == args.width:
            test_size = f"{days}D"
        else:
            test_size = f"{args.width // 3600}H"
        splitter = TimeRangeSplitter(
            test_size=test_size, n_splits=args.n_folds, filter_cold_users=True,
            filter_cold_items=False, filter_already_seen=True,
        )
        borders = splitter.get_test_fold_borders(dataset.interactions)
        want = bounds(args)
        got = [(int(a.timestamp()), int(b.timestamp())) for a, b in borders]
        if got != want:
            raise RuntimeError(f"RecTools fold borders {got[:2]}... differ from {want[:2]}...")

        model = build(args.algorithm, params)
        captured = []
        original = model.recommend

        def recommend(*a, **kw):  # keeps a reference to each fold's lists (no copy)
            reco = original(*a, **kw)
            captured.append(reco)
            return reco

        model.recommend = recommend
        metrics = {}
        for k in KS:
            metrics[f"recall@{k}"] = Recall(k=k)
            metrics[f"ndcg@{k}"] = NDCG(k=k)
            metrics[f"hit_rate@{k}"] = HitRate(k=k)
        run.begin()
        result = cross_validate(
            dataset=dataset, splitter=splitter, metrics=metrics, models={args.algorithm: model},
            k=max(KS), filter_viewed=True,
        )
        run.end()

        native = {m["i_split"]: m for m in result["metrics"]}
        for f, ((lo, hi), reco) in enumerate(zip(want, captured)):
            value = canon.recall(
                lo, hi, reco[Columns.User].to_numpy(), reco[Columns.Item].to_numpy(),
                reco[Columns.Rank].to_numpy() - 1,
            )
            value["native_recall10"] = native[f]["recall@10"]
            run.record["folds"].append(value)

    guarded(run, body)


if __name__ == "__main__":
    main()
