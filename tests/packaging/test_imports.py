"""Import rules the docs state: only ``sweval.flows.tracking`` imports MLflow; no module-level
import cycle anywhere in the four packages; and the modules of ``flows/`` import each other
without cycles even counting deferred imports inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("data", "evaluators", "algorithms", "flows")


def _modules() -> dict[str, Path]:
    """``sweval.<dotted name>`` -> source file, for every module of the four packages and the
    modules of ``src/sweval`` itself (the contract kit ``sweval.testing``)."""
    found = {"sweval.testing": REPO / "src" / "sweval" / "testing.py"}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = ["sweval", *path.relative_to(REPO).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, *, module_level: bool = False) -> set[str]:
    """Every module ``path`` imports, anywhere in it (or only outside functions), except under
    ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
    }
    if module_level:
        typing_only |= {
            id(node)
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(function)
        }
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + [base]).strip(".")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_only_the_tracking_package_imports_mlflow() -> None:
    importers = {
        name for name, path in _modules().items()
        if any(m == "mlflow" or m.startswith("mlflow.") for m in _imports(name, path))
    }
    assert importers  # the check sees the imports at all
    outside = {m for m in importers if not m.startswith("sweval.flows.tracking")}
    assert outside == set()


def _cycles(prefix: str, *, module_level: bool) -> list[list[str]]:
    modules = {n: p for n, p in _modules().items() if n.startswith(prefix)}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(name, path, module_level=module_level):
            parts = imported.split(".")
            for end in range(1, len(parts) + 1):
                target = ".".join(parts[:end])
                # a module's own packages are initialised before it: not an edge
                if target in modules and target != name and not name.startswith(target + "."):
                    targets.add(target)
        graph[name] = targets

    cycles: list[list[str]] = []
    state: dict[str, str] = {}  # "open" while on the current path, then "done"

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        path = [*path, name]
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target, path)
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    return cycles


def test_no_module_level_import_cycle_in_any_package() -> None:
    assert _cycles("sweval", module_level=True) == []


def test_the_flows_modules_import_each_other_without_cycles() -> None:
    assert _cycles("sweval.flows", module_level=False) == []


def test_the_cycle_check_sees_a_cycle(tmp_path, monkeypatch) -> None:
    import sys

    module = sys.modules[__name__]
    fake = {"sweval.a": tmp_path / "a.py", "sweval.b": tmp_path / "b.py"}
    fake["sweval.a"].write_text("import sweval.b\n")
    fake["sweval.b"].write_text("from sweval import a\n")
    monkeypatch.setattr(module, "_modules", lambda: fake)
    assert _cycles("sweval", module_level=True) == [["sweval.a", "sweval.b", "sweval.a"]]
