"""The site's links read as page titles, and repository paths link to their files
(docs/hooks/repository_pages.py, run on a page's Markdown as MkDocs runs it); every `src` and `href`
of the built HTML resolves (docs/hooks/built_links.py, run on a small site folder written here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("_docs_repository_pages", ROOT / "docs" / "hooks" / "repository_pages.py")
repository_pages = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(repository_pages)
BUILT_SPEC = importlib.util.spec_from_file_location("_docs_built_links", ROOT / "docs" / "hooks" / "built_links.py")
built_links = importlib.util.module_from_spec(BUILT_SPEC)
BUILT_SPEC.loader.exec_module(built_links)

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



def _site(tmp_path: Path, serving_page: str) -> Path:
    """A built site of two pages with an images folder beside them, laid out as MkDocs lays one out."""
    site = tmp_path / "site"
    (site / "serving").mkdir(parents=True)
    (site / "images").mkdir()
    (site / "images" / "phone.png").write_bytes(b"\x89PNG")
    (site / "index.html").write_text('<h1 id="top">Home</h1><a href="serving/">Serving</a>\n'
                                     '<a href="serving/#the-inspector">the inspector</a>', encoding="utf-8")
    (site / "serving" / "index.html").write_text(serving_page, encoding="utf-8")
    return site


def test_the_built_site_check_passes_links_that_land(tmp_path):
    page = ('<h2 id="the-inspector">The inspector</h2><img src="../images/phone.png" alt="">\n'
            '<a href="../">home</a> <a href="../index.html#top">top</a> <a href="#the-inspector">here</a>\n'
            '<a href="https://example.org/x">out</a> <a href="mailto:a@example.org">mail</a> <a href="#">top</a>\n'
            '<img src="data:image/png;base64,AA==" alt=""> <a href="../images/phone.png?v=1">raw</a>')
    assert built_links.broken_links(_site(tmp_path, page)) == []


def test_the_built_site_check_names_each_broken_src_and_href_with_its_page(tmp_path):
    page = ('<h2 id="the-inspector">The inspector</h2>\n'
            '<img src="images/phone.png" alt="relative to the Markdown file, not the page">\n'
            '<a href="../gone/">gone</a> <a href="#no-such-part">nowhere</a> <a href="../../../etc/passwd">out</a>')
    assert built_links.broken_links(_site(tmp_path, page)) == [
        "serving/index.html:2: src='images/phone.png' names no file of the site",
        "serving/index.html:3: href='../gone/' names no file of the site",
        "serving/index.html:3: href='#no-such-part': no id 'no-such-part' on that page",
        "serving/index.html:3: href='../../../etc/passwd' points outside the site",
    ]


def test_paths_from_the_root_start_at_the_sites_address(tmp_path):
    site = _site(tmp_path, '<h2 id="the-inspector">The inspector</h2>\n'
                           '<link href="/memorag-open/images/phone.png"> <a href="/memorag-open/">home</a>\n'
                           '<a href="/images/phone.png">elsewhere on the host</a>')
    assert built_links.broken_links(site, "/memorag-open/") == [
        "serving/index.html:3: href='/images/phone.png' points outside the site"]
    assert built_links.broken_links(site) == [
        "serving/index.html:2: href='/memorag-open/images/phone.png' names no file of the site",
        "serving/index.html:2: href='/memorag-open/' names no file of the site"]


def test_a_broken_link_fails_the_build(tmp_path):
    from mkdocs.exceptions import PluginError

    site = _site(tmp_path, '<h2 id="the-inspector">The inspector</h2><img src="images/phone.png" alt="">')
    with pytest.raises(PluginError, match=r"1 link\(s\) .*\n  serving/index.html:1: src='images/phone.png'"):
        built_links.on_post_build({"site_dir": str(site)})
    (site / "serving" / "index.html").write_text('<h2 id="the-inspector">The inspector</h2>'
                                                 '<img src="../images/phone.png" alt="">', encoding="utf-8")
    built_links.on_post_build({"site_dir": str(site)})
