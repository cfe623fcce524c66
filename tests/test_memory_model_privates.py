"""No module but the memory model's own two reaches into its private members.

`MemoryCore` (memorag/memory/core.py) and `MemoryModel` (memorag/memory/model.py, its subclass)
keep their private members to themselves: everything else (decoding, memorizing, the training
objectives, low-rank projections, scripts, tests) goes through the public step (`step`, `read_tokens`,
`read_tokens_batch`), the scoring hook (`score_labelled`) and the other public methods
(docs/memory-model.md, "The step"). The private names are read from the classes themselves, so a
new private method is covered as soon as it exists. A use is `anything._name` other than `self._name` or
`cls._name`, or `getattr`/`setattr`/`hasattr`/`delattr` with the name as a string.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "memorag" / "memory" / "model.py"
CORE = ROOT / "memorag" / "memory" / "core.py"


def model_private_members() -> set[str]:
    return private_members(CORE.read_text(encoding="utf-8"), "MemoryCore") | private_members(
        MODEL.read_text(encoding="utf-8"))
SKIPPED_FOLDERS = {"build", "dist", "node_modules", "__pycache__"}
ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


def private_members(source: str, class_name: str = "MemoryModel") -> set[str]:
    """Names starting with one underscore (not dunders) that class `class_name` defines: methods,
    class attributes, and attributes its methods assign on `self`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ClassDef) and node.name == class_name):
            continue
        for item in ast.walk(node):
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item in node.body:
                found.add(item.name)
            elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store) and any(
                    isinstance(statement, ast.Assign | ast.AnnAssign) and item in ast.walk(statement)
                    for statement in node.body):
                found.add(item.id)
            elif (isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store)
                  and isinstance(item.value, ast.Name) and item.value.id == "self"):
                found.add(item.attr)
    return {name for name in found if name.startswith("_") and not name.startswith("__")}


def private_uses(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every use of one of `names` on something other than `self` or `cls`."""
    uses = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in names:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                uses.append((node.lineno, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_FUNCTIONS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in names):
            uses.append((node.lineno, node.args[1].value))
    return sorted(uses)


def python_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of the repository: the package, scripts, benchmarks, tests (no hidden or build folders)."""
    return sorted(path for path in root.rglob("*.py")
                  if not any(part.startswith(".") or part in SKIPPED_FOLDERS or part.endswith(".egg-info")
                             for part in path.relative_to(root).parts[:-1]))


def test_the_scan_finds_private_uses_and_ignores_the_class_own():
    model = (
        "class MemoryModel:\n"
        "    _cache_limit = 4\n"
        "    def __init__(self):\n"
        "        self._weights = None\n"
        "    def _run(self):\n"
        "        return self._weights\n"
        "    def step(self):\n"
        "        return self._run()\n"
        "class Other:\n"
        "    def _elsewhere(self):\n"
        "        pass\n"
    )
    names = private_members(model)
    assert names == {"_cache_limit", "_weights", "_run"}
    caller = (
        "def f(model):\n"
        "    model.step()\n"
        "    model._run()\n"
        "    model._weights = None\n"
        "    x = getattr(model, '_cache_limit')\n"
        "    model.base._elsewhere()\n"
        "    return self._run()\n"
    )
    assert private_uses(caller, names) == [(3, "_run"), (4, "_weights"), (5, "_cache_limit")]
    assert private_uses(model, names) == []


def test_the_memory_model_has_private_members_to_protect():
    names = model_private_members()
    assert {"_window_rows", "_decode_rows", "_weights_hash", "_decode"} <= names


def test_no_module_outside_the_model_uses_its_private_members():
    names = model_private_members()
    files = python_files()
    assert ROOT / "memorag" / "memory" / "decoding.py" in files and Path(__file__) in files
    offences = [f"{path.relative_to(ROOT)}:{line}: {name}"
                for path in files if path not in (MODEL, CORE)
                for line, name in private_uses(path.read_text(encoding="utf-8"), names)]
    assert offences == [], "use the memory model's public step and methods instead:\n" + "\n".join(offences)
