"""The site's links read as page titles, and repository paths link to their files
(docs/hooks/repository_pages.py, run on a page's Markdown as MkDocs runs it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("_docs_repository_pages", ROOT / "docs" / "hooks" / "repository_pages.py")
repository_pages = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(repository_pages)

REPO = "https://example.org/owner/memorag-open"


def render(markdown: str, repo_url: str | None = REPO, page: str = "guide.md") -> str:
    config = {"docs_dir": str(ROOT / "docs"), "repo_url": repo_url}
    return repository_pages.on_page_markdown(markdown, SimpleNamespace(file=SimpleNamespace(src_uri=page)),
                                             config, None)


def test_a_link_that_reads_as_a_file_name_reads_as_the_page_title():
    assert render("See [docs/usage.md](usage.md).") == "See [Usage: the command line and Python](usage.md)."
    assert render("See [usage](usage.md#no-answer).") == "See [usage](usage.md#no-answer)."


def test_a_repository_path_links_to_the_file_when_the_repository_is_known():
    linked = render("Run `configs/debug.yaml` and `benchmarks/` now.")
    assert f"[`configs/debug.yaml`]({REPO}/blob/main/configs/debug.yaml)" in linked
    assert f"[`benchmarks/`]({REPO}/tree/main/benchmarks)" in linked
    assert render("Run `configs/debug.yaml`.", repo_url=None) == "Run `configs/debug.yaml`."


def test_paths_that_are_not_files_and_code_blocks_are_left_alone():
    assert render("A `no/such/file.yaml` here.") == "A `no/such/file.yaml` here."
    block = "```sh\npython `configs/debug.yaml`\n```\n"
    assert render(block) == block
