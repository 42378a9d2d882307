"""Configuration types are strict: a boolean is never read as a number, nor a number as a
boolean, in a configuration file (TOML, YAML, JSON) as in code (pydantic's lax mode read
``u_min = true`` as 1 and ``tracking = 0`` as false, exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweval.data.errors import SwevalError
from sweval.evaluators.config.model import EvalConfig


@pytest.mark.parametrize(("text", "said"), [
    ("u_min = true", "--u-min (u_min): true is a boolean, not a number"),
    ("folds = true", "--folds (folds): true is a boolean, not a number"),
    ("k = [true, 10]", "--k (k): [true, 10] holds a boolean, not a number"),
    ("seeds = [1, false]", "--seeds (seeds): [1, false] holds a boolean, not a number"),
    ("workers = true", "--workers (workers): true is a boolean, not a number"),
    ("ci = false", "--ci (ci): false is a boolean, not a number"),
    ("scale = true", "--scale (scale): true is a boolean, not a number"),
    ("tracking = 0", "--tracking (tracking): 0 is not a boolean: give true or false"),
    ('per_user = "yes"', "--per-user (per_user): 'yes' is not a boolean: give true or false"),
])
def test_a_config_file_s_boolean_for_a_number_or_number_for_a_boolean_is_an_error(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "eval.toml"
    path.write_text(text + "\n")
    with pytest.raises(SwevalError) as raised:
        EvalConfig.load(path)
    assert said in str(raised.value)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_yaml_and_json_booleans_are_refused_for_numbers_too(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"eval{suffix}"
    path.write_text("u_min: yes\n" if suffix == ".yaml" else '{"folds": true}')
    with pytest.raises(SwevalError, match="is a boolean, not a number"):
        EvalConfig.load(path)


def test_code_gets_the_same_check_and_valid_values_still_pass() -> None:
    with pytest.raises(SwevalError, match="--u-min"):
        EvalConfig.build(u_min=True)
    config = EvalConfig.build(u_min=0, folds=3, k=[5], ci=0.9, scale=1, tracking=False,
                              params={"item-knn": {"n_neighbors": 5}})
    assert (config.u_min, config.folds, config.k, config.scale, config.tracking) == (
        0, 3, [5], 1.0, False)
