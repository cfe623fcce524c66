"""Where a passage of evidence lies in its document, for the evidence inspector: the page or
section around it, its text, and the passage's place in that text.

A PDF passage is shown on its page (the page's text, and its image when the file was kept:
`memorag.serve.originals`, `memorag.serve.pages`); a passage of a Markdown, HTML or Word
document in its section (from its heading to the next); plain text in the characters around
it. The text sent is at most `MAX_CONTEXT_CHARS`, cut around the passage when longer.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from memorag.errors import InputError
from memorag.retrieval.chunking import Document

MAX_CONTEXT_CHARS = 12_000
PLAIN_CONTEXT_CHARS = 1_500  # characters shown each side of a passage in text with neither pages nor headings


def check_span(document: Document, start_char: int, end_char: int) -> None:
    if not 0 <= start_char < end_char <= len(document.text):
        raise InputError(f"characters {start_char}-{end_char} are not a span of document {document.id!r} "
                         f"({len(document.text):,} characters); give 0 <= start < end <= its length")


def page_span(document: Document, page: int) -> tuple[int, int]:
    """The characters of page `page` (1-based) in a document read from a PDF."""
    starts = document.page_starts
    if not 1 <= page <= len(starts):
        raise InputError(f"document {document.id!r} has {len(starts)} page(s), not a page {page}")
    return starts[page - 1], starts[page] if page < len(starts) else len(document.text)


def section_span(document: Document, start_char: int, end_char: int) -> tuple[int, int]:
    """The characters of the part a passage is shown in: its first page, its section, or the text around it."""
    if document.page_starts:
        return page_span(document, max(1, bisect_right(document.page_starts, start_char)))
    if document.headings:
        starts = [heading.start_char for heading in document.headings]
        at = bisect_right(starts, start_char)
        begin = starts[at - 1] if at else 0
        end = next((start for start in starts[at:] if start >= end_char), len(document.text))
        return begin, end
    return max(0, start_char - PLAIN_CONTEXT_CHARS), min(len(document.text), end_char + PLAIN_CONTEXT_CHARS)


def passage_context(document: Document, start_char: int, end_char: int, page: int | None = None) -> dict[str, Any]:
    """The page, section or text around `document.text[start_char:end_char]`, and where the passage lies in it;
    with `page`, that page of a PDF's text (a passage over several pages: each of them in turn).

    `text` is `document.text[offset:offset + len(text)]`; the passage is `text[mark_start:mark_end]` (empty
    when none of it is on `page`); `shown_page` is the page whose text it is (None: a section or surroundings)."""
    check_span(document, start_char, end_char)
    if page is not None and not document.page_starts:
        raise InputError(f"document {document.id!r} has no pages (it was not read from a PDF); leave out page")
    begin, end = page_span(document, page) if page is not None else section_span(document, start_char, end_char)
    shown_page = page if page is not None else \
        (max(1, bisect_right(document.page_starts, start_char)) if document.page_starts else None)
    if end - begin > MAX_CONTEXT_CHARS:
        room = max(0, MAX_CONTEXT_CHARS - (end_char - start_char)) // 2
        begin = max(begin, start_char - room)
        end = min(end, begin + MAX_CONTEXT_CHARS)  # a passage longer than that (a whole document) is cut too
    location = document.locate(start_char, end_char)
    return {
        "doc_id": document.id, "title": document.title, "source": document.source,
        "page": location.page, "last_page": location.last_page, "pages": len(document.page_starts),
        "section": location.section, "shown_page": shown_page, "offset": begin, "text": document.text[begin:end],
        "mark_start": min(max(start_char, begin), end) - begin, "mark_end": max(min(end_char, end), begin) - begin,
    }


def passage_on_page(document: Document, start_char: int, end_char: int, page: int) -> str:
    """The part of `document.text[start_char:end_char]` that lies on page `page` ("" if none)."""
    check_span(document, start_char, end_char)
    begin, end = page_span(document, page)
    return document.text[max(begin, start_char): min(end, end_char)]
