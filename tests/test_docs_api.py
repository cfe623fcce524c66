"""The Python API page documents every public type a user handles.

The types a user holds are the classes `import memorag` names, the parts of an answer, the
document-reading types, a corpus's chunks and hits, the errors a caller catches, and the Lite memory's
types a user sets, reads or catches. Each must appear on docs/reference/api.md as a mkdocstrings block
(`::: module.Name`) that resolves to the class the user gets, so the page can neither lose a type nor
point at a module that moved. The package is read statically with griffe (what mkdocstrings reads),
in seconds, without importing torch.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "docs" / "reference" / "api.md"
BLOCK = re.compile(r"^:::\s+(?P<path>[\w.]+)\s*$", re.MULTILINE)
HELD_BEYOND_THE_TOP = {
    "FoundBy": "memorag.modes.results.FoundBy",
    "Document": "memorag.retrieval.chunking.Document",
    "ReadOptions": "memorag.documents.ReadOptions",
    "ReadResult": "memorag.documents.ReadResult",
    "DocumentReadError": "memorag.documents.DocumentReadError",
    "GistSettings": "memorag.lite.GistSettings",
    "GistMemory": "memorag.lite.GistMemory",
    "Gist": "memorag.lite.Gist",
    "GistWindow": "memorag.lite.GistWindow",
    "GistMemoryTooLongError": "memorag.lite.GistMemoryTooLongError",
    "Chunk": "memorag.retrieval.Chunk",
    "Hit": "memorag.retrieval.Hit",
    "PipelineError": "memorag.pipeline.PipelineError",
    "InputError": "memorag.pipeline.InputError",
    "EmptyCorpusError": "memorag.pipeline.EmptyCorpusError",
    "QueryTooLongError": "memorag.pipeline.QueryTooLongError",
    "DocumentConflictError": "memorag.pipeline.DocumentConflictError",
    "UnknownModeError": "memorag.pipeline.UnknownModeError",
    "UnsupportedTaskError": "memorag.pipeline.UnsupportedTaskError",
    "SaveDirectoryError": "memorag.pipeline.SaveDirectoryError",
    "SaveFormatError": "memorag.pipeline.SaveFormatError",
    "ManifestMismatchError": "memorag.pipeline.ManifestMismatchError",
}


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    return griffe.load("memorag", search_paths=[str(ROOT)])


def canonical(package: griffe.Module, path: str) -> str:
    """Where `path` (a dotted name under the package, possibly a re-export) is defined."""
    found = package[path.removeprefix("memorag.")]
    return (found.final_target if found.is_alias else found).canonical_path


def documented(package: griffe.Module, page_text: str) -> set[str]:
    """Where the objects of the page's `::: module.Name` blocks are defined."""
    return {canonical(package, path) for path in BLOCK.findall(page_text)}


def user_types(package: griffe.Module) -> dict[str, str]:
    """Each type a user handles: its name and where it is defined."""
    top_names = ast.literal_eval(str(package.members["_PIPELINE_NAMES"].value))
    found = {}
    for name in top_names:
        target = package["pipeline"][name]
        if (target.final_target if target.is_alias else target).is_class:
            found[name] = canonical(package, f"memorag.pipeline.{name}")
    for name, path in HELD_BEYOND_THE_TOP.items():
        found[name] = canonical(package, path)
    return found


def test_the_check_finds_a_missing_type(package):
    page = "::: memorag.modes.results.Answer\n\n::: memorag.lite.GistSettings\n"
    assert documented(package, page) == {"memorag.modes.results.Answer", "memorag.lite.settings.GistSettings"}
    assert "MemoRAG" in user_types(package) and "FoundBy" in user_types(package)
    assert set(user_types(package).values()) - documented(package, page), "a page of two blocks must miss types"


def test_the_api_page_documents_every_type_a_user_handles(package):
    shown = documented(package, API_PAGE.read_text(encoding="utf-8"))
    missing = sorted(name for name, path in user_types(package).items() if path not in shown)
    assert not missing, f"docs/reference/api.md has no `::: module.Name` block for {missing}"
