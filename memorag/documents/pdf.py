"""PDF: the text layer of each page, read with pypdfium2 (PDFium; Apache-2.0/BSD), chosen by
`benchmarks/document_formats.py` (docs/formats.md).

Kept: each page's text in PDFium's reading order, where each page begins, and the outline
(bookmarks) as heading paths. Cleaned: words hyphenated across a line end are joined again
(PDFium marks such a hyphen as soft), and a running header or footer line (the same first
or last line on many pages, page numbers aside) is dropped. Lost: images, and any page
without a text layer (a scan: the whole file is refused with the advice to run OCR).

Bounded: a page tree claiming more than `MAX_PAGES` pages is refused before any page is
loaded; PDFium's own decoding of streams is bounded by the reader process's memory and time
limits (`memorag.documents.sandbox`).
"""

from __future__ import annotations

import re
from collections import Counter

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted, TextBuilder
from memorag.locations import Heading

OCR_FIX = "it looks scanned: run OCR first, e.g. `ocrmypdf {name} {stem}-ocr.pdf`, and give the result"
_SOFT_HYPHEN_BREAK = re.compile("\x02\n")
_DIGITS = re.compile(r"\d+")
# A page needs this many letters or digits to count as having a text layer.
MIN_PAGE_CHARS = 16
MAX_PAGES = 20_000


def read_pdf(data: bytes, name: str) -> Extracted:
    import pypdfium2

    try:
        pdf = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as error:
        raise _open_error(name, str(error)) from error
    try:
        if len(pdf) > MAX_PAGES:
            raise DocumentReadError(name, f"cannot be read safely: its page tree claims {len(pdf):,} pages "
                                          f"(limit {MAX_PAGES:,})", "split it (e.g. `qpdf FILE --pages . 1-1000 -- part.pdf`)")
        pages, drawn = _page_texts(pdf, name)
        outline = _outline(pdf)
    finally:
        pdf.close()
    pages = [_SOFT_HYPHEN_BREAK.sub("", text.replace("\r\n", "\n")).replace("\x02", "-") for text in pages]
    pages = _drop_running_lines(pages)
    if not pages:
        raise DocumentReadError(name, "has no pages", "give a PDF with some text")
    if not any(sum(char.isalnum() for char in text) >= MIN_PAGE_CHARS for text in pages) and not drawn:
        raise DocumentReadError(name, f"has nothing on any of its {len(pages)} page(s) (no text, no drawing)",
                                "give a PDF with some text")
    if not any(sum(char.isalnum() for char in text) >= MIN_PAGE_CHARS for text in pages):
        stem = name.rsplit("/", 1)[-1].removesuffix(".pdf")
        raise DocumentReadError(name, f"has no text layer on any of its {len(pages)} page(s)",
                                OCR_FIX.format(name=name, stem=stem))
    builder = TextBuilder()
    for page_text in pages:
        builder.start_page()
        builder.add(page_text.strip())
    text, page_starts = builder.build().text, builder.page_starts
    headings = [Heading(page_starts[index], path) for index, path in outline if index < len(page_starts)]
    return Extracted(text, page_starts, sorted(headings, key=lambda heading: heading.start_char))


def _page_texts(pdf, name: str) -> tuple[list[str], bool]:
    """Each page's text, and whether any page draws anything (a scan does; an empty page does not)."""
    import pypdfium2

    pages, drawn = [], False
    for index in range(len(pdf)):
        page = pdf[index]
        try:
            pages.append(page.get_textpage().get_text_range())
        except pypdfium2.PdfiumError as error:
            raise DocumentReadError(name, f"page {index + 1} cannot be read ({error})",
                                    "repair it (e.g. `qpdf FILE fixed.pdf`) and give the result") from error
        drawn = drawn or pypdfium2.raw.FPDFPage_CountObjects(page.raw) > 0
    return pages, drawn


def _open_error(name: str, message: str) -> DocumentReadError:
    if "password" in message.lower() or "security" in message.lower():
        return DocumentReadError(name, "is encrypted (it needs a password to open)",
                                 "save an unprotected copy (e.g. `qpdf --decrypt --password=... FILE open.pdf`) "
                                 "and give that")
    return DocumentReadError(name, f"is not a readable PDF: damaged or truncated ({message.rstrip('.')})",
                             "get a complete copy, or repair it (e.g. `qpdf FILE fixed.pdf`)")


def _outline(pdf) -> list[tuple[int, tuple[str, ...]]]:
    """(page index, heading path) of each bookmark of the outline that points at a page."""
    found, path = [], []
    try:
        bookmarks = list(pdf.get_toc())
    except Exception:  # a broken outline costs the headings only; the pages are read
        return []
    for bookmark in bookmarks:
        title = " ".join((bookmark.get_title() or "").split())
        dest = bookmark.get_dest()
        path = path[: bookmark.level] + [title]
        if len(path) > 1 and path[-1] == path[-2]:  # a chapter's first section titled as the chapter
            path = path[:-1]
        index = dest.get_index() if dest is not None else None
        if title and index is not None:
            found.append((index, tuple(path)))
    return found


def _drop_running_lines(pages: list[str]) -> list[str]:
    """Pages without a first or last line that recurs (digits aside) on many pages: running heads and feet."""
    if len(pages) < 4:
        return pages
    firsts, lasts = Counter(), Counter()
    for text in pages:
        lines = text.strip().split("\n")
        firsts[_DIGITS.sub("#", lines[0].strip())] += 1
        lasts[_DIGITS.sub("#", lines[-1].strip())] += 1
    # a chapter's running head recurs on its pages only: a line counts from a twentieth of the pages on
    least = max(3, len(pages) // 20)
    running_first = {line for line, count in firsts.items() if (len(line) > 3 or line == "#") and count >= least}
    running_last = {line for line, count in lasts.items() if (len(line) > 3 or line == "#") and count >= least}
    cleaned = []
    for text in pages:
        lines = text.strip().split("\n")
        if lines and _DIGITS.sub("#", lines[0].strip()) in running_first:
            lines = lines[1:]
        if lines and _DIGITS.sub("#", lines[-1].strip()) in running_last:
            lines = lines[:-1]
        cleaned.append("\n".join(lines))
    return cleaned
