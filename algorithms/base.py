"""The public algorithm API: the interface every model implements (the data it sees:
:mod:`algorithms.train_data`).

What a model returns, one of (the engine ranks in every case):

- dense scores for a batch of rows (:meth:`Algorithm.score`);
- sparse scores as factors ``H @ W`` (:meth:`Algorithm.score_factors`, ``sparse_scores``);
- its own candidates with their scores (:meth:`Algorithm.score_candidates`, ``sparse_scores``):
  a sparse row per user; items it leaves out score 0.

Recommending (SPEC §3) is always the engine's: candidates are the training columns minus the
user's own training row; ranking is by score descending, ties by column ascending
(:mod:`algorithms.ranking`). A model never returns a list, so it can neither recommend a seen
item nor break a tie another way.

The thread budget of a unit is :data:`sweval.algorithms.threads.unit_threads` (None: use every
core), which the engine sets per fold task; the device is the model's own choice (a ``device``
parameter, as ALS has), reported through :attr:`Algorithm.device` into ``units.csv``.
"""

from __future__ import annotations

import types
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, Union, get_args, get_origin

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from sweval.algorithms.ranking import (
    csr_problem,
    top_k,
    top_k_global,
    top_k_of_product,
    top_k_unseen,
)
from sweval.algorithms.scores import snap_scores
from sweval.algorithms.train_data import TrainData

if TYPE_CHECKING:
    from sweval.algorithms.serving import Delta

#: Dense score blocks are at most this many floats (8 MB): the user batch adapts to the
#: catalogue, and a block this size is recycled by the allocator instead of page-faulting.
SCORE_BLOCK_ELEMENTS = 1_000_000




#: A model's learned state carried from one fold to the next (warm start): named arrays, with
#: the global user and item codes their rows belong to.
WarmState = dict[str, NDArray[Any]]


class AlgorithmConfig(BaseModel):
    """Base of every algorithm's hyper-parameters: immutable, no unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _booleans_only_where_boolean(cls, value: Any, info: ValidationInfo) -> Any:
        """``true``/``false`` only for a parameter that takes a boolean: pydantic would read
        ``--set item-knn.n_neighbors=true`` as 1."""
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and not _takes_bool(field.annotation):
            raise ValueError(f"{str(value).lower()} is a boolean, not a value of this parameter")
        return value


def _takes_bool(annotation: Any) -> bool:
    """Whether a parameter's type admits a bool (bool, Any, a union or Literal with one)."""
    if annotation in (bool, Any):
        return True
    origin = get_origin(annotation)
    if origin is Literal:
        return any(isinstance(arg, bool) for arg in get_args(annotation))
    if origin in (Union, types.UnionType):
        return any(_takes_bool(arg) for arg in get_args(annotation))
    return False


#: The modules of SW-EVAL's own models, whose score factors need no check (see
#: :meth:`Algorithm._checked_factors`).
_OWN_MODULES = (f"{__package__}.",)


class Algorithm(ABC):
    """A recommender that can be fitted on one fold and asked for scores.

    Subclasses set ``Config`` (a pydantic model of their hyper-parameters, a subclass of
    :class:`AlgorithmConfig`), implement :meth:`_fit` and one of :meth:`score`,
    :meth:`score_factors` or :meth:`score_candidates`, and keep learned state in attributes
    with a trailing underscore. ``name`` (the registry key of built-ins) defaults to the
    class's import path ``module:Class``, also for a subclass of a named class: a model that
    extends ``Pop`` is not ``pop``.

    The engine calls ``fit(train)`` once per fold on a fresh instance, then asks for scores of
    batches of rows; a model must give the same numbers for the same data and parameters
    (seed its randomness from a parameter), and must pickle (Dask workers).
    """

    name: ClassVar[str]
    Config: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    #: True when every user gets the same scores (POP, POP-N): ranking is then done once per fold.
    user_independent: ClassVar[bool] = False
    #: True when the model implements :meth:`score_factors` (scores H @ W ≥ 0, most of them 0,
    #: as in kNN) or :meth:`score_candidates`: ranking then looks only at the positive scores
    #: and fills up with 0-score items by id, and :meth:`score` defaults to the densified
    #: product.
    sparse_scores: ClassVar[bool] = False
    #: False when the model's score of an item the user has consumed means nothing: it is then
    #: left out of ``--repeats`` runs (:meth:`scores_seen_items`).
    seen_items: ClassVar[bool] = True
    #: True when :meth:`update` gives exactly the model a fit on the updated data gives (the
    #: contract kit then checks it: :func:`sweval.testing.check_updates`).
    exact_update: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:  # its own import path, not the class it extends
            cls.name = f"{cls.__module__}:{cls.__qualname__}"

    def __init__(self, config: AlgorithmConfig | None = None, **params: Any) -> None:
        if config is not None and params:
            raise TypeError("pass either a config object or keyword parameters, not both")
        self.config = config if config is not None else self.Config(**params)
        self.train_: TrainData | None = None
        #: The previous fold's :meth:`warm_state`, set by the engine before ``fit`` when
        #: :attr:`warm_starts` (None on the first fitted fold).
        self.warm_: WarmState | None = None

    @property
    def warm_starts(self) -> bool:
        """True when the config asks to start from the previous fold's model (a deviation)."""
        return bool(getattr(self.config, "warm_start", False))

    def key_params(self) -> dict[str, Any]:
        """The hyper-parameters that determine the model's numbers, as JSON values (part of
        every unit key): the validated config, defaults filled in."""
        return self.config.model_dump(mode="json")

    def warm_state(self) -> WarmState:
        """What the next fold's fit starts from: arrays keyed by name, with global codes.

        Only models with a ``warm_start`` option implement it.
        """
        raise NotImplementedError(f"{self.name} cannot warm-start")

    @property
    def device(self) -> str:
        """The device the last fit ran on (``cpu`` unless a model says otherwise)."""
        return "cpu"

    def fit(self, train: TrainData) -> Self:
        """Fit on one fold's training data (everything in it is before ``train.cutoff``)."""
        self.train_ = train
        self._fit(train)
        return self

    @abstractmethod
    def _fit(self, train: TrainData) -> None: ...

    @classmethod
    def can_serve(cls) -> bool:
        """Whether a fitted model can serve a later window without refitting (:meth:`serve`)."""
        return cls._serve is not Algorithm._serve

    def serve(self, history: TrainData) -> Self:
        """Keep the fitted parameters; score users from ``history`` from now on, and exclude
        what it holds as seen (a model fitted at t_f serving a later window: ``history`` holds
        each user's transactions up to the served window's start, in the fit's columns,
        :func:`~algorithms.serving.serving_history`). Rows of ``history`` are its own users.

        Raises:
            NotImplementedError: the model keeps state per training user that it cannot
                compute for a new history (it does not implement :meth:`_serve`).
        """
        if self.train_ is None:
            raise RuntimeError(f"{self.name}: call fit() before serve()")
        if not np.array_equal(history.item_codes, self.train_.item_codes):
            raise ValueError(f"{self.name}: a served history must have the fit's columns")
        self._serve(history)
        self.train_ = history
        return self

    @classmethod
    def can_update(cls) -> bool:
        """Whether the model can be updated with new interactions instead of refitted."""
        return cls._update is not Algorithm._update

    def update(self, delta: Delta) -> Self:
        """Bring the fitted model up to ``delta.cutoff`` from only the interactions since its
        last fit or update (:class:`~algorithms.serving.Delta`: global codes, timestamps, all
        in [its previous cut-off, the new one)). Its training data becomes the previous one
        plus the delta (:func:`~algorithms.serving.extended`), which it ranks from afterwards;
        :meth:`_update` reads the delta and the previous data. An empty delta changes nothing
        but the cut-off.

        Raises:
            ValueError: the delta does not start at the model's cut-off.
            NotImplementedError: the model has no :meth:`_update` (it must be refitted).
        """
        from sweval.algorithms.serving import extended

        if self.train_ is None:
            raise RuntimeError(f"{self.name}: call fit() before update()")
        previous = self.train_
        if not self.can_update():
            self._update(delta, previous)  # raises, naming the model
        self.train_ = extended(previous, delta)  # checks the delta's start
        self._update(delta, previous)
        return self

    def _update(self, delta: Delta, previous: TrainData) -> None:
        """Update the fitted state by ``delta`` (``self.train_`` is already the new data,
        ``previous`` the data of the last fit or update); the result should equal a fit on
        ``self.train_``, or come within a stated tolerance."""
        raise NotImplementedError(
            f"{self.name} cannot be updated incrementally: it must be refitted (implement "
            "_update to add new interactions to its state)"
        )

    def _serve(self, history: TrainData) -> None:
        """Point whatever the model reads per user at ``history`` (its rows, not the fit's);
        the item-side parameters stay. A model whose scores read only ``train_`` implements it
        as a no-op."""
        raise NotImplementedError(
            f"{self.name} cannot serve a later window without refitting: it keeps state per "
            "training user (implement _serve to compute it from a new history)"
        )

    def score(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """Dense scores (len(rows) × n_items) for the given training rows; higher is better."""
        if self.sparse_scores:
            return self.score_sparse(rows).toarray()
        raise NotImplementedError(f"{self.name} implements neither score nor score_factors")

    def score_factors(self, rows: NDArray[np.int64]) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(H, W) with sparse scores ``H @ W`` (len(rows) × n_items), snapped, entries ≥ 0.

        Only used when ``sparse_scores`` is True: ranking then runs on the product without
        materialising it (:func:`top_k_of_product`). Defaults to the model's own candidates,
        ``(score_candidates(rows), I)``.
        """
        candidates = sp.csr_matrix(self.score_candidates(rows))
        assert self.train_ is not None
        problem = csr_problem(candidates, (len(rows), self.train_.n_items))
        if problem is not None:
            raise ValueError(f"{self.name}: score_candidates(rows) {problem}; its rows are "
                             "the given rows, its columns the training items")
        return candidates, sp.identity(self.train_.n_items, dtype=np.float64, format="csr")

    def _checked_factors(self, rows: NDArray[np.int64]) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """:meth:`score_factors` as float64 CSRs, checked (:func:`csr_problem`) when a plugin
        computes them: H is len(rows) × t, W is t × n_items, both finite and ≥ 0 with their
        indices in range. SW-EVAL's own (the kNN models', tested against dense references, and
        the default's over the checked candidates) skip the pass over W, which for user-kNN is
        the whole training matrix (14 ms a fold at 7.3M interactions)."""
        assert self.train_ is not None
        h, w = self.score_factors(rows)
        h, w = sp.csr_matrix(h, dtype=np.float64), sp.csr_matrix(w, dtype=np.float64)
        if type(self).score_factors.__module__.startswith(_OWN_MODULES):
            return h, w
        inner = w.shape[0]
        for name, matrix, shape in (("H", h, (len(rows), inner)),
                                    ("W", w, (inner, self.train_.n_items))):
            problem = csr_problem(matrix, shape)
            if problem is not None:
                raise ValueError(f"{self.name}: score_factors(rows)'s {name} {problem} "
                                 "(H: rows × t, W: t × training items)")
        return h, w

    def score_candidates(self, rows: NDArray[np.int64]) -> sp.csr_matrix:
        """The model's own candidates for each row, with their scores: a sparse
        len(rows) × n_items matrix of finite scores ≥ 0 (set ``sparse_scores = True``).

        Items left out score 0: they rank after the candidates, by item id. The engine still
        drops the user's seen items, ranks by score descending and breaks ties by item id, so
        the candidates need not exclude seen items and their order does not matter.
        """
        raise NotImplementedError(f"{self.name} has no sparse scores")

    def score_sparse(self, rows: NDArray[np.int64]) -> sp.csr_matrix:
        """The sparse scores ``H @ W`` of :meth:`score_factors` as a CSR, snapped."""
        h, w = self._checked_factors(rows)
        scores = (h @ w).tocsr()
        snap_scores(scores.data)
        return scores

    @classmethod
    def scores_cold_users(cls) -> bool:
        """Whether the model can score a user without training history (``--cold-users``):
        a user-independent model (POP, POP-N), or one that implements :meth:`cold_scores`.
        The others get ``--fallback``'s lists for such users."""
        return cls.user_independent or cls.cold_scores is not Algorithm.cold_scores

    def cold_scores(self) -> NDArray[np.float64] | None:
        """Scores of every training item (length n_items) for a user with no training row,
        or None when the model cannot score one. A user-independent model's are everyone's
        scores; a model that can score new users otherwise (from features, say) overrides
        this."""
        if not self.user_independent or self.train_ is None or self.train_.n_users == 0:
            return None
        return self._scores(np.zeros(1, dtype=np.int64))[0]

    def recommend_cold(self, n_users: int, k: int) -> NDArray[np.int64]:
        """Top-k columns for ``n_users`` users without training history: every training item
        is a candidate (they have seen none), SPEC tie-break, -1 pads; one list for all.

        Raises:
            ValueError: the model cannot score such users (:meth:`cold_scores` is None).
        """
        if self.train_ is None:
            raise RuntimeError(f"{self.name}: call fit() before recommend_cold()")
        out = np.full((n_users, k), -1, dtype=np.int64)
        if n_users == 0 or k == 0 or self.train_.n_items == 0:
            return out
        scores = self.cold_scores()
        if scores is None:
            raise ValueError(f"{self.name} cannot score users without training history")
        scores = np.asarray(scores, dtype=np.float64).reshape(1, -1)
        if scores.shape[1] != self.train_.n_items or not np.isfinite(scores).all():
            raise ValueError(f"{self.name}: cold_scores() must hold one finite score per "
                             f"training item ({self.train_.n_items})")
        out[:] = top_k(scores, k)[0]
        return out

    @classmethod
    def scores_seen_items(cls) -> bool:
        """Whether the model's scores rank the items a user has already consumed too
        (``--repeats``: seen items are candidates). True unless the class sets
        ``seen_items = False`` (a model whose score of a seen item means nothing) or overrides
        :meth:`recommend` without its ``exclude_seen`` parameter."""
        import inspect

        return cls.seen_items and "exclude_seen" in inspect.signature(cls.recommend).parameters

    def recommend(self, rows: NDArray[np.int64], k: int, *,
                  exclude_seen: bool = True) -> NDArray[np.int64]:
        """Top-k columns per row, seen items excluded (kept as candidates when not
        ``exclude_seen``: ``--repeats``), SPEC tie-break; -1 pads short lists.

        Dense scores are computed in blocks of users so that memory stays bounded whatever the
        number of users; sparse ones are ranked straight from their factors.
        """
        if self.train_ is None:
            raise RuntimeError(f"{self.name}: call fit() before recommend()")
        train = self.train_
        out = np.full((len(rows), k), -1, dtype=np.int64)
        if len(rows) == 0 or k == 0 or train.n_items == 0:
            return out
        seen = train.matrix if exclude_seen else sp.csr_matrix(train.matrix.shape)
        if self.user_independent:
            return top_k_global(self._scores(rows[:1])[0], seen, rows, k)
        if self.sparse_scores:
            h, w = self._checked_factors(rows)
            return top_k_of_product(h, w, seen, rows, k, snap=True)
        batch = max(1, SCORE_BLOCK_ELEMENTS // max(train.n_items, 1))
        for lo in range(0, len(rows), batch):
            block_rows = rows[lo : lo + batch]
            out[lo : lo + batch] = top_k_unseen(self._scores(block_rows), seen, block_rows, k)
        return out

    def _scores(self, rows: NDArray[np.int64]) -> NDArray[np.float64]:
        """``score(rows)`` as a float64 copy the ranking may modify, checked: shape
        len(rows) × n_items and every value finite.

        A wrong shape would have the ranking kernels read and write outside the block, and a
        NaN or ±inf would silently drop or promote items, so both are errors naming the model.
        Finiteness is checked on the block's sum (one vectorised pass, no allocation); only a
        non-finite sum, which a finite block can also overflow to, looks at every value.
        """
        assert self.train_ is not None
        scores = np.array(self.score(rows), dtype=np.float64, copy=True)
        expected = (len(rows), self.train_.n_items)
        if scores.shape != expected:
            raise ValueError(
                f"{self.name}: score(rows) returned an array of shape {scores.shape}, expected "
                f"{expected} (len(rows) × training items)"
            )
        with np.errstate(over="ignore"):
            total = scores.sum()
        if not np.isfinite(total):
            bad = ~np.isfinite(scores)
            if bad.any():
                row, column = (int(i[0]) for i in np.nonzero(bad))
                raise ValueError(
                    f"{self.name}: score(rows) holds {int(bad.sum()):,} NaN or infinite "
                    f"value(s) of {scores.size:,} (first: row {row}, column {column}: "
                    f"{scores[row, column]}); scores must be finite. A model that ranks only "
                    "some items sets sparse_scores = True (docs/plugins.md)"
                )
        return scores
