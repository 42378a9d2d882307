"""The contract kit's checks of a model that serves later windows or is updated (:mod:`sweval.testing`).

- :func:`check_serving` (models with ``_serve``): a fitted model served a later history lists only
  the fit's items, none of the history's own, and serving leaves its fitted parameters alone
  (served one history, another, then the first again: the first lists again).
- :func:`check_updates` (models with ``_update``): an empty delta changes nothing; transactions at
  or after the new cut-off, planted in the log, change none of the updated model's lists (the
  delta never holds them); a model that declares ``exact_update`` equals a fit on the later
  data after one and after two updates.

A model without ``_serve`` or ``_update`` passes them trivially: the engine refuses to serve or
update it (``--horizon``, ``--update``) and refits instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sweval.algorithms.base import Algorithm
from sweval.algorithms.serving import Delta, serving_history
from sweval.algorithms.train_data import TrainData
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import Fold

K = 25


def _lists(model: Algorithm, data: TrainData, log: InteractionLog,
           users: np.ndarray) -> dict[Any, list[Any]]:
    """Each user's top-K list by ids, ranked from ``data``'s rows."""
    from sweval.testing import _by_id

    columns = model.recommend(data.rows_of(users), K)
    items = np.where(columns >= 0, data.item_codes[np.maximum(columns, 0)], -1)
    return _by_id(log, users, items)


def _delta(log: InteractionLog, since: int, later: Fold) -> Delta:
    return Delta.between(later.train_data(log), since, n_users=log.n_users, n_items=log.n_items)


def check_serving(algorithm: Any, params: Any = None) -> None:
    """Served lists hold only the fit's items, none of the served history's, and serving
    changes no fitted parameter."""
    from sweval.testing import build, folds_of, random_log

    model_class = type(build(algorithm, params))
    if not model_class.can_serve():
        return
    for seed in (7, 8):
        log = random_log(seed)
        first, middle, last = folds_of(log)
        fit = first.train_data(log)
        model = build(algorithm, params).fit(fit)
        histories = [serving_history(fit.item_codes, fold.train_data(log))
                     for fold in (last, middle, last)]
        served = []
        known = set(fit.item_codes.tolist())
        for history, fold in zip(histories, (last, middle, last), strict=True):
            model.serve(history)
            rows = history.rows_of(fold.eligible_users)
            columns = model.recommend(rows, K)
            for row, listed in zip(rows, columns, strict=True):
                chosen = set(history.item_codes[listed[listed >= 0]].tolist())
                seen = set(history.item_codes[history.matrix[row].indices].tolist())
                assert chosen <= known, f"random log {seed}: an item unknown at the fit listed"
                assert not chosen & seen, f"random log {seed}: an item of the history listed"
            served.append(columns)
        assert np.array_equal(served[0], served[2]), (
            f"random log {seed}: serving another history changed the model's lists of the first "
            "one; serve must leave the fitted parameters as they are"
        )


def check_updates(algorithm: Any, params: Any = None) -> None:
    """An empty delta changes nothing; planted future transactions change no updated list; an
    ``exact_update`` model equals a refit after one and two updates."""
    from sweval.testing import build, folds_of, log_of, random_log

    model_class = type(build(algorithm, params))
    if not model_class.can_update():
        return
    for seed in (9, 10):
        log = random_log(seed, dedup="none" if seed == 10 else "first")
        first, middle, last = folds_of(log)
        fit = first.train_data(log)
        model = build(algorithm, params).fit(fit)
        before = _lists(model, fit, log, first.eligible_users)
        model.update(Delta(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                           since=fit.cutoff, cutoff=fit.cutoff, n_users=log.n_users,
                           n_items=log.n_items))
        assert _lists(model, model.train_, log, first.eligible_users) == before, (
            f"random log {seed}: an empty delta changed the model's lists")
        model.update(_delta(log, fit.cutoff, middle))
        assert model.train_ is not None and model.train_.cutoff == middle.t_start
        updated = _lists(model, model.train_, log, middle.eligible_users)
        frame = log.to_frame()
        rows = list(frame[["user", "item", "timestamp"]].itertuples(index=False, name=None))
        items = sorted(set(frame["item"].tolist()))[:3]
        users = sorted(set(frame["user"].tolist()))
        planted = [(user, item, middle.t_start) for user in users for item in items]
        planted += [(user, 9000 + j, middle.t_start + 3600 * j) for j, user in enumerate(users)]
        future = log_of(rows + planted, dedup="none" if seed == 10 else "first")
        twin_first, twin_middle = folds_of(future)[:2]
        assert twin_middle.t_start == middle.t_start
        twin = build(algorithm, params).fit(twin_first.train_data(future))
        twin.update(_delta(future, twin_first.t_start, twin_middle))
        assert _lists(twin, twin.train_, future, middle.eligible_users) == updated, (
            f"random log {seed}: transactions at or after the update's cut-off changed the "
            "updated model's lists")
        if not getattr(model_class, "exact_update", False):
            continue
        refit = build(algorithm, params).fit(middle.train_data(log))
        assert updated == _lists(refit, refit.train_, log, middle.eligible_users), (
            f"random log {seed}: fit + update differs from a fit on the later data")
        model.update(_delta(log, middle.t_start, last))
        refit = build(algorithm, params).fit(last.train_data(log))
        assert _lists(model, model.train_, log, last.eligible_users) == \
            _lists(refit, refit.train_, log, last.eligible_users), (
            f"random log {seed}: fit + two updates differs from a fit on the later data")
