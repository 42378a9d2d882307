"""kNN neighbour searches and fits on one fold: user-kNN's plain count against the size-ranked
kernel, item-kNN's plain count against its walk arrays, and both models' fits.

Run on demand (never part of the test suite), from the repository root::

    .venv/bin/python benchmarks/knn_neighbours.py --data /tmp/scale-data/s10.parquet

For the fold (default: the last of ``--folds`` daily windows, ``--u-min`` 100, the scale
series' workload), with its own training matrix and eligible users: the entries each search
walks (the plain count: Σ_{t ∈ I_u} |users(t)|; the ranked kernel: the lists other than the
longest, counted, and the longest, read up to the largest rank counted), a check that both
return the same neighbours and cosines bit for bit, and the process CPU seconds of each,
alternating, ``--repeats`` times (all kernel threads; CPU time survives a shared machine).

Item-kNN (the rows of S for the items of the eligible users' histories, n = ``--item-neighbors``):
the entries walked (Σ_{t ∈ users(j)} |items(t)|) and those left once users of one item are
left out, a check that :func:`top_cosines` on the full transposed incidence and the model's
rows are the same CSR byte for byte, and the CPU seconds of each. Then the CPU seconds of
``fit`` of each model (user-kNN: :class:`RankedSets`; item-kNN: the walk arrays).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sweval.algorithms.knn import ItemKNN, RankedSets, UserKNN, top_cosines
from sweval.data.loaders import load_log
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.windows import WindowSpec


def walked(matrix, ranked: RankedSets, rows) -> tuple[int, int, int]:
    """(plain count's entries, ranked kernel's counted entries, entries read in the longest)."""
    popularity = np.diff(ranked.p_indptr)
    full = counted = read = 0
    for u in rows:
        items = matrix.indices[matrix.indptr[u] : matrix.indptr[u + 1]]
        sizes = popularity[items]
        big = int(np.argmax(sizes))
        full += int(sizes.sum())
        others = [t for i, t in enumerate(items) if i != big]
        counted += int(sizes.sum() - sizes[big])
        if others:
            top = max(ranked.p_ranks[ranked.p_indptr[t + 1] - 1] for t in others)
            lo, hi = ranked.p_indptr[items[big]], ranked.p_indptr[items[big] + 1]
            read += int(np.searchsorted(ranked.p_ranks[lo:hi], top, side="right"))
    return full, counted, read


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--folds", type=int, default=30)
    p.add_argument("--fold", type=int, default=-1, help="fold index (default: the last)")
    p.add_argument("--u-min", type=int, default=100)
    p.add_argument("--neighbors", type=int, default=50)
    p.add_argument("--item-neighbors", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    log = load_log(args.data)
    fold = build_folds(log, WindowSpec(width_s=86_400, n_folds=args.folds), u_min=args.u_min)[
        args.fold
    ]
    train = fold.train_data(log)
    matrix, rows = train.matrix, train.rows_of(fold.eligible_users)
    sizes = np.diff(matrix.indptr).astype(np.float64)
    item_users = matrix.T.tocsr()
    ranked = RankedSets(matrix)
    full, counted, read = walked(matrix, ranked, rows)
    print(f"fold {fold.index}: {matrix.shape[0]:,} users, {matrix.shape[1]:,} items, "
          f"{matrix.nnz:,} pairs, {len(rows):,} eligible users")
    print(f"entries: plain count {full:,}; ranked: counted {counted:,} ({counted / full:.1%}), "
          f"longest list read {read:,} ({read / full:.1%})")
    n = args.neighbors
    plain = top_cosines(rows, matrix, item_users, sizes, sizes, n)
    fast = ranked.top_cosines(rows, n)
    same = all(np.array_equal(getattr(plain, a), getattr(fast, a))
               for a in ("indptr", "indices", "data"))
    print(f"identical neighbours and cosines: {same}")
    for _ in range(args.repeats):
        for name, run in (("plain", lambda: top_cosines(rows, matrix, item_users, sizes, sizes, n)),
                          ("ranked", lambda: ranked.top_cosines(rows, n))):
            cpu = time.process_time()
            run()
            print(f"{name}: {time.process_time() - cpu:.3f} CPU s")

    n_item = args.item_neighbors
    items = np.unique(matrix[rows].indices).astype(np.int64)
    lengths = np.diff(matrix.indptr)
    walks = np.add.reduceat(lengths[item_users.indices], item_users.indptr[:-1])
    walks[np.diff(item_users.indptr) == 0] = 0
    shared = np.where(lengths > 1, lengths, 0)
    walks_shared = np.add.reduceat(shared[item_users.indices], item_users.indptr[:-1])
    walks_shared[np.diff(item_users.indptr) == 0] = 0
    print(f"item-kNN: {len(items):,} items' rows; entries {int(walks[items].sum()):,}, "
          f"without users of one item {int(walks_shared[items].sum()):,}")

    def item_rows(model=None):  # the recommend step's rows of S (fit outside the timing)
        model = model or ItemKNN(n_neighbors=n_item).fit(train)
        cpu = time.process_time()
        model.score_factors(rows)
        return model, time.process_time() - cpu

    def item_plain():
        cpu = time.process_time()
        result = top_cosines(items, item_users, matrix, sizes_i, sizes_i, n_item,
                             sort_columns=False)
        return result, time.process_time() - cpu

    sizes_i = np.diff(item_users.indptr).astype(np.float64)
    plain, fast = item_plain()[0], item_rows()[0].similarity(items)[items]
    plain.sort_indices()  # both sorted: the same rows in any within-row order
    same = all(np.array_equal(getattr(plain, a), getattr(fast, a))
               for a in ("indptr", "indices", "data"))
    print(f"item-kNN identical rows (neighbours and cosines, byte for byte): {same}")
    for _ in range(args.repeats):
        print(f"item plain: {item_plain()[1]:.3f} CPU s")
        print(f"item model: {item_rows()[1]:.3f} CPU s")
    for _ in range(args.repeats):
        for name, model in (("user-kNN fit", UserKNN), ("item-kNN fit", ItemKNN)):
            cpu = time.process_time()
            model().fit(train)
            print(f"{name}: {time.process_time() - cpu:.3f} CPU s")


if __name__ == "__main__":
    main()
