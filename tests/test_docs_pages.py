"""The documentation site's pages: user pages carry no engineering logs, and every link lands.

User pages are the home page and those of the site's Get started, Tutorials, Concepts, Guides, Results
and Reference sections (read from mkdocs.yml's nav): they name no GPU lease (not even in a record's
path), no `$OUT`, no temporary folder and no commit hash; those belong to the Contributors section.
A link from any page (or from the README and CONTRIBUTING.md, which the site shows) to a page, an
anchor or a repository file must exist. The strict build checks the same links; this test names every
fault at once, in seconds, without a build.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
USER_SECTIONS = ("Home", "Get started", "Tutorials", "Concepts", "Guides", "Results", "Reference")
GENERATED = {"index.md": ROOT / "README.md", "contributing.md": ROOT / "CONTRIBUTING.md"}
WRITTEN_BY_HOOKS = {DOCS / "reference" / "cli.md", DOCS / "changelog.md"}  # docs/hooks/ write them at build time
LINK = re.compile(r"(?<!!)\[(?:[^\]]+)\]\((?P<target>[^)\s]+)\)|!\[[^\]]*\]\((?P<image>[^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
# What a user page must not say: a lease (anywhere), the device tool's output folder, a temporary folder, a
# commit hash (7-40 hex digits holding a digit and a letter). Code spans that are repository paths
# (`results/benchmarks/gpu-h100-2026-11-25/`) are names of records, not logs, and are left out, except
# that no part of a user page, a path included, says "lease" (users say a time-boxed run).
ENGINEERING_LOG = re.compile(
    r"\$OUT\b|(?<![\w.])/tmp/|(?<![\w/.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])",
    re.IGNORECASE)
REPOSITORY_PATH_SPAN = re.compile(r"`[\w.-]+/[^`\s]*`")
LEASE = re.compile(r"(?<![a-z])lease", re.IGNORECASE)  # not "release" or "please"


class _Loader(yaml.SafeLoader):
    """mkdocs.yml's tags (`!ENV`, python names) read as plain values: only the nav is wanted here."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def nav_pages(sections: tuple[str, ...] | None = None) -> list[str]:
    """The pages of mkdocs.yml's nav, or of the named top-level sections only."""
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)["nav"]
    pages: list[str] = []

    def walk(item) -> None:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, list):
            for child in item:
                walk(child)
        elif isinstance(item, dict):
            for child in item.values():
                walk(child)

    for entry in nav:
        (title, value), = entry.items()
        if sections is None or title in sections:
            walk(value)
    return pages


def prose(text: str) -> str:
    """`text` without its fenced code blocks' markers (their content counts: commands are read too)."""
    return "\n".join("" if FENCE.match(line) else line for line in text.splitlines())


def log_mentions(text: str) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(prose(text).splitlines(), start=1):
        found += [(number, match.group(0)) for match in LEASE.finditer(line)]
        line = REPOSITORY_PATH_SPAN.sub("", re.sub(r"\]\([^)\s]*\)", "]", line))  # link targets are file names
        found += [(number, match.group(0)) for match in ENGINEERING_LOG.finditer(line)]
    return found


def source_of(page: str) -> Path | None:
    """The Markdown file a page is built from (None for a page a hook writes)."""
    if page in GENERATED:
        return GENERATED[page]
    path = DOCS / page
    return path if path.is_file() else None


def anchors_of(path: Path) -> set[str]:
    anchors, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"^#{1,6}\s+(.*?)\s*#*$", line)):
            anchors.add(slugify(re.sub(r"[`*_]", "", heading[1]), "-"))
    return anchors


def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if ROOT in path.parents else path.name


def broken_links(source: Path, base: Path) -> list[str]:
    """Links of `source` (relative to `base`) to a file, page or anchor that does not exist."""
    problems, fenced = [], False
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match["target"] or match["image"]
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path_part, _, anchor = target.partition("#")
            resolved = (base / path_part).resolve() if path_part else source
            if path_part.startswith("figures/") or "/figures/" in path_part:
                continue  # drawn at build time by docs/hooks/figures.py
            if resolved == DOCS / "index.md" or resolved == DOCS / "contributing.md":
                resolved = GENERATED[resolved.name]
            if resolved in WRITTEN_BY_HOOKS:
                continue
            if not resolved.exists():
                problems.append(f"{_shown(source)}:{number}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved):
                problems.append(f"{_shown(source)}:{number}: {target} (no such heading)")
    return problems


def test_the_checks_find_what_they_look_for(tmp_path):
    text = ("Run `results/benchmarks/gpu-h100-2026-11-25/` again.\nThe lease ended; see $OUT/gpu and\n"
            "/tmp/main-67f4846 at commit 9dc8ed4, not 1,024 tokens or 2026-11-28.\n"
            "Read [the record](../results/benchmarks/lease-h200-2026-11-26/NOTE.md), released, please.\n")
    assert log_mentions(text) == [(2, "lease"), (2, "$OUT"), (3, "/tmp/"), (3, "9dc8ed4"), (4, "lease")]
    page = tmp_path / "page.md"
    page.write_text("# A title\n\n## Some part\n\n[ok](#some-part) [bad](#other) [gone](gone.md) "
                    "[self](page.md#a-title)\n```\n[skipped](nowhere.md)\n```\n")
    assert broken_links(page, tmp_path) == ["page.md:5: #other (no such heading)", "page.md:5: gone.md (no such file)"]


@pytest.mark.parametrize("page", nav_pages(USER_SECTIONS))
def test_user_pages_carry_no_engineering_log(page):
    source = source_of(page)
    if source is None:
        pytest.skip(f"{page} is written by a hook from the code")
    found = log_mentions(source.read_text(encoding="utf-8"))
    assert not found, f"{page} names engineering logs (move them to the Contributors section): {found}"


def test_every_link_of_the_site_lands():
    problems = []
    for page in nav_pages():
        source = source_of(page)
        if source is not None:
            problems += broken_links(source, source.parent)
    assert not problems, "links to nothing:\n" + "\n".join(problems)


def test_every_page_is_in_the_nav():
    pages = set(nav_pages())
    missing = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md") if "hooks" not in path.parts
                     and path.relative_to(DOCS).as_posix() not in pages)
    assert not missing, f"pages the site's navigation does not reach: {missing}"
