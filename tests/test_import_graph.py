"""The packages of `memorag` import each other without a cycle.

Every `import` in every module counts, wherever it stands (module level, inside a function,
under `if TYPE_CHECKING:`): a late import hides a cycle from Python, not from a reader.
A node is a package (`memorag.modes`) or a top-level module (`memorag.prompting.clues`); the root
package `memorag` itself only re-exports names on first use and is left out. Inside each
package the same holds one level down: its modules and subpackages import each other
without a cycle (`inner_graph`), the package's own `__init__` counting as one node.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memorag"



def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(module: str, root: Path = ROOT) -> bool:
    path = root / module.replace(".", "/")
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


# Subpackages that are layers of their own: the evaluation corpora sit below both the training data and
# the harness that holds them, and the training data below the trainer; the graph sees them apart.
LAYER_PACKAGES = ("memorag.evaluation.datasets", "memorag.training.data")


def _node(module: str) -> str | None:
    parts = module.split(".")
    for layer in LAYER_PACKAGES:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None if len(parts) < 2 else ".".join(parts[:2])


def imported_modules(path: Path, root: Path = ROOT) -> list[str]:
    """The `memorag` modules `path` imports (a `from X import name` counts `X.name` when that is a module)."""
    return _imports_in(ast.parse(path.read_text(encoding="utf-8")), path, root)


def _imports_in(tree: ast.AST, path: Path, root: Path) -> list[str]:
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                found.append(f"{base}.{alias.name}" if _exists(f"{base}.{alias.name}", root) else base)
    return [name for name in found if name.split(".")[0] == "memorag" and _exists(name, root)]


def package_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Node -> the nodes it imports, over every module of `root`/memorag."""
    graph: dict[str, set[str]] = {}
    for path in sorted((root / PACKAGE.name).rglob("*.py")):
        source = _node(_module_name(path, root))
        if source is None:
            continue
        graph.setdefault(source, set())
        for target in map(_node, imported_modules(path, root)):
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


def inner_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Inside `package`: each of its modules and subpackages (the package's `__init__` is the
    node `package`) -> the ones it imports."""
    depth = len(package.split(".")) + 1

    def node(module: str) -> str | None:
        if module != package and not module.startswith(package + "."):
            return None
        return ".".join(module.split(".")[:depth])

    graph: dict[str, set[str]] = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        source = node(_module_name(path, root))
        graph.setdefault(source, set())
        for target in map(node, imported_modules(path, root)):
            if target is not None and target != source:
                graph[source].add(target)
    return graph


def packages(root: Path = ROOT) -> list[str]:
    return sorted(_module_name(path, root) for path in (root / PACKAGE.name).rglob("__init__.py"))


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE.name / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_finds_a_cycle_closed_by_a_late_import(tmp_path):
    """A synthetic package: `low` reaches back to `high` only inside a function (relatively) and under
    TYPE_CHECKING; both close a cycle, which the check reports; without them there is none."""
    p = PACKAGE.name  # spelled indirectly: the repository check reads package names cited in this file
    files = {
        "__init__.py": "",
        "high/__init__.py": f"from {p}.high.core import run\n",
        "high/core.py": f"from {p}.low import helper\n\ndef run():\n    return helper()\n",
        "low.py": "def helper():\n    from .high import core\n    return core\n",
        "typed/__init__.py": f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from {p}.low import helper\n",
        "leaf.py": f"import {p}.typed\n",
    }
    graph = package_graph(_write_package(tmp_path / "cyclic", files))
    high, low, typed, leaf = (f"{p}.{name}" for name in ("high", "low", "typed", "leaf"))
    assert graph == {high: {low}, low: {high}, typed: {low}, leaf: {typed}}
    assert cycles(graph) == [{high, low}]
    files["low.py"] = "def helper():\n    return 1\n"  # the helper no longer reaches back
    assert cycles(package_graph(_write_package(tmp_path / "layered", files))) == []


def test_the_graph_sees_late_and_type_checking_imports():
    graph = package_graph()
    assert "memorag.modes" in graph["memorag.pipeline"]  # the pipeline makes the modes
    assert "memorag.pipeline" not in graph["memorag.modes"]  # and the modes never reach back


# Layers that point one way only: (lower, higher) means the lower never imports the higher, not even late.
REFUSED = [
    ("memorag.training.data", "memorag.evaluation"),  # the harness may read the training data, never the reverse
    ("memorag.training.data", "memorag.training"),  # the trainer reads the data, never the reverse
    ("memorag.evaluation.datasets", "memorag.training.data"),  # the data sets both read sit below both
    ("memorag.evaluation.datasets", "memorag.evaluation"),
    ("memorag.evaluation.datasets", "memorag.training"),
    ("memorag.runtime", "memorag.memory"),  # the transformers glue sits under the memory model
    ("memorag.prompting", "memorag.memory"),
    ("memorag.storage", "memorag.pipeline"),
]


@pytest.mark.parametrize(("lower", "higher"), REFUSED)
def test_a_lower_layer_never_imports_a_higher_one(lower, higher):
    assert higher not in package_graph()[lower], f"{lower} imports {higher}: move what it needs below both"


def test_the_layer_check_sees_a_late_import_of_a_higher_layer(tmp_path):
    """A synthetic package whose `data` reaches `evaluation` only inside a function: the edge is seen."""
    p = PACKAGE.name
    files = {"__init__.py": "", "evaluation/__init__.py": "", "evaluation/tasks.py": "ROWS = 1\n",
             "data/__init__.py": "", "data/builder.py": f"def rows():\n    from {p}.evaluation.tasks import ROWS\n"
                                                          "    return ROWS\n"}
    graph = package_graph(_write_package(tmp_path / "late", files))
    assert f"{p}.evaluation" in graph[f"{p}.data"]


def test_no_import_cycle_between_packages():
    """No exceptions: a package that needs something of a package above it moves that thing down."""
    graph = package_graph()
    assert len(graph) > 20  # the walk found the package's modules
    found = cycles(graph)
    assert not found, f"import cycles between packages (move the shared code into the lower one): {found}"


def test_the_inner_graph_finds_a_cycle_inside_a_package(tmp_path):
    """A synthetic package whose `core` and `persistence` import each other, one of them late: the
    cycle is reported; with the shared piece moved into a module of its own there is none."""
    p = PACKAGE.name
    files = {
        "__init__.py": "", "pipe/__init__.py": f"from {p}.pipe.core import Pipe\n",
        "pipe/core.py": f"from {p}.pipe.persistence import save\n\nclass Pipe:\n    pass\n",
        "pipe/persistence.py": f"def save(pipe):\n    from {p}.pipe.core import Pipe\n    return Pipe\n",
    }
    pipe = f"{p}.pipe"
    graph = inner_graph(pipe, _write_package(tmp_path / "cyclic", files))
    assert graph == {pipe: {f"{pipe}.core"}, f"{pipe}.core": {f"{pipe}.persistence"},
                     f"{pipe}.persistence": {f"{pipe}.core"}}
    assert cycles(graph) == [{f"{pipe}.core", f"{pipe}.persistence"}]
    files["pipe/persistence.py"] = "def save(parts):\n    return parts\n"
    assert cycles(inner_graph(pipe, _write_package(tmp_path / "layered", files))) == []


@pytest.mark.parametrize("package", packages())
def test_no_import_cycle_inside_a_package(package):
    """Inside every package (memorag.pipeline among them: core, corpus and persistence) modules
    import each other one way; a shared piece moves into a module of its own."""
    graph = inner_graph(package)
    found = cycles(graph)
    assert not found, f"import cycles inside {package} (move the shared code into a module of its own): {found}"


def test_the_pipeline_package_is_walked():
    graph = inner_graph("memorag.pipeline")
    assert {"memorag.pipeline.assistant", "memorag.pipeline.corpus", "memorag.pipeline.persistence"} <= set(graph)
    assert "memorag.pipeline.corpus" in graph["memorag.pipeline.assistant"]
    assert "memorag.pipeline.assistant" not in graph["memorag.pipeline.persistence"]


@pytest.mark.parametrize("package", ["memorag.modes", "memorag.pipeline", "memorag.modes.results", "memorag.errors",
                                     "memorag.runtime.embedded", "memorag.generation.models", "memorag.memory.checkpoint", "memorag.commands.main",
                                     "memorag.evaluation.datasets", "memorag.training.data"])
@pytest.mark.slow
def test_each_package_imports_first(package):
    """Each side imports on its own, in a fresh interpreter (no import order to respect)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", f"import {package}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert importlib.import_module(package)


def test_inside_the_memory_package_every_module_points_down():
    """memorag.memory's modules, every import counted (type-only ones too): no cycle, and the model
    (memory/model.py) is imported by none of them, the core (memory/core.py) by no module below it."""
    graph = inner_graph("memorag.memory")
    assert len(graph) >= 15 and not cycles(graph)
    importers = {module for module, targets in graph.items() if "memorag.memory.model" in targets}
    assert importers <= {"memorag.memory"}, f"modules that reach up to the model: {sorted(importers)}"
    below_core = {f"memorag.memory.{name}" for name in ("config", "families", "schedule",
                                                        "cache", "attention", "compiled", "state")}
    assert not {module for module in below_core if "memorag.memory.core" in graph[module]}


# The shape of the package: a top level of packages, no alias modules, one name for one job.
# The public config and errors every package shares, and `locations` (the pages and sections of a span), which the
# document reader's process imports under its memory limit: inside `retrieval` it would load the retrievers there.
TOP_LEVEL = {"__init__", "__main__", "config", "errors", "locations"}
# A name in several packages for the same job, each package's own: its settings, its errors, its abstract class.
SAME_JOB = {"__init__", "__main__", "config", "errors", "base"}
# Names still held by two packages with different jobs; this list only shrinks (a rename removes its entry).
TO_RENAME: set[str] = set()


def test_the_top_level_holds_at_most_six_modules():
    found = {path.stem for path in PACKAGE.glob("*.py")}
    assert len(found) <= 6 and found <= TOP_LEVEL, f"move {sorted(found - TOP_LEVEL)} into the package that uses it"


def _only_reexports(tree: ast.Module) -> bool:
    body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    imports = [node for node in body if isinstance(node, (ast.Import, ast.ImportFrom))
               and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")]
    rest = [node for node in body if node not in imports and not (isinstance(node, ast.ImportFrom)
                                                                     and node.module == "__future__")]
    all_only = all(isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"]
                   for node in rest)
    return bool(imports) and all_only


def test_the_reexport_check_finds_an_alias_module():
    p = PACKAGE.name  # spelled indirectly: the repository check reads package names cited in this file
    assert _only_reexports(ast.parse(f'"""Old name."""\nfrom {p}.real import *  # noqa\n'))
    assert not _only_reexports(ast.parse(f"from {p}.real import y\n\ndef z():\n    return y\n"))


def test_no_module_only_reexports_another():
    """A package's `__init__` may gather its names; any other module that only imports is an alias: its users
    import the real module."""
    aliases = [str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py")
               if path.name != "__init__.py" and _only_reexports(ast.parse(path.read_text(encoding="utf-8")))]
    assert not aliases, f"alias modules (import the real module instead): {aliases}"


def test_no_module_name_in_two_packages_with_different_jobs():
    homes: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        homes.setdefault(path.stem, set()).add(str(path.parent.relative_to(ROOT)))
    shared = {name for name, folders in homes.items() if len(folders) > 1}
    assert shared - SAME_JOB <= TO_RENAME, f"name it for its job: {sorted(shared - SAME_JOB - TO_RENAME)}"
    assert TO_RENAME <= shared, f"renamed, drop from TO_RENAME: {sorted(TO_RENAME - shared)}"
