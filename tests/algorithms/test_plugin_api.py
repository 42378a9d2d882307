"""The public algorithm API and plugin registration: the example plugin against a slow
reference, entry points and import paths, their errors, their unit keys, and a model's own
candidates ranked by the engine."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import scipy.sparse as sp
from sweval_testing import DAY, install_example_plugin, log_frame, use_plugins, write_dist_info

import sweval.algorithms as api
from sweval.algorithms.registry import available, build_algorithm, resolve
from sweval.data.errors import SwevalError
from sweval.data.log import InteractionLog
from sweval.evaluators.protocols.folds import build_folds
from sweval.evaluators.protocols.windows import WindowSpec

EXAMPLE = "sweval_recency.models:RecencyPop"


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_plugins(monkeypatch, *install_example_plugin(tmp_path / "site"))


def test_the_public_api_exports_what_a_plugin_needs():
    assert api.Algorithm.__module__ == "sweval.algorithms.base"
    assert {"Algorithm", "AlgorithmConfig", "TrainData", "unit_threads"} <= set(api.__all__)
    assert api.ENTRY_POINT_GROUP == "sweval.algorithms"


def test_recency_pop_equals_a_slow_reference(example):
    """score(i) = Σ 0.5 ** ((t_f − t) / half-life) over i's training transactions, from the
    input frame with a Python loop."""
    frame = log_frame(8)
    log = InteractionLog.from_frame(frame, dedup="none")
    for fold in build_folds(log, WindowSpec(width_s=DAY, n_folds=3, train_window_s=3 * DAY),
                            u_min=0):
        train = fold.train_data(log)
        model = build_algorithm(EXAMPLE, {"half_life_days": 1.5}).fit(train)
        expected: dict[str, float] = {}
        for item, t in zip(frame["item"], frame["timestamp"], strict=True):
            if fold.t_start - 3 * DAY <= t < fold.t_start:
                expected[item] = expected.get(item, 0.0) + 0.5 ** ((fold.t_start - t) / (1.5 * DAY))
        got = dict(zip(train.item_ids.tolist(), model.score(np.array([0]))[0].tolist(), strict=True))
        assert got.keys() == expected.keys()
        for item, value in expected.items():
            assert got[item] == pytest.approx(value, rel=1e-12)


def test_entry_point_and_import_path_name_the_same_class(example):
    by_entry, origin = resolve("recency-pop")
    by_path, path_origin = resolve(EXAMPLE)
    assert by_entry is by_path
    assert (origin.kind, origin.target, origin.distribution, origin.version) == (
        "entry point", EXAMPLE, "sweval-recency", "0.1.0")
    assert path_origin.kind == "import path"
    assert by_entry.name == EXAMPLE  # a plugin's default name is its import path
    found, problems = available()
    assert "recency-pop" in found and "pop" in found and problems == []


def test_a_plugins_unit_code_version_covers_its_package_version(tmp_path, monkeypatch):
    from sweval.evaluators.units.unit import code_version

    site = tmp_path / "site"
    use_plugins(monkeypatch, *install_example_plugin(site))
    first = code_version.__wrapped__("recency-pop")
    by_path = code_version.__wrapped__(EXAMPLE)
    (dist,) = site.glob("*.dist-info")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sweval-recency\nVersion: 0.2.0\n")
    use_plugins(monkeypatch)  # read the entry points again
    assert code_version.__wrapped__("recency-pop") not in (first, by_path)
    assert code_version.__wrapped__("pop") == code_version("pop")


@pytest.mark.parametrize(("name", "message"), [
    ("no_such_pkg.models:Model", r"module 'no_such_pkg.models' not found"),
    ("sweval.algorithms.popularity:Nope", r"module 'sweval.algorithms.popularity' has no attribute 'Nope'"),
    ("sweval.data.log:InteractionLog", r"is not an algorithm: class InteractionLog is not a subclass"),
    ("sweval.data.log:ALL_STRATUM", r"is not an algorithm: str is not a subclass"),
    ("sweval.algorithms.base:Algorithm", r"class Algorithm is abstract \(implement _fit\)"),
    ("no-such-model", r"unknown algorithm 'no-such-model'; available: pop, pop-n"),
    (":Model", r"an import path is module:Class"),
])
def test_import_path_errors_are_clear(name, message):
    with pytest.raises(SwevalError, match=message):
        resolve(name)


def test_a_broken_entry_point_and_a_name_clash_are_clear(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_dist_info(site, "bad-plugin", "1.0", {
        "broken": "no_such_module_x:Model", "pop": "sweval_recency.models:RecencyPop",
    })
    use_plugins(monkeypatch, site)
    with pytest.raises(SwevalError, match=r"'broken': the entry point 'no_such_module_x:Model' "
                       r"\(group 'sweval.algorithms', declared by bad-plugin 1.0\) fails to load"):
        resolve("broken")
    with pytest.raises(SwevalError, match=r"'pop': the entry point .* takes the name of a built-in"):
        resolve("pop")
    found, problems = available()
    assert "broken" not in found and len(problems) == 2


class OwnCandidates(api.Algorithm):
    """Proposes every item, seen ones too, with scores that tie: the engine must drop the seen
    items and break the ties by column."""

    user_independent: ClassVar[bool] = False
    sparse_scores: ClassVar[bool] = True

    def _fit(self, train: api.TrainData) -> None:
        self.scores_ = (np.arange(train.n_items) % 3).astype(np.float64)  # 0,1,2,0,1,2...

    def score_candidates(self, rows):
        return sp.csr_matrix(np.tile(self.scores_, (len(rows), 1)))


def test_a_models_own_candidates_are_ranked_by_the_engine(lib):
    rng = np.random.default_rng(3)
    dense = lib.random_binary(rng, 12, 10, 0.3)
    train = lib.train_from_dense(dense)
    model = OwnCandidates().fit(train)
    rows = np.arange(train.n_users)
    got = model.recommend(rows, 10)
    scores = np.tile(model.scores_, (len(rows), 1))
    np.testing.assert_array_equal(got, lib.reference_ranking(scores, dense, 10))


def test_negative_candidate_scores_are_refused(lib):
    class Negative(OwnCandidates):
        def score_candidates(self, rows):
            return sp.csr_matrix(-np.ones((len(rows), self.train_.n_items)))

    train = lib.train_from_dense(np.eye(3, dtype=bool))
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        Negative().fit(train).recommend(np.arange(3), 2)


class OffByOne(OwnCandidates):
    """QA: candidates built by hand from ``(data, indices, indptr)`` with a column one past the
    last item; scipy does not check the indices, and the ranking kernel read past its arrays
    (a segmentation fault, or the entry silently dropped)."""

    shift: ClassVar[int] = 1

    def score_candidates(self, rows):
        n = self.train_.n_items
        indices = np.tile(np.array([0, n - 1 + self.shift]), len(rows))
        indptr = np.arange(0, 2 * len(rows) + 1, 2)
        return sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(rows), n))


class FactorsOutOfRange(OwnCandidates):
    """The same mistake in ``score_factors``' W (columns) and H (inner index)."""

    which: ClassVar[str] = "W"

    def score_factors(self, rows):
        n, t = self.train_.n_items, 2
        bad = sp.csr_matrix((np.ones(1), np.array([n + 5 if self.which == "W" else 0]),
                             np.array([0, 1, 1])), shape=(t, n))
        good = sp.csr_matrix(np.ones((t, n)))
        h = sp.csr_matrix((np.ones(len(rows)), np.full(len(rows), t + 3 if self.which == "H"
                                                       else 0), np.arange(len(rows) + 1)),
                          shape=(len(rows), t))
        return h, bad if self.which == "W" else good


@pytest.mark.parametrize("shift", [1, 100_000])
def test_candidate_columns_out_of_range_are_refused_not_read(lib, shift):
    model = type("Shifted", (OffByOne,), {"shift": shift})
    train = lib.train_from_dense(np.eye(4, dtype=bool))
    fitted = model().fit(train)
    message = rf"score_candidates\(rows\) holds column index {3 + shift} \(row 0\), outside 0..3"
    with pytest.raises(ValueError, match=message):
        fitted.recommend(np.arange(4), 2)
    with pytest.raises(ValueError, match=message):
        fitted.score(np.arange(4))


@pytest.mark.parametrize(("which", "message"), [
    ("W", r"score_factors\(rows\)'s W holds column index 9 \(row 0\), outside 0..3"),
    ("H", r"score_factors\(rows\)'s H holds column index 5 \(row 0\), outside 0..1"),
])
def test_factor_indices_out_of_range_are_refused_not_read(lib, which, message):
    model = type("Bad", (FactorsOutOfRange,), {"which": which})
    train = lib.train_from_dense(np.eye(4, dtype=bool))
    with pytest.raises(ValueError, match=message):
        model().fit(train).recommend(np.arange(4), 2)


class FailsInFit(api.Algorithm):
    def _fit(self, train: api.TrainData) -> None:
        raise ValueError("plugin bug")


def test_a_failing_plugin_stops_sweval_compare_with_a_clear_error(caplog):
    """Outside a run (sweval compare's protocols) a failing unit is a user error naming it, its
    traceback in the log."""
    from sweval.evaluators.experiments.protocol_runs import run_protocol
    from sweval.evaluators.protocols.holdout import LeaveLastOneOut

    log = InteractionLog.from_frame(log_frame(4))
    name = f"{__name__}:FailsInFit"
    with pytest.raises(SwevalError, match=rf"unit failed \(fold 0, {name}: ValueError: plugin bug\)"):
        run_protocol(log, LeaveLastOneOut(), ["pop", name], ks=[5])
    assert 'raise ValueError("plugin bug")' in caplog.text


class RefusesItsData(api.Algorithm):
    def _fit(self, train: api.TrainData) -> None:
        raise SwevalError("needs at least 1000 items")


def test_a_user_error_raised_by_a_plugin_names_the_plugin_and_the_fold():
    """A plugin's SwevalError is a user error like SW-EVAL's own, but the user must learn which
    algorithm said it."""
    from sweval.evaluators.experiments.protocol_runs import run_protocol
    from sweval.evaluators.protocols.holdout import LeaveLastOneOut

    name = f"{__name__}:RefusesItsData"
    with pytest.raises(SwevalError, match=rf"^{re.escape(name)} \(fold 0\): needs at least 1000"):
        run_protocol(InteractionLog.from_frame(log_frame(4)), LeaveLastOneOut(), [name], ks=[5])


class DenseScores(api.Algorithm):
    """Dense scores made by ``make(n_rows, n_items)``: the tests below hand it wrong ones."""

    make: ClassVar = staticmethod(lambda n_rows, n_items: np.ones((n_rows, n_items)))

    def _fit(self, train: api.TrainData) -> None:
        pass

    def score(self, rows):
        return type(self).make(len(rows), self.train_.n_items)


def _nan_every_third(n_rows, n_items):
    scores = np.ones((n_rows, n_items))
    scores[:, ::3] = np.nan
    return scores


def _inf_first(n_rows, n_items):
    scores = np.arange(n_rows * n_items, dtype=np.float64).reshape(n_rows, n_items)
    scores[-1, 1] = np.inf
    return scores


@pytest.mark.parametrize(("make", "user_independent", "message"), [
    (lambda r, m: np.ones((r, m - 1)), False, r"shape \(5, 5\), expected \(5, 6\)"),
    (lambda r, m: np.ones((r + 1, m)), False, r"shape \(6, 6\), expected \(5, 6\)"),
    (lambda r, m: np.ones((r, m + 1)), False, r"shape \(5, 7\), expected \(5, 6\)"),
    (lambda r, m: np.ones(m), False, r"shape \(6,\), expected \(5, 6\)"),
    (lambda r, m: np.ones((r, m - 1)), True, r"shape \(1, 5\), expected \(1, 6\)"),
    (_nan_every_third, False,
     r"holds 10 NaN or infinite value\(s\) of 30 \(first: row 0, column 0: nan\)"),
    (_inf_first, False,
     r"holds 1 NaN or infinite value\(s\) of 30 \(first: row 4, column 1: inf\)"),
    (_nan_every_third, True, r"holds 2 NaN or infinite value\(s\) of 6"),
])
def test_dense_scores_of_the_wrong_shape_or_not_finite_are_refused(lib, make, user_independent,
                                                                     message):
    """The ranking kernels would read and write outside a block of the wrong shape, and would
    silently drop NaN items or promote infinite ones: both are errors naming the model."""
    model_class = type("Broken", (DenseScores,), {"make": staticmethod(make),
                                                  "user_independent": user_independent})
    dense = np.eye(5, 6, dtype=bool)
    dense[0, 5] = True
    train = lib.train_from_dense(dense)
    model = model_class().fit(train)
    with pytest.raises(ValueError, match=rf"^{re.escape(model.name)}: score\(rows\) .*{message}"):
        model.recommend(np.arange(5), 3)


def test_finite_scores_whose_sum_overflows_are_ranked(lib):
    """The finiteness check looks at every value when the block's sum is not finite."""
    huge = type("Huge", (DenseScores,), {"make": staticmethod(
        lambda r, m: np.tile(np.linspace(1e307, 1.7e308, m), (r, 1)))})
    dense = np.array([[1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1]], dtype=bool)
    train = lib.train_from_dense(dense)
    np.testing.assert_array_equal(huge().fit(train).recommend(np.arange(2), 3),
                                  [[5, 3, 1], [4, 2, 0]])


class ExtendsPlugin(DenseScores):
    pass


def test_a_subclass_is_named_by_its_own_import_path():
    """Inheriting the parent's name would label (and key) a subclass's units as the parent's."""
    from sweval.algorithms.popularity import Pop

    extends_pop = type("ExtendsPop", (Pop,), {"__module__": __name__,
                                               "__qualname__": "ExtendsPop"})
    assert Pop.name == "pop" and extends_pop.name == f"{__name__}:ExtendsPop"
    assert DenseScores.name == f"{__name__}:DenseScores"
    assert ExtendsPlugin.name == f"{__name__}:ExtendsPlugin"


PLUGIN_WITH_PROBLEMS = '''
import plugdep  # noqa: F401  (not installed; its name begins the plugin's)
'''

BAD_DEFAULT = '''
from sweval.algorithms import Algorithm, AlgorithmConfig


class Model(Algorithm):
    class Config(AlgorithmConfig):
        mode: int = "abc"
        factor: float = 1

    def _fit(self, train):
        pass

    def score(self, rows):
        raise NotImplementedError


class Fine(Model):
    class Config(AlgorithmConfig):
        required: int
        factor: float = 1
'''

LOOSE_CONFIG = '''
from pydantic import BaseModel
from sweval.algorithms import Algorithm


class Loose(Algorithm):
    class Config(BaseModel):  # not an AlgorithmConfig: a typo in --set would pass unseen
        param: int = 1

    def _fit(self, train):
        pass

    def score(self, rows):
        raise NotImplementedError
'''


def test_a_plugins_missing_dependency_and_a_config_of_the_wrong_kind_are_named(
    tmp_path, monkeypatch
):
    """`plugdep_model` importing an absent `plugdep` was reported as `plugdep_model` not found
    (a string-prefix test); a Config that is not an AlgorithmConfig crashed later or let
    unknown parameters through."""
    from sweval_testing import use_plugins

    (tmp_path / "plugdep_model.py").write_text(PLUGIN_WITH_PROBLEMS)
    (tmp_path / "loose.py").write_text(LOOSE_CONFIG)
    use_plugins(monkeypatch, tmp_path)
    with pytest.raises(SwevalError, match=r"importing module 'plugdep_model' failed: No module "
                                          r"named 'plugdep'"):
        resolve("plugdep_model:Model")
    with pytest.raises(SwevalError, match=r"Loose.Config is Loose.Config, not a subclass of "
                                          r"sweval.algorithms.AlgorithmConfig"):
        resolve("loose:Loose")
    # pydantic does not check defaults: "abc" for an int ran, and was stored in every unit key
    (tmp_path / "baddefault.py").write_text(BAD_DEFAULT)
    with pytest.raises(SwevalError, match=r"'baddefault:Model': Model.Config has an invalid "
                                          r"default \(mode: Input should be a valid integer"):
        resolve("baddefault:Model")
    assert resolve("baddefault:Fine")[0].__name__ == "Fine"  # a required field has no default


def test_a_plugin_extending_a_built_in_changes_version_with_the_built_ins_module(
        tmp_path, monkeypatch):
    """A plugin subclassing ItemKNN computes its units with knn.py's code: an upgrade that edits
    knn.py must not reuse its stored units; a plugin that does not inherit from it keeps its
    version."""
    from sweval.evaluators.units import unit as units

    site = tmp_path / "site"
    use_plugins(monkeypatch, *install_example_plugin(site))
    (site / "knn_plugin.py").write_text(
        "from sweval.algorithms.knn import ItemKNN\n\n"
        "class ShrunkKNN(ItemKNN):\n    pass\n")
    monkeypatch.syspath_prepend(str(site))
    before = units.code_version.__wrapped__("knn_plugin:ShrunkKNN")
    recency = units.code_version.__wrapped__("recency-pop")
    real = units.source_version.__wrapped__
    monkeypatch.setattr(units, "source_version",
                        lambda path: real(path) + ("-edited" if path.name == "knn.py" else ""))
    assert units.code_version.__wrapped__("knn_plugin:ShrunkKNN") != before
    assert units.code_version.__wrapped__("recency-pop") == recency
