"""Checks over the repository's own files: scripts find the package the way a checkout installs it,
and every repository path and every name of the package (a module, or a name a module
defines) that the code and docs cite exists."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

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
CITED_FOLDERS = ("docs", "tests", "benchmarks", "configs", "examples", "slurm", "memorag", "results")
_CITED = re.compile(r"(?<![\w./-])((?:" + "|".join(CITED_FOLDERS) + r")/[\w./*-]*)")
# Placeholders in a cited path (`memorize-HOST.json`, `step-N.json`): a pattern, not a file.
_PLACEHOLDER = re.compile(r"(?<![A-Za-z])(HOST|N|STEP|NAME|RANK)(?![A-Za-z])")
# Files a script writes when run (its default output), named in its help; not citations.
WRITTEN_BY_RUNS = {"results/benchmarks/train.json": "benchmarks/train.py --json"}
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
            f"results/benchmarks/memorize-HOST.json a placeholder, ({docs}/here.md) again")
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


# Dotted names of the package (`memorag.memory.checkpoint.memory_weights_for`), cited in the same files:
# the module must exist and define the name that follows it (attributes further on are not checked).
# A quoted one is a value (a logger's name, a metadata key), not a citation.
PACKAGE = "memorag"
_MODULE_CITED = re.compile(r"(?<![\w.'\"/-])(" + PACKAGE + r"(?:\.[A-Za-z_]\w*)+)")


def cited_modules(text: str) -> list[tuple[int, str]]:
    """(line, dotted name) of each package name cited in `text`."""
    return [(number, match.group(1)) for number, line in enumerate(text.splitlines(), start=1)
            for match in _MODULE_CITED.finditer(line)]


def _module_file(root: Path, parts: list[str]) -> Path | None:
    path = root.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _defined_names(module: Path) -> set[str]:
    """The names a module defines at its top level (also inside `if`/`try`), and, when it serves
    names on first use (a module `__getattr__`), the strings it holds."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    statements = list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            statements += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                           *(item for handler in getattr(node, "handlers", []) for item in handler.body)]
    if "__getattr__" in names:
        names |= {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    return names


def dangling_module(root: Path, dotted: str) -> bool:
    """Whether no module of `dotted`'s leading parts exists, or the one that does lacks the next name."""
    parts = dotted.split(".")
    for length in range(len(parts), 0, -1):
        module = _module_file(root, parts[:length])
        if module is not None:
            break
    else:
        return True
    if length == len(parts):
        return False
    name = parts[length]
    return not (name.startswith("__") and name.endswith("__")) and name not in _defined_names(module)


def test_the_module_check_finds_a_dangling_name(tmp_path):
    package = tmp_path / PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("def __getattr__(name):\n    return {'Lazy': 1}[name]\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "real.py").write_text("try:\n    import json as codec\nexcept ImportError:\n    codec = None\n"
                                              "LIMIT: int = 3\n\nclass Thing:\n    size = 1\n")
    p = PACKAGE  # spelled indirectly, so that this file cites nothing itself
    text = (f"`{p}.sub.real.Thing.size`, {p}.sub.real.codec and {p}.sub.real.LIMIT;\n"
            f"{p}.sub.gone, {p}.sub.real.Missing, {p}.Lazy, {p}.__path__, and '{p}.a_value' (quoted)")
    cited = cited_modules(text)
    assert [name for _, name in cited] == [f"{p}.sub.real.Thing.size", f"{p}.sub.real.codec", f"{p}.sub.real.LIMIT",
                                           f"{p}.sub.gone", f"{p}.sub.real.Missing", f"{p}.Lazy", f"{p}.__path__"]
    assert [name for _, name in cited if dangling_module(tmp_path, name)] == [f"{p}.sub.gone", f"{p}.sub.real.Missing"]


def test_every_cited_package_name_exists():
    files = _cited_files(ROOT)
    problems = [f"{file.relative_to(ROOT)}:{line}: {name}"
                for file in files for line, name in cited_modules(file.read_text(encoding="utf-8", errors="replace"))
                if dangling_module(ROOT, name)]
    assert not problems, "package names cited but not defined (moved or renamed?):\n" + "\n".join(problems)


def _package_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of each name a script imports from the package: `from PACKAGE.a import b`
    gives `PACKAGE.a.b`, `import PACKAGE.a` gives `PACKAGE.a`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == PACKAGE:
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == PACKAGE]
    return found


def test_the_import_check_finds_a_stale_import(tmp_path):
    package = tmp_path / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "here.py").write_text("def kept():\n    pass\n")
    tree = ast.parse(f"from {PACKAGE}.here import kept\nfrom {PACKAGE} import gone\nimport {PACKAGE}.here\n")
    imports = _package_imports(tree)
    assert imports == [(1, f"{PACKAGE}.here.kept"), (2, f"{PACKAGE}.gone"), (3, f"{PACKAGE}.here")]
    assert [name for _, name in imports if dangling_module(tmp_path, name)] == [f"{PACKAGE}.gone"]


def test_every_script_imports_only_names_the_package_defines():
    """A script's `from PACKAGE... import name` names a module or a name the package still has
    (fast, without running anything; the slow test below imports each script for real)."""
    problems = [f"{script.relative_to(ROOT)}:{line}: {name}"
                for script in _scripts() for line, name in _package_imports(ast.parse(script.read_text(encoding="utf-8")))
                if dangling_module(ROOT, name)]
    assert not problems, "scripts import names the package no longer has:\n" + "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("script", _scripts(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_script_imports(script, monkeypatch):
    """Each script imports as `python SCRIPT` would run it (its folder first on sys.path), its main
    guarded: an import that no longer resolves fails here, not on the day someone runs it."""
    monkeypatch.syspath_prepend(str(script.parent))
    spec = importlib.util.spec_from_file_location(f"_script_{script.parent.name}_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)


def test_results_hold_records_only():
    """results/ holds measured records, not code: the scripts that write them live in benchmarks/,
    eval/ and train/, where the checks above import them."""
    code = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "results").rglob("*")
                  if path.suffix in (".py", ".sh", ".ipynb"))
    assert not code, "code under results/ (move it to benchmarks/ or eval/):\n" + "\n".join(code)


MAX_FILE_BYTES = 5 * 10**6  # weights and data above this belong in a package or are built, never in git


def test_no_file_git_holds_is_above_5_mb():
    import subprocess

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the files git holds are unknown")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    sizes = {name: (ROOT / name).stat().st_size for name in listed.decode().split("\0") if name and (ROOT / name).is_file()}
    assert len(sizes) > 100
    assert not {name: size for name, size in sizes.items() if size > MAX_FILE_BYTES}
