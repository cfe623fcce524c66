"""The packages of `memorag` import each other without a cycle.

Every `import` in every module counts, wherever it stands (module level, inside a function,
under `if TYPE_CHECKING:`): a late import hides a cycle from Python, not from a reader.
A node is a package (`memorag.modes`) or a top-level module (`memorag.clues`); the root
package `memorag` itself only re-exports names on first use and is left out.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memorag"

# Cycles that were there before the modes were separated from the pipeline, between packages
# that other work owns; each is listed so that it cannot grow, and a test fails once it is gone
# (then remove it here).
KNOWN_CYCLES = [
    {"memorag.memory", "memorag.models"},
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(module: str) -> bool:
    path = ROOT / module.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _node(module: str) -> str | None:
    parts = module.split(".")
    return None if len(parts) < 2 else ".".join(parts[:2])


def imported_modules(path: Path) -> list[str]:
    """The `memorag` modules `path` imports (a `from X import name` counts `X.name` when that is a module)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                found.append(f"{base}.{alias.name}" if _exists(f"{base}.{alias.name}") else base)
    return [name for name in found if name.split(".")[0] == "memorag" and _exists(name)]


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _node(_module_name(path))
        if source is None:
            continue
        graph.setdefault(source, set())
        for target in map(_node, imported_modules(path)):
            if target is not None and target != source:
                graph[source].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_late_and_type_checking_imports():
    graph = package_graph()
    assert "memorag.modes" in graph["memorag.pipeline"]  # the pipeline makes the modes
    assert "memorag.pipeline" not in graph["memorag.modes"]  # and the modes never reach back


def test_no_import_cycle_between_packages():
    found = cycles(package_graph())
    new = [component for component in found if component not in KNOWN_CYCLES]
    assert not new, f"import cycles between packages: {new}"
    gone = [component for component in KNOWN_CYCLES if component not in found]
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"


@pytest.mark.parametrize("package", ["memorag.modes", "memorag.pipeline", "memorag.results", "memorag.errors"])
def test_each_package_imports_first(package):
    """Each side imports on its own, in a fresh interpreter (no import order to respect)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", f"import {package}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert importlib.import_module(package)
