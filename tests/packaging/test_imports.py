"""Import rules the docs state: only ``sweval.flows.tracking`` imports MLflow, and the modules of
``flows/`` import each other without cycles (counting deferred imports inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("data", "evaluators", "algorithms", "flows")


def _modules() -> dict[str, Path]:
    """``sweval.<dotted name>`` -> source file, for every module of the four packages."""
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = ["sweval", *path.relative_to(REPO).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it, except under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
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


def test_the_flows_modules_import_each_other_without_cycles() -> None:
    modules = {n: p for n, p in _modules().items() if n.startswith("sweval.flows")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(name, path):
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
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycles.append([*path[path.index(target):], name, target])
            elif target not in state:
                visit(target, [*path, name])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert cycles == []
