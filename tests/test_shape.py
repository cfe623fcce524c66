"""The package's shape: no function in `memorag/` longer than `MAX_FUNCTION_LINES` (a function
counts from its `def` to its last line, the functions nested in it included)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60


def long_functions(path: Path, root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`file:line name (N lines)` for each function of the Python file at `path` over `limit`
    lines, the file named relative to `root`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit]


def test_the_check_sees_a_function_of_61_lines(tmp_path):
    body = "".join(f"    x{number} = {number}\n" for number in range(59))
    (tmp_path / "long.py").write_text(f"def long_one():\n{body}    return 0\n\n\ndef short_one():\n    return 1\n")
    (tmp_path / "edge.py").write_text(f"async def at_the_limit():\n{body}\n")
    assert long_functions(tmp_path / "long.py", tmp_path) == ["long.py:1 long_one (61 lines)"]
    assert long_functions(tmp_path / "edge.py", tmp_path) == []  # 60 lines: allowed


def test_no_function_in_the_package_is_over_60_lines():
    found = [item for path in sorted((ROOT / "memorag").rglob("*.py")) for item in long_functions(path, ROOT)]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split each into functions with one job): {found}"
