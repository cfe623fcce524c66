"""MkDocs hook: after the build, every `src` and `href` of the built site that points inside it resolves.

MkDocs checks the links it rewrites from Markdown, but not a path written in raw HTML or one a theme or
hook writes; a wrong one (an `<img src>` relative to the page's Markdown file rather than its built URL)
is a broken image on the published site. So the built HTML is read back: each `src` and `href` that is
not an address elsewhere (`https:`, `mailto:`, `data:`, `//host`) must name a file under the site folder
(a folder stands for its `index.html`; a path from the root starts at the site's address, `site_url`),
and a `#fragment` on an HTML page must be an `id` (or an `<a name>`) of that page. Nothing is fetched. A fault fails the build with each broken link and the page it is on.

    python docs/hooks/built_links.py site      # the same check on a built site folder
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LINK_ATTRIBUTES = ("src", "href")


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, int]] = []  # (attribute, value, line)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        line = self.getpos()[0]
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)
            elif name in LINK_ATTRIBUTES:
                self.links.append((name, value.strip(), line))

    handle_startendtag = handle_starttag


def _parse(page: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser


def _is_elsewhere(value: str) -> bool:
    parts = urlsplit(value)
    return bool(parts.scheme) or value.startswith("//")


def broken_links(site: str | Path, root: str = "/") -> list[str]:
    """Each `src`/`href` in the HTML under `site` that names a missing file or id, as 'page:line: ...'.

    `root` is the path the site is served under (`/memorag-open/` for https://host/memorag-open/).
    """
    site = Path(site).resolve()
    root = f"/{root.strip('/')}/".replace("//", "/")
    pages = {page: _parse(page) for page in sorted(site.rglob("*.html"))}
    problems = []
    for page, parsed in pages.items():
        shown = page.relative_to(site).as_posix()
        for attribute, value, line in parsed.links:
            if not value or _is_elsewhere(value):
                continue
            parts = urlsplit(value)
            path, fragment = unquote(parts.path), unquote(parts.fragment)
            if not path:
                target = page
            elif path.startswith("/"):
                within = (path + "/").startswith(root)  # a root path outside the site's own is outside it
                target = (site / path[len(root):]).resolve() if within else site.parent
            else:
                target = (page.parent / path).resolve()
            if target.is_dir():
                target = target / "index.html"
            if target != site and site not in target.parents:
                problems.append(f"{shown}:{line}: {attribute}={value!r} points outside the site")
            elif not target.is_file():
                problems.append(f"{shown}:{line}: {attribute}={value!r} names no file of the site")
            elif fragment and target in pages and fragment not in pages[target].ids:
                problems.append(f"{shown}:{line}: {attribute}={value!r}: no id {fragment!r} on that page")
    return problems


def on_post_build(config, **kwargs) -> None:
    from mkdocs.exceptions import PluginError

    problems = broken_links(config["site_dir"], urlsplit(config.get("site_url") or "").path or "/")
    if problems:
        raise PluginError(f"{len(problems)} link(s) of the built site lead nowhere:\n  " + "\n  ".join(problems))


if __name__ == "__main__":
    found = broken_links(sys.argv[1] if len(sys.argv) > 1 else "site")
    print("\n".join(found) or "every src and href of the site resolves")
    sys.exit(1 if found else 0)
