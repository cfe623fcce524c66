"""Checks over the repository's own files: scripts find the package the way a checkout installs it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_FOLDERS = ("train", "eval", "benchmarks")


def _scripts() -> list[Path]:
    return sorted(path for folder in SCRIPT_FOLDERS for path in (ROOT / folder).rglob("*.py"))


def _sys_path_edits(tree: ast.AST) -> list[int]:
    """Lines that touch `sys.path` (insert, append, assignment, ...)."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys"]


def _script_folder_imports(tree: ast.AST) -> list[int]:
    """Lines importing another script folder as a package (works only with the checkout on sys.path)."""
    lines = []
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(name.split(".")[0] in SCRIPT_FOLDERS for name in names):
            lines.append(node.lineno)
    return lines


def test_the_checks_see_what_they_look_for():
    tree = ast.parse("import sys\nsys.path.insert(0, '.')\nfrom benchmarks.roofline import Shape\nimport eval.run\n")
    assert _sys_path_edits(tree) == [2] and _script_folder_imports(tree) == [3, 4]


def test_scripts_neither_edit_sys_path_nor_import_other_script_folders():
    """`make setup` installs the package (editable), so a script imports `memorag` like any user
    code; code two scripts share lives in the package."""
    scripts = _scripts()
    assert len(scripts) > 10
    problems = []
    for script in scripts:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        rel = script.relative_to(ROOT)
        problems += [f"{rel}:{line}: edits sys.path" for line in _sys_path_edits(tree)]
        problems += [f"{rel}:{line}: imports a script folder" for line in _script_folder_imports(tree)]
    assert not problems, "\n".join(problems)
