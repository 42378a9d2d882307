"""The contract test kit: the checks a model must pass before SW-EVAL evaluates it.

Every built-in algorithm passes them (``tests/algorithms/test_contract.py``); run them on your
own :class:`~sweval.algorithms.base.Algorithm` subclass, with the parameters you will evaluate
it with (small ones keep the checks fast)::

    from sweval.testing import check_algorithm

    check_algorithm(MyModel, {"factors": 8})   # AssertionError naming the check that failed

or one pytest test per check::

    import pytest
    from sweval.testing import CHECKS

    @pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
    def test_my_model_keeps_the_contract(check):
        check(MyModel, {"factors": 8})

The checks (each ``check(algorithm, params=None)``; ``algorithm`` is a class or a registered
name; the model is built as ``algorithm(**params)``, i.e. validated by its ``Config``):

- :func:`check_scores_and_lists`: ``score`` gives finite (rows × training items) scores; lists
  hold only unseen training items, no repeats, padding (-1) only at the end, full whenever
  enough candidates exist; each list is the model's own scores ranked by score, ties by item
  id; folds with one user, one item, users with one transaction and items with one user work.
- :func:`check_deterministic`: two fresh models with the same parameters (seed included) give
  identical lists on every fold.
- :func:`check_no_future_data`: transactions planted at and after each fold's cut-off t_f (on
  known items, on new items, by known and new users, at exactly t_f and later) change none of
  the fold's lists.
- :func:`check_known_answer`: the checkerboard. User u consumed every item of its own colour
  (u ≡ i mod 2) except item u; a personalised model must rank item u first for every u. Every
  item is equally popular there, all at the same instant, so a model whose scores are the same
  for every user (``user_independent``) must tie them all and list unseen items by id.
- :func:`check_pickling`: a fresh and a fitted model survive ``pickle`` and ``cloudpickle``
  (how Dask ships them to workers) and give the same lists afterwards.
- :func:`check_serving` and :func:`check_updates` (:mod:`sweval.testing_retraining`): a model
  that serves later windows (``_serve``) lists only the fit's unseen items and keeps its fitted
  parameters; one that updates (``_update``) is unchanged by an empty delta, never sees the
  future through an update, and with ``exact_update`` equals a refit.

The data are small synthetic logs (:func:`random_log`), evaluated through the engine exactly as
``sweval run`` evaluates them (:func:`sweval.evaluators.units.engine.evaluate_unit`).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from sweval.algorithms.base import Algorithm
from sweval.algorithms.registry import build_algorithm
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import Fold, build_folds
from sweval.evaluators.protocols.windows import WindowSpec
from sweval.evaluators.units.engine import evaluate_unit
from sweval.testing_retraining import check_serving, check_updates

__all__ = [
    "CHECKS",
    "check_algorithm",
    "check_deterministic",
    "check_known_answer",
    "check_no_future_data",
    "check_pickling",
    "check_scores_and_lists",
    "check_serving",
    "check_updates",
    "fold_lists",
    "random_log",
]

DAY = 86_400
#: Start of the synthetic logs: 2024-01-01T00:00:00Z.
T0 = 1_704_067_200
#: Every synthetic log is cut into daily folds from this day on (explicit, so that transactions
#: planted after the log's end cannot move the windows).
FIRST_TEST_DAY = 3
N_FOLDS = 3
#: List length asked of the models (longer than the candidates of most users: padding shows).
K = 25

AlgorithmLike = type[Algorithm] | str
Params = Mapping[str, Any] | None
Lists = dict[Any, list[Any]]


# ---------------------------------------------------------------------------------- data
def log_of(rows: list[tuple[Any, Any, int]], *, dedup: str = "first") -> InteractionLog:
    """An :class:`InteractionLog` of (user, item, epoch seconds) tuples."""
    frame = pd.DataFrame(rows, columns=["user", "item", "timestamp"])
    return InteractionLog.from_frame(frame, dedup=dedup)


def random_log(seed: int, *, dedup: str = "first") -> InteractionLog:
    """Six days from :data:`T0`: 25 users, 20 items, skewed popularity.

    Items 15..19 first appear on day 4 (new items mid-log); users 20..24 have a single
    transaction; with ``dedup="none"`` some pairs repeat. Folds: :func:`folds_of`.
    """
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, 16)
    popularity /= popularity.sum()
    rows = []
    for user in range(20):
        n = int(rng.integers(2, 9))
        items = rng.choice(15, size=n, replace=False, p=popularity)
        rows += [(user, int(i), T0 + int(rng.integers(0, 6 * DAY))) for i in items]
    rows += [(20 + j, int(rng.integers(0, 15)), T0 + int(rng.integers(0, 6 * DAY)))
             for j in range(5)]
    late = rng.integers(4 * DAY, 6 * DAY, 5)
    rows += [(int(rng.integers(0, 25)), 15 + j, T0 + int(late[j])) for j in range(5)]
    if dedup == "none":
        rows += [(u, i, t + int(rng.integers(1, DAY))) for u, i, t in rows[: len(rows) // 4]]
    return log_of(rows, dedup=dedup)


def folds_of(log: InteractionLog, *, n_folds: int = N_FOLDS, start: int | None = None,
             u_min: int = 1) -> list[Fold]:
    """The non-skipped daily folds of ``log``, the first test window at ``start`` (default:
    day :data:`FIRST_TEST_DAY` of the synthetic logs)."""
    first = T0 + FIRST_TEST_DAY * DAY if start is None else start
    spec = WindowSpec(width_s=DAY, n_folds=n_folds, start=first)
    return [fold for fold in build_folds(log, spec, u_min=u_min) if not fold.skipped]


def build(algorithm: AlgorithmLike, params: Params = None) -> Algorithm:
    """A fresh model: ``algorithm(**params)``; a name is looked up in the registry."""
    if isinstance(algorithm, str):
        return build_algorithm(algorithm, dict(params or {}))
    return algorithm(**dict(params or {}))


def fold_lists(model: Algorithm, log: InteractionLog, fold: Fold, k: int = K) -> Lists:
    """Fit ``model`` on the fold's training data and return each eligible user's top-k list,
    by original ids: ``{user id: [item id or None (no more candidates), ...]}``."""
    result = evaluate_unit(log, fold, model, ks=[k], keep_lists=True)
    assert result.recommended is not None
    return _by_id(log, result.users, result.recommended)


def _by_id(log: InteractionLog, users: np.ndarray, items: np.ndarray) -> Lists:
    return {
        _plain(log.user_ids[user]): [None if c < 0 else _plain(log.item_ids[c]) for c in row]
        for user, row in zip(users, items, strict=True)
    }


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value (ids compare and print as the user wrote them)."""
    return value.item() if isinstance(value, np.generic) else value


# -------------------------------------------------------------------------------- checks
def check_scores_and_lists(algorithm: AlgorithmLike, params: Params = None) -> None:
    """Scores have the right shape and are finite; lists are well-formed and follow them."""
    for dedup, seed in (("first", 0), ("first", 1), ("none", 2)):
        log = random_log(seed, dedup=dedup)
        folds = folds_of(log)
        assert folds, "the synthetic log has no fold (kit bug)"
        for fold in folds:
            _check_fold(algorithm, params, log, fold, f"random log {seed} (dedup {dedup})")
    for label, rows in _edge_logs().items():
        log = log_of(rows)
        (fold,) = folds_of(log, n_folds=1, start=T0 + DAY)
        _check_fold(algorithm, params, log, fold, label)


def _check_fold(algorithm: AlgorithmLike, params: Params, log: InteractionLog, fold: Fold,
                label: str) -> None:
    where = f"{label}, fold at t_f={fold.t_start}"
    train = fold.train_data(log)
    model = build(algorithm, params).fit(train)
    rows = train.rows_of(fold.eligible_users)
    scores = np.asarray(model.score(rows), dtype=np.float64)
    assert scores.shape == (len(rows), train.n_items), (
        f"{where}: score(rows) has shape {scores.shape}, expected (rows, training items) = "
        f"{(len(rows), train.n_items)}"
    )
    assert np.isfinite(scores).all(), f"{where}: score(rows) holds NaN or infinite values"
    if model.user_independent:
        differ = np.flatnonzero((scores != scores[:1]).any(axis=1))
        assert len(differ) == 0, (
            f"{where}: the model declares user_independent = True, but score(rows) gives row "
            f"{int(differ[0]) if len(differ) else 0} other scores than row 0; the engine ranks "
            "row 0's scores for every user: set user_independent = False"
        )
    k = train.n_items + 1  # every candidate, then padding
    columns = model.recommend(rows, k)
    assert columns.shape == (len(rows), k), f"{where}: recommend gave shape {columns.shape}"
    seen = train.matrix[rows].toarray() > 0
    expected = _reference_ranking(scores, seen, k)
    for r, (got, want) in enumerate(zip(columns, expected, strict=True)):
        user = log.user_ids[fold.eligible_users[r]]
        real = got[got >= 0]
        assert (got[len(real):] == -1).all(), f"{where}: user {user}: -1 before an item"
        assert len(set(real.tolist())) == len(real), f"{where}: user {user}: an item twice"
        assert not seen[r, real].any(), f"{where}: user {user}: a training item recommended"
        assert len(real) == (~seen[r]).sum(), (
            f"{where}: user {user}: {len(real)} items listed, {(~seen[r]).sum()} candidates"
        )
        assert np.array_equal(got, want), (
            f"{where}: user {user}: the list is not the model's scores ranked by score "
            f"descending, ties by item id: got columns {got.tolist()}, expected {want.tolist()}"
        )
    lists = fold_lists(build(algorithm, params), log, fold)
    train_items = set(log.item_ids[train.item_codes].tolist())
    for user, items in lists.items():
        listed = [i for i in items if i is not None]
        assert set(listed) <= train_items, f"{where}: user {user}: an item absent from training"


def _reference_ranking(scores: np.ndarray, seen: np.ndarray, k: int) -> np.ndarray:
    """Per row: unseen columns by (score descending, column ascending), padded with -1."""
    out = np.full((len(scores), k), -1, dtype=np.int64)
    for r in range(len(scores)):
        candidates = np.flatnonzero(~seen[r])
        order = np.lexsort((candidates, -scores[r, candidates]))
        ranked = candidates[order][:k]
        out[r, : len(ranked)] = ranked
    return out


def _edge_logs() -> dict[str, list[tuple[Any, Any, int]]]:
    """Tiny logs whose fold (test day: T0 + 1 day) stresses the corner cases."""
    test = T0 + DAY
    return {
        "users with one transaction, items with one user": (
            [(0, 1, T0), (1, 2, T0 + 10), (2, 3, T0 + 20), (3, 1, T0 + 30), (3, 4, T0 + 40),
             (4, 5, T0 + 50)] + [(u, 9, test + u) for u in range(5)]
        ),
        "a fold with a single training user": (
            [("a", 1, T0), ("a", 2, T0 + 10), ("a", 3, test + 1)]
        ),
        "a fold with a single training item": (
            [("a", 1, T0), ("b", 1, T0 + 10), ("a", 2, test + 1), ("b", 3, test + 2)]
        ),
    }


def check_deterministic(algorithm: AlgorithmLike, params: Params = None) -> None:
    """Two fresh models with the same parameters give the same lists on every fold."""
    log = random_log(3)
    for fold in folds_of(log):
        _reproducible_lists(algorithm, params, log, fold)


def _reproducible_lists(algorithm: AlgorithmLike, params: Params, log: InteractionLog,
                        fold: Fold) -> Lists:
    """The fold's lists, after checking that a second fresh model gives the same ones (the
    other checks compare lists, so they need that first)."""
    first = fold_lists(build(algorithm, params), log, fold)
    second = fold_lists(build(algorithm, params), log, fold)
    assert first == second, (
        f"fold at t_f={fold.t_start}: two fits with the same parameters gave different "
        "lists; seed every random draw from a parameter (and fix the thread count if the "
        "result depends on it)"
    )
    return first


def check_no_future_data(algorithm: AlgorithmLike, params: Params = None) -> None:
    """Transactions at or after t_f change none of fold f's lists.

    For each fold, the log gets planted transactions from t_f on: at exactly t_f every known
    user consumes the least popular known items, new users consume known items, and new
    items (ids after every known one) are consumed by everybody, up to days after the log's
    end. A model that saw any of it would rank those items differently.
    """
    for seed in (4, 5):
        log = random_log(seed)
        frame = log.to_frame()
        known_items = sorted(set(frame["item"].tolist()))
        counts = frame["item"].value_counts()
        rare = [i for i in sorted(known_items, key=lambda i: (counts[i], i))][:3]
        users = sorted(set(frame["user"].tolist()))
        for fold in folds_of(log):
            t_f = fold.t_start
            planted = [(u, i, t_f) for u in users for i in rare]
            planted += [(1000 + j, rare[j % len(rare)], t_f + 60 * j) for j in range(10)]
            planted += [(u, 2000 + j, t_f + DAY * (1 + j) + 7) for u in users for j in range(3)]
            planted += [(1000 + j, 2000, t_f + 5 * DAY) for j in range(10)]
            rows = list(frame[["user", "item", "timestamp"]].itertuples(index=False, name=None))
            future = log_of(rows + planted)
            (twin,) = [f for f in folds_of(future) if f.t_start == t_f]
            assert twin.train_hi - twin.train_lo == fold.train_hi - fold.train_lo
            before = _reproducible_lists(algorithm, params, log, fold)
            after = fold_lists(build(algorithm, params), future, twin)
            for user, items in before.items():
                assert after.get(user) == items, (
                    f"random log {seed}, fold at t_f={t_f}: user {user}'s list changed when "
                    f"transactions at or after t_f were added: {items} -> {after.get(user)}; "
                    "the model must see nothing at or after the cut-off"
                )


def checkerboard_log(half: int = 5) -> tuple[InteractionLog, dict[Any, Any]]:
    """The checkerboard: 2·``half`` users and items, R[u, i] = 1 iff u ≡ i (mod 2) and i ≠ u,
    every training transaction at the same instant (so every item is equally popular by any
    count, recent or not), then each user consumes item u on the test day (T0 + 1 day).

    Returns the log and each user's known answer for a personalised model: item u.
    """
    n = 2 * half
    rows = [
        (u, i, T0 + DAY // 2)
        for u in range(n) for i in range(n) if (u - i) % 2 == 0 and u != i
    ]  # fmt: skip
    rows += [(u, u, T0 + DAY + u) for u in range(n)]
    return log_of(rows), {u: u for u in range(n)}


def check_known_answer(algorithm: AlgorithmLike, params: Params = None) -> None:
    """On the checkerboard, a personalised model ranks each user's withheld same-colour item
    first; a user-independent one ties every item and lists the unseen ones by id."""
    log, answer = checkerboard_log()
    (fold,) = folds_of(log, n_folds=1, start=T0 + DAY)
    model = build(algorithm, params)
    lists = fold_lists(model, log, fold, k=len(answer))
    for user, items in lists.items():
        if model.user_independent:
            seen = {i for i in answer if (user - i) % 2 == 0 and i != user}
            want = sorted(set(answer) - seen)
            assert [i for i in items if i is not None] == want, (
                f"checkerboard: every item is equally popular, so a user-independent model "
                f"must list user {user}'s unseen items by id {want}, got {items}"
            )
        else:
            assert items[0] == answer[user], (
                f"checkerboard: user {user} consumed every item of its colour but {answer[user]}"
                f", which should come first; got {items}"
            )


def check_pickling(algorithm: AlgorithmLike, params: Params = None) -> None:
    """A fresh and a fitted model round-trip through pickle and cloudpickle unchanged."""
    import cloudpickle

    log = random_log(6)
    fold = folds_of(log)[-1]
    train = fold.train_data(log)
    rows = train.rows_of(fold.eligible_users)
    expected = _reproducible_lists(algorithm, params, log, fold)
    for dumps, loads, how in ((pickle.dumps, pickle.loads, "pickle"),
                              (cloudpickle.dumps, cloudpickle.loads, "cloudpickle")):
        fresh = loads(dumps(build(algorithm, params)))
        assert fold_lists(fresh, log, fold) == expected, (
            f"a fresh model sent through {how} gives other lists"
        )
        fitted = build(algorithm, params).fit(train)
        before = fitted.recommend(rows, K)
        after = loads(dumps(fitted)).recommend(rows, K)
        assert np.array_equal(before, after), f"a fitted model sent through {how} changed"


#: Every check, in the order :func:`check_algorithm` runs them.
CHECKS: tuple[Callable[[AlgorithmLike, Params], None], ...] = (
    check_scores_and_lists,
    check_deterministic,
    check_no_future_data,
    check_known_answer,
    check_pickling,
    check_serving,
    check_updates,
)


def check_algorithm(algorithm: AlgorithmLike, params: Params = None) -> None:
    """Run every check of :data:`CHECKS`.

    Raises:
        AssertionError: the first check that fails, named in the message.
    """
    for check in CHECKS:
        try:
            check(algorithm, params)
        except AssertionError as exc:
            raise AssertionError(f"{check.__name__}: {exc}") from exc
