"""item-kNN and user-kNN against slow dense references (plain loops over dense matrices)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sweval_testing import plain_python

from sweval.algorithms.knn import ItemKNN, UserKNN, top_cosines

#: Seeds 89 (user-kNN) and 234 (item-kNN) give candidates whose scores tie exactly but whose
#: float sums differ in the last bit (terms added in another order): without the models' score
#: rounding they would not be ordered by id.
SEEDS = [*range(30), 89, 234]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    norm = math.sqrt(a @ a) * math.sqrt(b @ b)
    return float(a @ b) / norm if norm > 0 else 0.0


def top_neighbours(sims: list[tuple[float, int]], n: int) -> list[tuple[float, int]]:
    """The n largest positive similarities, ties by index ascending (0 keeps all)."""
    sims = sorted((p for p in sims if p[0] > 0), key=lambda p: (-round(p[0], 12), p[1]))
    return sims if n == 0 else sims[:n]


def reference_item_knn(dense: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(S, scores): S(j, i) = cos of columns j, i (i ≠ j), row-pruned; Σ_{j∈I_u} S(j, i)."""
    r = dense.astype(float)
    n_users, n_items = r.shape
    s = np.zeros((n_items, n_items))
    for j in range(n_items):
        sims = [(cosine(r[:, j], r[:, i]), i) for i in range(n_items) if i != j]
        for value, i in top_neighbours(sims, n):
            s[j, i] = value
    scores = np.zeros((n_users, n_items))
    for u in range(n_users):
        for i in range(n_items):
            scores[u, i] = math.fsum(s[j, i] for j in range(n_items) if dense[u, j])
    return s, scores


def reference_user_knn(dense: np.ndarray, n: int, weighting: str) -> np.ndarray:
    r = dense.astype(float)
    n_users, n_items = r.shape
    scores = np.zeros((n_users, n_items))
    for u in range(n_users):
        sims = [(cosine(r[u], r[v]), v) for v in range(n_users) if v != u]
        neighbours = top_neighbours(sims, n)
        for i in range(n_items):
            weights = [1.0 if weighting == "count" else value for value, _ in neighbours]
            scores[u, i] = math.fsum(w * r[v, i] for w, (_, v) in zip(weights, neighbours))
    return scores


def random_case(lib, seed: int):
    rng = np.random.default_rng(seed)
    n_users, n_items = int(rng.integers(2, 20)), int(rng.integers(2, 14))
    dense = lib.random_binary(rng, n_users, n_items, float(rng.uniform(0.1, 0.5)))
    return dense, lib.train_from_dense(dense)


@pytest.mark.parametrize("n_neighbors", [0, 1, 2, 4])
def test_item_knn_matches_dense_reference(lib, n_neighbors):
    for seed in SEEDS:
        dense, train = random_case(lib, seed)
        rows = np.arange(train.n_users)
        model = ItemKNN(n_neighbors=n_neighbors).fit(train)
        s_ref, scores_ref = reference_item_knn(dense, n_neighbors)
        np.testing.assert_allclose(model.similarity().toarray(), s_ref, atol=1e-12)
        np.testing.assert_allclose(model.score(rows), scores_ref, atol=1e-9)
        k = train.n_items
        expected = lib.reference_ranking(scores_ref, dense, k)
        np.testing.assert_array_equal(model.recommend(rows, k), expected, err_msg=f"{seed=}")


@pytest.mark.parametrize("weighting", ["count", "cosine"])
@pytest.mark.parametrize("n_neighbors", [0, 1, 2, 5])
def test_user_knn_matches_dense_reference(lib, n_neighbors, weighting):
    for seed in SEEDS:
        dense, train = random_case(lib, seed)
        rows = np.arange(train.n_users)
        model = UserKNN(n_neighbors=n_neighbors, weighting=weighting).fit(train)
        scores_ref = reference_user_knn(dense, n_neighbors, weighting)
        np.testing.assert_allclose(model.score(rows), scores_ref, atol=1e-9)
        k = train.n_items
        expected = lib.reference_ranking(scores_ref, dense, k)
        np.testing.assert_array_equal(model.recommend(rows, k), expected, err_msg=f"{seed=}")


@pytest.mark.parametrize("density", [1.0, 0.9, 0.5])
def test_neighbour_kernels_stay_in_their_buffers(lib, monkeypatch, density):
    """The kernels' branch-free stores write one slot past what they keep; run as plain Python
    (numpy checks every index, compiled numba does not), on matrices where a user or item
    overlaps every other one, they give the compiled lists and no IndexError."""
    from sweval.algorithms import neighbour_kernels, ranked_neighbour_kernels

    rng = np.random.default_rng(7)
    cases = [np.ones(shape, dtype=bool) for shape in [(1, 3), (4, 5), (3, 1)]]
    cases += [lib.random_binary(rng, int(rng.integers(2, 8)), int(rng.integers(2, 8)), density)
              for _ in range(12)]
    models = [ItemKNN(n_neighbors=2), ItemKNN(n_neighbors=0), UserKNN(n_neighbors=2),
              UserKNN(n_neighbors=0)]
    compiled = [[type(m)(**m.config.model_dump()).fit(lib.train_from_dense(d))
                 .recommend(np.arange(d.shape[0]), 3) for m in models] for d in cases]
    for module, name in ((neighbour_kernels, "cosine_neighbours"),
                         (ranked_neighbour_kernels, "ranked_cosine_neighbours")):
        monkeypatch.setattr(module, name, plain_python(getattr(module, name)))
    for dense, expected in zip(cases, compiled, strict=True):
        train = lib.train_from_dense(dense)
        for model, lists in zip(models, expected, strict=True):
            got = type(model)(**model.config.model_dump()).fit(train)
            np.testing.assert_array_equal(got.recommend(np.arange(train.n_users), 3), lists)


def test_item_knn_pruning_ties_by_item_id(lib):
    # Item 0 has the same cosine 1/sqrt(3) with items 1, 2 and 3: n=2 keeps 1 and 2.
    dense = np.zeros((3, 4), dtype=bool)
    dense[:, 0] = True
    dense[[0, 1, 2], [1, 2, 3]] = True
    model = ItemKNN(n_neighbors=2).fit(lib.train_from_dense(dense))
    row = model.similarity(np.array([0])).getrow(0)
    assert row.indices.tolist() == [1, 2]
    np.testing.assert_allclose(row.data, [1 / math.sqrt(3)] * 2)


def test_user_knn_neighbour_ties_by_user_id(lib):
    # Users 1, 2, 3 are equally similar to user 0; n=2 picks users 1 and 2, whose extra items
    # are 3 and 2. Item 1 (user 3's) scores 0, so user 0 gets [2, 3, 1].
    dense = np.zeros((4, 4), dtype=bool)
    dense[:, 0] = True
    dense[[1, 2, 3], [3, 2, 1]] = True
    model = UserKNN(n_neighbors=2).fit(lib.train_from_dense(dense))
    assert model.neighbours(np.array([0])).indices.tolist() == [1, 2]
    assert model.recommend(np.array([0]), 3).tolist() == [[2, 3, 1]]


def test_item_knn_lazy_rows_equal_whole_matrix(lib):
    dense, train = random_case(lib, 123)
    rows = np.arange(train.n_users)
    whole = ItemKNN(n_neighbors=3).fit(train)
    expected = whole.score(rows)
    piecewise = ItemKNN(n_neighbors=3).fit(train)
    parts = [piecewise.score(rows[i : i + 2]) for i in range(0, len(rows), 2)]
    np.testing.assert_array_equal(np.vstack(parts), expected)
    np.testing.assert_array_equal(
        piecewise.similarity().toarray(), whole.similarity().toarray()
    )


def test_user_knn_scores_only_requested_rows(lib):
    dense, train = random_case(lib, 7)
    model = UserKNN(n_neighbors=3).fit(train)
    all_rows = model.score(np.arange(train.n_users))
    picked = np.array([train.n_users - 1, 0])
    np.testing.assert_array_equal(model.score(picked), all_rows[picked])


@settings(max_examples=80, deadline=None)
@given(
    data=st.lists(
        st.lists(st.booleans(), min_size=6, max_size=6), min_size=1, max_size=8
    ),
    n=st.integers(0, 7),
)
def test_top_cosines_with_many_ties(data, n):
    """The compiled count-cosine-select pass against cosines of dense columns, ties by id."""
    dense = np.array(data, dtype=float)  # users × items; rows of the result are items
    sizes = dense.sum(axis=0)
    items = np.flatnonzero(sizes > 0)
    incidence = sp.csr_matrix(dense)
    got = top_cosines(items, incidence.T.tocsr(), incidence, sizes, sizes, n).toarray()
    expected = np.zeros_like(got)
    for r, j in enumerate(items):
        sims = [(cosine(dense[:, j], dense[:, i]), i) for i in range(dense.shape[1]) if i != j]
        for value, i in top_neighbours(sims, n):
            expected[r, i] = value
    np.testing.assert_allclose(got, expected, atol=1e-15)
    np.testing.assert_array_equal(got != 0, expected != 0)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(6))
def test_top_cosines_wide_rows_take_the_sampled_and_dense_paths(n, seed):
    """Rows with far more candidates than n (the sampled threshold pre-filter) and rows whose
    walk covers most columns (the dense count), with many exact ties from copied columns."""
    from sweval.algorithms.neighbour_kernels import DENSE_ROW_SHARE, SAMPLE_PER_KEPT

    rng = np.random.default_rng(seed)
    dense = (rng.random((12, 120)) < rng.uniform(0.25, 0.5)).astype(float)
    dense[:, 60:90] = dense[:, 0:30]  # equal columns: equal cosines, ties by id
    sizes = dense.sum(axis=0)
    items = np.flatnonzero(sizes > 0)
    incidence = sp.csr_matrix(dense)
    candidates = ((dense.T @ dense)[items] > 0).sum(axis=1) - 1
    walks = (dense[:, items] * dense.sum(axis=1)[:, None]).sum(axis=0)
    assert (candidates > 2 * SAMPLE_PER_KEPT * n).any()  # the pre-filter runs
    assert (walks >= DENSE_ROW_SHARE * dense.shape[1]).any()  # and the dense count
    expected = np.zeros((len(items), dense.shape[1]))
    for r, j in enumerate(items):
        sims = [(cosine(dense[:, j], dense[:, i]), i) for i in range(dense.shape[1]) if i != j]
        for value, i in top_neighbours(sims, n):
            expected[r, i] = value
    for sort_columns in (True, False):
        got = top_cosines(items, incidence.T.tocsr(), incidence, sizes, sizes, n,
                          sort_columns=sort_columns)
        assert got.has_sorted_indices == sort_columns
        np.testing.assert_allclose(got.toarray(), expected, atol=1e-15)
        np.testing.assert_array_equal(got.toarray() != 0, expected != 0)


def test_selection_on_squares_keeps_entries_whose_cosine_ties_after_rounding():
    """Two squared cosines one ulp apart can have the same square root: the cosines then tie
    and the lower column must win, though its square was smaller."""
    from sweval.algorithms.neighbour_kernels import _keep_near, _select_best

    low = next(q for q in np.linspace(0.1, 0.9, 1000)
               if np.sqrt(q) == np.sqrt(np.nextafter(q, 1.0)))
    high = np.nextafter(low, 1.0)
    cols = np.array([5, 2, 9], dtype=np.int64)
    vals = np.array([high, low, 0.01])
    _select_best(cols, vals, 3, 1)
    assert cols[0] == 5  # by squares, column 5 is ahead
    left = _keep_near(cols, vals, 3, 1)
    assert left == 2 and set(cols[:2]) == {2, 5}  # the near-tie stays, 0.01 goes
    vals[:left] = np.sqrt(vals[:left])
    _select_best(cols, vals, left, 1)
    assert cols[0] == 2  # equal cosines: the lower column


def test_the_kernel_files_define_the_same_order():
    """Each kernel file has its own copy of the order and of the selection helpers it calls
    (numba's cache only watches the file that defines a kernel): the copies must not drift
    apart."""
    import inspect

    from sweval.algorithms import neighbour_kernels, ranked_neighbour_kernels, ranking_kernels

    def source(module, name):
        return inspect.getsource(plain_python(getattr(module, name)))

    for module in (ranked_neighbour_kernels, ranking_kernels):
        assert source(module, "_comes_before") == source(neighbour_kernels, "_comes_before")
    for name in ("_swap", "_select_best", "_reserve"):
        assert source(ranked_neighbour_kernels, name) == source(neighbour_kernels, name)


def spec_user_neighbours(dense: np.ndarray, u: int, n: int) -> list[tuple[int, float]]:
    """SPEC §5 literally, in exact arithmetic: the n users v ≠ u with the largest
    cos = c / sqrt(b_u · b_v) > 0, ties by user id; cosines as the models compute them."""
    from fractions import Fraction

    sizes = dense.sum(axis=1).astype(int)
    overlaps = (dense.astype(int) @ dense[u].astype(int)).tolist()
    found = [(Fraction(c * c, int(sizes[u] * sizes[v])), v)  # cos², exact
             for v, c in enumerate(overlaps) if v != u and c > 0]
    found.sort(key=lambda p: (-p[0], p[1]))
    kept = found if n == 0 else found[:n]
    return [(v, math.sqrt(float(overlaps[v] ** 2) / float(sizes[u] * sizes[v])))
            for _, v in sorted(kept, key=lambda p: p[1])]


#: Item draws for the tie-heavy logs: items 0-2 are drawn far more often (popular), so most
#: users hold one or two of them and the same few sizes: many exactly equal cosines.
_tie_items = st.one_of(st.integers(0, 2), st.integers(0, 2), st.integers(0, 9))


@settings(max_examples=120, deadline=None)
@given(
    users=st.lists(st.sets(_tie_items, min_size=1, max_size=5), min_size=2, max_size=40),
    n=st.sampled_from([1, 2, 5, 0]),
    weighting=st.sampled_from(["count", "cosine"]),
)
def test_user_knn_neighbours_equal_the_spec_on_tie_heavy_logs(users, n, weighting):
    """The size-ranked neighbour search against SPEC in exact arithmetic: the same neighbours
    (ties by user id) and bit-identical cosines, on logs of many tiny users and a few popular
    items; every row, both weightings (count puts 1 where cosine puts the cosine)."""
    from sweval.algorithms.train_data import TrainData

    n_items = 1 + max(max(items) for items in users)
    dense = np.zeros((len(users), n_items), dtype=bool)
    for u, items in enumerate(users):
        dense[u, sorted(items)] = True
    pairs = np.nonzero(dense)
    train = TrainData.from_codes(
        pairs[0], pairs[1], n_users=dense.shape[0], n_items=n_items,
        timestamps=np.arange(len(pairs[0]), dtype=np.int64), cutoff=len(pairs[0]),
    )  # fmt: skip
    present = np.flatnonzero(dense.any(axis=0))  # compact columns: items nobody holds drop out
    dense = dense[:, present]
    model = UserKNN(n_neighbors=n, weighting=weighting).fit(train)
    assert model.ranked_ is not None
    rows = np.arange(len(users))
    neighbours = model.neighbours(rows)
    weights, _ = model.score_factors(rows)
    for u in rows:
        expected = spec_user_neighbours(dense, int(u), n)
        row = neighbours.getrow(u)
        assert row.indices.tolist() == [v for v, _ in expected]
        assert row.data.tolist() == [cos for _, cos in expected]  # bit for bit
        weight_row = weights.getrow(u)
        assert weight_row.indices.tolist() == [v for v, _ in expected]
        assert weight_row.data.tolist() == [
            1.0 if weighting == "count" else cos for _, cos in expected
        ]


def test_ranked_sets_fall_back_for_sets_beyond_the_exact_float_bound():
    """Sizes above RANKED_MAX_SIZE (6·K³ ≥ 2⁵³) could make two different cosines equal floats:
    user-kNN then counts with the plain kernel."""
    from sweval.algorithms.knn import RANKED_MAX_SIZE, RankedSets

    assert 6 * RANKED_MAX_SIZE**3 < 2**53
    from sweval.algorithms.train_data import TrainData

    assert 6 * RANKED_MAX_SIZE**3 < 2**53 <= 6 * (RANKED_MAX_SIZE + 1000) ** 3
    n_items = RANKED_MAX_SIZE + 1
    users = np.concatenate(([0] * n_items, [1, 1, 2]))
    items = np.concatenate((np.arange(n_items), [0, 1, 1]))
    train = TrainData.from_codes(
        users, items, n_users=3, n_items=n_items,
        timestamps=np.arange(len(users), dtype=np.int64), cutoff=len(users),
    )  # fmt: skip
    assert not RankedSets.usable(train.matrix)
    model = UserKNN(n_neighbors=1).fit(train)
    assert model.ranked_ is None
    got = model.neighbours(np.array([0, 1, 2]))
    assert got.indices.tolist() == [1, 2, 1]  # 0: 2/sqrt(2n) beats 1/sqrt(n); 1, 2: 1/sqrt(2)
    assert got.data.tolist() == [math.sqrt(4 / (2 * n_items)), math.sqrt(1 / 2),
                                 math.sqrt(1 / 2)]


@settings(max_examples=60, deadline=None)
@given(sets=st.lists(st.sets(st.integers(0, 7), max_size=6), min_size=1, max_size=30))
def test_ranked_postings_list_the_ranks_of_the_holding_sets_ascending(sets):
    """Per element, the ranks (size, index order) of the sets holding it, empty sets ranked
    too: the counting-sort construction against a plain sort."""
    from sweval.algorithms.incidence_kernels import ranked_postings, size_order

    indptr = np.concatenate(([0], np.cumsum([len(s) for s in sets]))).astype(np.int64)
    indices = np.array([t for s in sets for t in sorted(s)], dtype=np.int32)
    order, rank_of = size_order(indptr)
    assert order.tolist() == sorted(range(len(sets)), key=lambda s: (len(sets[s]), s))
    p_indptr, p_ranks = ranked_postings(indptr, indices, 8)
    for t in range(8):
        expected = sorted(int(rank_of[s]) for s in range(len(sets)) if t in sets[s])
        assert p_ranks[p_indptr[t] : p_indptr[t + 1]].tolist() == expected


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.sets(st.integers(0, 5), max_size=4), min_size=1, max_size=20))
def test_shared_incidence_leaves_out_the_rows_of_one_column(rows):
    """Item-kNN's walk arrays: the rows of length ≥ 2, renumbered in order, and per column the
    kept rows holding it; column sizes count every row."""
    from sweval.algorithms.incidence_kernels import shared_incidence

    indptr = np.concatenate(([0], np.cumsum([len(r) for r in rows]))).astype(np.int32)
    indices = np.array([s for r in rows for s in sorted(r)], dtype=np.int32)
    kept = [sorted(r) for r in rows if len(r) > 1]
    n_pairs = sum(len(r) for r in kept)
    b_indices = np.empty(n_pairs, dtype=np.uint16)
    a_indices = np.empty(n_pairs, dtype=np.int32)
    sizes, a_indptr, b_indptr = shared_incidence(indptr, indices, 6, b_indices, a_indices)
    assert sizes.tolist() == [sum(s in r for r in rows) for s in range(6)]
    assert [b_indices[b_indptr[k] : b_indptr[k + 1]].tolist() for k in range(len(kept))] == kept
    for s in range(6):
        expected = [k for k, r in enumerate(kept) if s in r]
        assert a_indices[a_indptr[s] : a_indptr[s + 1]].tolist() == expected
