"""RecPack runner: one ``Timed(t_f, delta_out=W)`` scenario per fold (RecPack has no multi-fold
temporal scenario), then what ``recpack.pipelines.Pipeline`` does per algorithm: fit on
``full_training_data``, predict for ``test_data_in``, remove the history, and RecallK / NDCGK /
HitK at k = 5, 10, 15, 20 against ``test_data_out``.

Configuration (SPEC §5 as far as RecPack allows):

- pop: ``Popularity(K=200)`` (its default; RecPack scores only the K most popular items, so a
  user who has seen all K gets a short list: with K = 20 that happened to 11 MovieLens users);
- item-knn: ``ItemKNN(K=n_neighbors, similarity="cosine")``: top-K per row of S, score = X S
  (the SPEC definition);
- svd: ``SVD(num_components=factors, seed)``: sklearn ``TruncatedSVD(n_iter=7)`` with scores
  U Σ · Σ Vᵀ (= R V Σ Vᵀ), i.e. PureSVD weighted by Σ: a definition difference;
- als: RecPack's own torch ``WeightedMatrixFactorization(num_components, alpha, iterations,
  regularization)`` (not ``implicit``; no seed parameter);
- no POP-N (only via ``delta_in``, a time window) and no user-kNN (only KUNN).

The scenario re-splits the whole interaction matrix at every fold; that is RecPack's cost.
"""

import time

T_START = time.perf_counter()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import json  # noqa: E402
import warnings  # noqa: E402

from common import KS, Canon, Run, bounds, guarded, parse_args, read_log  # noqa: E402

warnings.filterwarnings("ignore")
import recpack  # noqa: E402
from recpack.algorithms import SVD, ItemKNN, Popularity, WeightedMatrixFactorization  # noqa: E402
from recpack.matrix import InteractionMatrix  # noqa: E402
from recpack.metrics import NDCGK, HitK, RecallK  # noqa: E402
from recpack.scenarios import Timed  # noqa: E402
from recpack.util import get_top_K_ranks  # noqa: E402

DEFAULTS = {
    "pop": {},
    "item-knn": {"n_neighbors": 100},
    "svd": {"factors": 50, "seed": 0},
    "als": {"factors": 64, "iterations": 15, "alpha": 1.0, "regularization": 0.01},
}


def build(name: str, p: dict):
    if name == "pop":
        return Popularity(K=200)
    if name == "item-knn":
        return ItemKNN(K=p["n_neighbors"], similarity="cosine")
    if name == "svd":
        return SVD(num_components=p["factors"], seed=p["seed"])
    if name == "als":
        return WeightedMatrixFactorization(
            num_components=p["factors"], alpha=p["alpha"], iterations=p["iterations"],
            regularization=p["regularization"],
        )
    raise KeyError(f"RecPack has no {name}")


def main() -> None:
    args = parse_args()
    version = getattr(recpack, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("recpack")
    run = Run(args, "recpack", version, T_START)

    def body() -> None:
        params = DEFAULTS[args.algorithm] | json.loads(args.params)
        run.record["params"] = params
        clock = time.perf_counter()
        frame = read_log(args.data)
        n_users, n_items = int(frame["user"].max()) + 1, int(frame["item"].max()) + 1
        matrix = InteractionMatrix(
            frame, item_ix="item", user_ix="user", timestamp_ix="timestamp",
            shape=(n_users, n_items),
        )
        run.record["load_s"] = time.perf_counter() - clock
        canon = Canon(frame)

        for lo, hi in bounds(args):
            run.begin()
            scenario = Timed(t=lo, delta_out=hi - lo)
            scenario.split(matrix)
            algorithm = build(args.algorithm, params)
            algorithm.fit(scenario.full_training_data)
            data_in = scenario.test_data_in
            predictions = algorithm.predict(data_in)
            predictions = predictions - predictions.multiply(data_in.binary_values)
            y_true = scenario.test_data_out.binary_values
            native = {}
            for k in KS:
                for metric in (RecallK(k), NDCGK(k), HitK(k)):
                    metric.calculate(y_true, predictions)
                    native[metric.name] = metric.value
            run.end()

            ranks = get_top_K_ranks(predictions.tocsr(), max(KS)).tocoo()
            value = canon.recall(lo, hi, ranks.row, ranks.col, ranks.data - 1)
            value["native_recall10"] = float(native["RecallK_10"])
            run.record["folds"].append(value)
            if run.stop_at_budget():
                break

    guarded(run, body)


if __name__ == "__main__":
    main()
