"""The cost floor of a sliding-window run: per fold, only the work no evaluator can avoid.

For every fold f (same bounds as the benchmark), with nothing else in the process:

- ``csr``: building the binary training matrix R of D_{t_f} (compact rows/columns, as the
  engine's ``TrainData``) from the time-sorted code arrays;
- ``pop``: one ``bincount`` of the training items and one ranking of the catalogue;
- ``svd_fit``: the bare exact truncated SVD with ``factors`` components,
  ``scipy.sparse.linalg.svds(R, k=factors, solver="arpack")`` (ARPACK, as the engine's
  ``eigsh`` on RᵀR); matrices of at most 250k cells use the dense LAPACK SVD, as the engine does;
- ``svd_fit_gram``: the same decomposition as ARPACK ``eigsh`` on the Gram operator
  v ↦ Rᵀ(R v) (the engine's formulation, called bare);
- ``als_fit``: ``implicit.als.AlternatingLeastSquares`` with the same hyper-parameters, under
  ``threadpool_limits(1, "blas")`` as implicit asks;
- ``svd_score`` / ``als_score``: one dense scoring matmul for the eligible users only
  ((R_U V) Vᵀ, resp. X_U Yᵀ), without top-k;
- ``itemknn_ref``: a reference for item-kNN, *not* a strict floor: implicit's compiled
  ``CosineRecommender(K=n_neighbors, num_threads=1)`` fit (all-pairs cosine, top-K per row) plus
  the sparse product R_U S for the eligible users;
- ``userknn_ref``: R_U Rᵀ (sparse), top-n neighbours per row (dense ``argpartition``), W R.

Every part is timed in wall seconds and in process CPU seconds (``<part>_cpu``, all threads).
Totals are sums over the folds. Usage::

    .venv/bin/python benchmarks/floor.py --data LOG.parquet --t0 T0 --width W --n-folds N \
        --u-min 100 --out floor.json [--skip als,svd]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from common import fold_parser, read_log  # noqa: E402

from sweval.algorithms.svd import DENSE_SVD_CELLS  # noqa: E402  (the engine's switch)


def compact_csr(user: np.ndarray, item: np.ndarray, n_users: int, n_items: int):
    user_present = np.bincount(user, minlength=n_users) > 0
    item_present = np.bincount(item, minlength=n_items) > 0
    user_row = np.cumsum(user_present) - 1
    item_col = np.cumsum(item_present) - 1
    rows, cols = user_row[user], item_col[item]
    matrix = sp.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, cols)),
        shape=(int(user_present.sum()), int(item_present.sum())),
    )
    return matrix, user_row, cols


def main() -> None:
    p = fold_parser()
    p.add_argument("--u-min", type=int, default=100)
    p.add_argument("--out", required=True)
    p.add_argument("--skip", default="", help="comma-separated parts to skip: als,svd,knn")
    p.add_argument("--svd-factors", type=int, default=50)
    p.add_argument("--als", default='{"factors": 64, "regularization": 0.01, "alpha": 1.0, '
                   '"iterations": 15, "seed": 0}')
    p.add_argument("--item-neighbors", type=int, default=100)
    p.add_argument("--user-neighbors", type=int, default=50)
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    als_params = json.loads(args.als)

    frame = read_log(args.data)
    user = frame["user"].to_numpy(np.int64)
    item = frame["item"].to_numpy(np.int64)
    ts = frame["timestamp"].to_numpy(np.int64)
    n_users, n_items = int(user.max()) + 1, int(item.max()) + 1
    first_pos = np.full(n_users, len(user))
    np.minimum.at(first_pos, user, np.arange(len(user)))

    from threadpoolctl import threadpool_limits

    totals: dict[str, float] = {}
    folds = []
    for f in range(args.n_folds):
        lo_t = args.t0 + f * args.width
        lo, hi = np.searchsorted(ts, [lo_t, lo_t + args.width])
        test_users = np.unique(user[lo:hi])
        eligible = test_users[first_pos[test_users] < lo]
        if len(eligible) < args.u_min:
            folds.append({"fold": f, "skipped": True})
            continue
        t: dict[str, float] = {}
        clock = time.perf_counter()
        cpu = time.process_time()
        matrix, user_row, cols = compact_csr(user[:lo], item[:lo], n_users, n_items)
        t["csr"] = time.perf_counter() - clock
        t["csr_cpu"] = time.process_time() - cpu
        rows = user_row[eligible]

        clock = time.perf_counter()
        cpu = time.process_time()
        counts = np.bincount(cols, minlength=matrix.shape[1])
        np.argsort(-counts, kind="stable")
        t["pop"] = time.perf_counter() - clock
        t["pop_cpu"] = time.process_time() - cpu

        if "svd" not in skip:
            clock = time.perf_counter()
            cpu = time.process_time()
            r64 = matrix.astype(np.float64)
            if matrix.shape[0] * matrix.shape[1] <= DENSE_SVD_CELLS:
                _, _, vt = np.linalg.svd(r64.toarray(), full_matrices=False)
                v = vt[: args.svd_factors].T
            else:
                from scipy.sparse.linalg import svds

                start = np.random.default_rng(0).uniform(-1.0, 1.0, min(r64.shape))
                _, _, vt = svds(r64, k=args.svd_factors, solver="arpack", v0=start)
                v = vt.T
            t["svd_fit"] = time.perf_counter() - clock
            t["svd_fit_cpu"] = time.process_time() - cpu
            if matrix.shape[0] * matrix.shape[1] > DENSE_SVD_CELLS:
                # The same decomposition as eigenvectors of the Gram operator v -> R^T (R v)
                # (ARPACK eigsh): the engine's formulation, as a bare library call.
                from scipy.sparse.linalg import LinearOperator, eigsh

                clock = time.perf_counter()
                cpu = time.process_time()
                rt = r64.T.tocsr()
                gram = LinearOperator((r64.shape[1],) * 2, matvec=lambda x: rt @ (r64 @ x),
                                      dtype=np.float64)
                start = np.random.default_rng(0).uniform(-1.0, 1.0, r64.shape[1])
                eigsh(gram, k=args.svd_factors, which="LA", v0=start)
                t["svd_fit_gram"] = time.perf_counter() - clock
                t["svd_fit_gram_cpu"] = time.process_time() - cpu
            clock = time.perf_counter()
            cpu = time.process_time()
            (r64[rows] @ v) @ v.T
            t["svd_score"] = time.perf_counter() - clock
            t["svd_score_cpu"] = time.process_time() - cpu

        if "als" not in skip:
            import implicit.als

            clock = time.perf_counter()
            cpu = time.process_time()
            with threadpool_limits(1, "blas"):
                model = implicit.als.AlternatingLeastSquares(
                    factors=als_params["factors"], regularization=als_params["regularization"],
                    alpha=als_params["alpha"], iterations=als_params["iterations"],
                    random_state=als_params["seed"], calculate_training_loss=False,
                )
                model.fit(matrix, show_progress=False)
            t["als_fit"] = time.perf_counter() - clock
            t["als_fit_cpu"] = time.process_time() - cpu
            clock = time.perf_counter()
            cpu = time.process_time()
            np.asarray(model.user_factors)[rows] @ np.asarray(model.item_factors).T
            t["als_score"] = time.perf_counter() - clock
            t["als_score_cpu"] = time.process_time() - cpu

        if "knn" not in skip:
            from implicit.nearest_neighbours import CosineRecommender

            clock = time.perf_counter()
            cpu = time.process_time()
            knn = CosineRecommender(K=args.item_neighbors, num_threads=1)
            knn.fit(matrix, show_progress=False)
            (matrix[rows] @ knn.similarity).toarray()
            t["itemknn_ref"] = time.perf_counter() - clock
            t["itemknn_ref_cpu"] = time.process_time() - cpu

            clock = time.perf_counter()
            cpu = time.process_time()
            item_users = matrix.T.tocsr()
            n = args.user_neighbors
            block = max(1, 8_000_000 // matrix.shape[0])
            for b in range(0, len(rows), block):
                part = rows[b:b + block]
                overlap = (matrix[part] @ item_users).toarray()
                overlap[np.arange(len(part)), part] = 0
                nbrs = np.argpartition(-overlap, min(n, overlap.shape[1] - 1), axis=1)[:, :n]
                w = sp.csr_matrix((np.ones(nbrs.size, np.float32),
                                   (np.repeat(np.arange(len(part)), n), nbrs.ravel())),
                                  shape=(len(part), matrix.shape[0]))
                (w @ matrix).toarray()
            t["userknn_ref"] = time.perf_counter() - clock
            t["userknn_ref_cpu"] = time.process_time() - cpu

        for key, value in t.items():
            totals[key] = totals.get(key, 0.0) + value
        folds.append({"fold": f, "n_eligible": int(len(eligible)), **t})
    Path(args.out).write_text(json.dumps({"totals": totals, "folds": folds}, indent=1))


if __name__ == "__main__":
    main()
