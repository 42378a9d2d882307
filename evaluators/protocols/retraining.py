"""Which model serves which window: staleness (``--horizon``) and retraining cadence (``--cadence``).

Folds are numbered f = 0..n−1; a model *fitted at f* is trained on D_{t_f} (the fold's own
training data). Serving window w with the model fitted at f ≤ w gives it an *age* of w − f
windows, (w − f)·tΔ in time.

Staleness, horizon J: every evaluated fold's model serves its own window and the next J::

    fit f:   serves f (age 0, the plain run's unit), f+1, ..., f+J   (the evaluated ones < n)

Cadence c: retrain every c windows, counted from the first evaluated fold f_0; each window is
served by the latest retrain before or at it::

    retrain folds  R_c = {f_0, f_0 + c, f_0 + 2c, ...} ∩ evaluated folds
    window w       served by r_c(w) = max{r ∈ R_c : r ≤ w}, age w − r_c(w)

A retrain fold that is skipped (too few eligible users) has no unit, so the previous model
serves on (its age grows past c − 1). Cadence 1 is the plain run: every window its own model.
"""

from __future__ import annotations

from collections.abc import Sequence


def staleness_pairs(evaluated: Sequence[int], horizon: int) -> list[tuple[int, int]]:
    """(fit fold, served fold) with 1 ≤ served − fit ≤ ``horizon``, both evaluated, by fit
    fold then age."""
    known = set(evaluated)
    return [(fit, fit + age) for fit in sorted(known) for age in range(1, horizon + 1)
            if fit + age in known]


def retrain_folds(evaluated: Sequence[int], cadence: int) -> list[int]:
    """R_c: the evaluated folds among f_0, f_0 + c, f_0 + 2c, ... (see the module docstring)."""
    if cadence < 1:
        raise ValueError(f"a cadence is at least 1 window, got {cadence}")
    folds = sorted(evaluated)
    if not folds:
        return []
    return [fold for fold in folds if (fold - folds[0]) % cadence == 0]


def serving_fold(evaluated: Sequence[int], cadence: int) -> dict[int, int]:
    """Per evaluated window w, r_c(w): the fold whose model serves it under cadence c."""
    retrains = retrain_folds(evaluated, cadence)
    served: dict[int, int] = {}
    latest = None
    for fold in sorted(evaluated):
        if fold in retrains:
            latest = fold
        if latest is not None:
            served[fold] = latest
    return served


def cadence_pairs(evaluated: Sequence[int], cadences: Sequence[int]) -> list[tuple[int, int]]:
    """The (fit fold, served fold) pairs with served > fit the cadences read."""
    pairs = {(fit, window) for cadence in cadences
             for window, fit in serving_fold(evaluated, cadence).items() if window != fit}
    return sorted(pairs)


def served_pairs(evaluated: Sequence[int], horizon: int,
                 cadences: Sequence[int]) -> list[tuple[int, int]]:
    """Every (fit fold, later served fold) pair a run with ``--horizon`` and ``--cadence``
    needs, by fit fold then served fold."""
    return sorted(set(staleness_pairs(evaluated, horizon)) | set(cadence_pairs(evaluated,
                                                                              cadences)))
