"""Where a span of a document lies in the file it was read from: its pages and its section.

A document read from a file keeps two maps of its text (`memorag.documents` builds them):
`page_starts`, the character offset at which each page begins (page n starts at
`page_starts[n - 1]`; PDF only), and `headings`, the heading path in force from a character
offset on (Markdown, HTML, Word). `locate` turns a span's offsets into its pages and
section; `citation` writes them the way a reader checks them: "report.pdf, p. 12".
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple


class Heading(NamedTuple):
    """From `start_char` on (up to the next heading), the text lies under `path` (outermost first)."""

    start_char: int
    path: tuple[str, ...]


class Location(NamedTuple):
    """A span's first and last page (None: the text has no pages) and its heading path (empty: none)."""

    page: int | None
    last_page: int | None
    section: list[str]


def locate(page_starts: Sequence[int], headings: Sequence[Heading], start_char: int, end_char: int) -> Location:
    """The pages `[start_char, end_char)` runs over and the section its start lies in."""
    page = last_page = None
    if page_starts:
        page = max(1, bisect_right(page_starts, start_char))
        last_page = max(page, bisect_right(page_starts, max(start_char, end_char - 1)))
    section: list[str] = []
    if headings:
        at = bisect_right([heading.start_char for heading in headings], start_char)
        if at:
            section = list(headings[at - 1].path)
    return Location(page, last_page, section)


def citation(name: str, page: int | None, last_page: int | None, section: Sequence[str],
             start_char: int | None = None, end_char: int | None = None) -> str:
    """How an answer names its source: "report.pdf, p. 12", "report.pdf, pp. 12-13",
    "guide.md, § Install > Linux", or for text with neither pages nor headings its characters."""
    if page is not None:
        where = f"p. {page}" if last_page in (None, page) else f"pp. {page}-{last_page}"
    elif section:
        where = "§ " + " > ".join(section)
    elif start_char is not None and end_char is not None:
        where = f"chars {start_char}-{end_char}"
    else:
        return name
    return f"{name}, {where}"
