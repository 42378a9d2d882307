"""The library's shape: its layers import downwards only, MLflow and Prefect stay in their
layers, and every command computes units through the one driver."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sweval_testing import REPO

#: Each package may import itself and those to its right, never those to its left.
LAYERS = ("flows", "evaluators", "algorithms", "data")


def modules(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", LAYERS)
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    above = LAYERS[: LAYERS.index(package)]
    wrong = {
        f"{path.relative_to(REPO)} imports {name}"
        for path in modules(package) for name in imported(path)
        if any(name == f"sweval.{layer}" or name.startswith(f"sweval.{layer}.")
               for layer in above)
    }
    assert not wrong, sorted(wrong)


@pytest.mark.parametrize(("library", "home"), [("mlflow", "flows/tracking"), ("prefect", "flows")])
def test_mlflow_and_prefect_are_imported_in_their_layer_only(library: str, home: str) -> None:
    wrong = {
        str(path.relative_to(REPO))
        for package in LAYERS for path in modules(package)
        if not path.is_relative_to(REPO / home)
        and any(name == library or name.startswith(f"{library}.") for name in imported(path))
    }
    assert not wrong, sorted(wrong)


def test_every_command_computes_units_through_the_driver() -> None:
    """``compute_unit`` is called by the driver, and by the unit module itself (a unit found
    damaged is computed again); nowhere else in the library, the API or the benchmarks."""
    allowed = {REPO / "evaluators/run/driver.py", REPO / "evaluators/units/unit.py"}
    callers = set()
    paths = [p for package in LAYERS for p in modules(package)]
    paths += [*sorted((REPO / "src/sweval").glob("*.py")), *sorted((REPO / "benchmarks").rglob("*.py"))]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name == "compute_unit" and path not in allowed:
                    callers.add(str(path.relative_to(REPO)))
    assert not callers, sorted(callers)
