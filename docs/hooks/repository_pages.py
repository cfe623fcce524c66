"""MkDocs hook: the repository's own top-level pages in the site, and links to repository files.

- `index.md`, `contributing.md` and `changelog.md` are README.md, CONTRIBUTING.md and CHANGELOG.md,
  generated at build time, so each is written once, where a code host shows it.
- A link that leaves `docs/` (a raw record under results/benchmarks/, a config, a test) names a file of
  the repository, not a page: it becomes its path in code type, after checking that the file exists;
  a link to a missing file is a warning, which `mkdocs build --strict` turns into a failure. Links
  between pages are left to MkDocs, which checks them too.
- With the repository's address known (`repo_url`, from MEMORAG_REPO_URL), such a path, and every
  repository path written in code type (`configs/debug.yaml`), links to the file on the code host.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.repository_pages")

ROOT = Path(__file__).resolve().parents[2]
GENERATED = {"index.md": "README.md", "contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)")
PATH_SPAN = re.compile(r"(?<![\[`])`(?P<path>[\w.-]+/[\w./-]*)`(?![\]`])")
BRANCH = "main"


def on_files(files, config):
    for page, source in GENERATED.items():
        files.append(File.generated(config, page, content=(ROOT / source).read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs = Path(config["docs_dir"]).resolve()
    source = page.file.src_uri
    base = ROOT if source in GENERATED else (docs / source).parent  # where the page's relative links start
    page_dir = (docs / source).parent

    def rewrite(match: re.Match) -> str:
        text, target = match["text"], match["target"]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return match[0]
        path, _, anchor = target.partition("#")
        resolved = (base / path).resolve()
        if resolved == docs or docs in resolved.parents:
            if resolved.is_dir():
                resolved = resolved / "index.md"
            relative = os.path.relpath(resolved, page_dir).replace(os.sep, "/")
            if text.strip("`").endswith(".md"):  # a link that reads as a file name reads as the page's title
                text = _title(resolved) or text
            return f"[{text}]({relative}{'#' + anchor if anchor else ''})"
        if not resolved.exists() or ROOT not in resolved.parents:
            log.warning("%s links to %s, which is not a file of the repository", source, target)
            return match[0]
        shown = resolved.relative_to(ROOT).as_posix() + ("/" if resolved.is_dir() else "")
        if text.strip("`") in (shown, shown.rstrip("/"), resolved.name, resolved.name + "/"):
            return f"`{shown}`"
        return f"{text} (`{shown}`)"

    def link_path(match: re.Match) -> str:
        path = match["path"]
        if not (ROOT / path).exists() or docs in (ROOT / path).resolve().parents:
            return match[0]
        kind = "tree" if (ROOT / path).is_dir() else "blob"
        return f"[`{path}`]({repo}/{kind}/{BRANCH}/{path.rstrip('/')})"

    repo = (config.get("repo_url") or "").rstrip("/")

    def change(text: str) -> str:
        text = LINK.sub(rewrite, text)
        return PATH_SPAN.sub(link_path, text) if repo else text

    return _outside_fences(markdown, change)


def _title(page: Path) -> str | None:
    """The first heading of a page's Markdown (README.md's for the generated index)."""
    source = ROOT / GENERATED[page.name] if page.name in GENERATED and page.parent.name == "docs" else page
    if not source.is_file():
        return None
    heading = next((line for line in source.read_text(encoding="utf-8").splitlines() if line.startswith("# ")), None)
    return heading[2:].strip() if heading else None


def _outside_fences(markdown: str, change) -> str:
    """`change` applied to the text between fenced code blocks only: code is shown as written."""
    parts, prose, fence = [], [], None
    for line in markdown.splitlines(keepends=True):
        marker = re.match(r"\s*(`{3,}|~{3,})", line)
        if fence is None and marker:
            parts.append(change("".join(prose)))
            prose, fence = [], marker[1]
            parts.append(line)
        elif fence is not None:
            parts.append(line)
            if marker and marker[1].startswith(fence) and line.strip() == marker[1]:
                fence = None
        else:
            prose.append(line)
    parts.append(change("".join(prose)))
    return "".join(parts)
