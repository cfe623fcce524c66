"""Checks over the repository's own files: scripts find the package the way a checkout installs it,
and every repository path the code and docs cite exists."""

from __future__ import annotations

import ast
import re
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


# Folders whose paths, when cited in a .py, .md or .yaml file, must exist in the checkout.
CITED_FOLDERS = ("docs", "tests", "benchmarks", "configs", "examples", "slurm")
_CITED = re.compile(r"(?<![\w./-])((?:" + "|".join(CITED_FOLDERS) + r")/[\w./*-]*)")
# Placeholders in a cited path (`memorize-HOST.json`, `step-N.json`): a pattern, not a file.
_PLACEHOLDER = re.compile(r"(?<![A-Za-z])(HOST|N|STEP|NAME|RANK)(?![A-Za-z])")
# Files a script writes when run (its default output), named in its help; not citations.
WRITTEN_BY_RUNS = {"benchmarks/results/train.json": "benchmarks/train.py --json"}
_SKIPPED_FOLDERS = {".git", ".venv", "runs", "outputs", "__pycache__", ".ruff_cache", ".pytest_cache"}


def cited_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of each repository path cited in `text`, templates (`{...}`, `<...>`,
    `[...]`, placeholders) left out."""
    cited = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in _CITED.finditer(line):
            path = match.group(1).rstrip(".")
            if line[match.end():match.end() + 1] in ("{", "<", "[", "$") or _PLACEHOLDER.search(path):
                continue
            cited.append((number, path))
    return cited


def dangling(root: Path, path: str) -> bool:
    if path in WRITTEN_BY_RUNS:
        return False
    return not any(root.glob(path)) if "*" in path else not (root / path).exists()


def _cited_files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*")
                  if path.suffix in (".py", ".md", ".yaml", ".yml") and path.is_file()
                  and not _SKIPPED_FOLDERS.intersection(path.relative_to(root).parts))


def test_the_citation_check_finds_a_dangling_path(tmp_path):
    docs = CITED_FOLDERS[0]  # spelled indirectly, so that this file cites nothing itself
    (tmp_path / docs).mkdir()
    (tmp_path / docs / "here.md").write_text("x")
    text = (f"see {docs}/here.md, and {docs}/gone.md; tests/x_{{n}}.py is a template,\n"
            f"benchmarks/results/memorize-HOST.json a placeholder, ({docs}/here.md) again")
    cited = cited_paths(text)
    assert cited == [(1, f"{docs}/here.md"), (1, f"{docs}/gone.md"), (2, f"{docs}/here.md")]
    assert [path for _, path in cited if dangling(tmp_path, path)] == [f"{docs}/gone.md"]


def test_every_cited_repository_path_exists():
    files = _cited_files(ROOT)
    assert len(files) > 100
    problems = [f"{file.relative_to(ROOT)}:{line}: {path}"
                for file in files for line, path in cited_paths(file.read_text(encoding="utf-8", errors="replace"))
                if dangling(ROOT, path)]
    assert not problems, "paths cited but not in the repository:\n" + "\n".join(problems)
    for path, writer in WRITTEN_BY_RUNS.items():  # the exemption stays tied to a script that writes it
        assert path in (ROOT / writer.split()[0]).read_text(encoding="utf-8"), (path, writer)
