"""Word (.docx): paragraphs and tables in document order, with the headings (the Title and
Heading 1-9 styles, or a paragraph's outline level) as heading paths, read by python-docx
(MIT), chosen by `benchmarks/document_formats.py` (docs/formats.md).

Tables are kept row by row, cells joined by " | ". Lost: images, text boxes, headers and
footers, footnotes and comments. Word has no fixed pages, so a .docx cites its section.

The package is checked before python-docx inflates it (it reads every part whole): the
number of parts, each part's declared inflated size and compression ratio (zipfile never
inflates a part past its declared size), their total against the memory limit, and no DTD
(Word writes none; a DTD is how entity bombs and external entities get in).
"""

from __future__ import annotations

import io
import re
import zipfile

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted, TextBuilder
from memorag.documents.options import DEFAULT_MEMORY_MB

_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)
MAX_PARTS = 10_000
MAX_RATIO = 200  # inflated over compressed size, for parts over 1 MB; Word's own parts stay under 30
MAX_GRID_SPAN = 64  # Word allows 63 columns
# A parsed XML part takes about 16 times its size in memory (python-docx over lxml, measured):
# the parts may inflate to at most this fraction of the memory limit.
XML_MEMORY_SHARE = 1 / 20
_UNREADABLE = "open it in Word or LibreOffice and save it again"


def read_docx(data: bytes, name: str, memory_mb: int = DEFAULT_MEMORY_MB) -> Extracted:
    import docx
    from docx.opc.exceptions import OpcError
    from docx.table import Table
    from lxml import etree

    check_package(data, name, memory_mb)
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, OpcError, etree.LxmlError) as error:
        raise DocumentReadError(name, f"is not a readable Word file: damaged or truncated ({error})",
                                _UNREADABLE) from error
    builder = TextBuilder()
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                _check_spans(row, name)
                cells = list(dict.fromkeys(cell.text.strip() for cell in row.cells))  # merged cells repeat
                builder.add(" | ".join(cell for cell in cells if cell), separator="\n")
            continue
        level = _heading_level(block)
        if level is not None:
            builder.heading(level, block.text)
        else:
            builder.add(block.text.strip())
    return builder.build()


def check_package(data: bytes, name: str, memory_mb: int) -> None:
    """Refuse a package whose parts would inflate past what `memory_mb` can parse, or hold a DTD."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        parts = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise DocumentReadError(name, f"is not a readable Word file: damaged or truncated ({error})",
                                _UNREADABLE) from error
    if len(parts) > MAX_PARTS:
        raise DocumentReadError(name, f"cannot be read safely: it holds {len(parts):,} parts (limit {MAX_PARTS:,})",
                                "it is not a Word file as Word writes them; " + _UNREADABLE)
    limit = int(memory_mb * 1e6 * XML_MEMORY_SHARE)
    for part in parts:
        if part.file_size > 1e6 and part.file_size > MAX_RATIO * max(part.compress_size, 1):
            raise DocumentReadError(
                name, f"cannot be read safely: its part {part.filename} inflates {part.file_size / 1e6:,.0f} MB from "
                      f"{part.compress_size / 1e6:,.2f} MB, a ratio over {MAX_RATIO} (limit {MAX_RATIO})",
                "it looks like a zip bomb; " + _UNREADABLE)
    inflated = sum(part.file_size for part in parts)
    if inflated > limit:
        raise DocumentReadError(
            name, f"cannot be read safely: its parts inflate to {inflated / 1e6:,.0f} MB (limit {limit / 1e6:,.0f} MB, "
                  f"a {1 / XML_MEMORY_SHARE:.0f}th of the memory limit)",
            "split it, or raise the memory limit (--read-memory-mb)")
    for part in parts:
        if part.filename.endswith((".xml", ".rels")) and _has_dtd(archive, part, name):
            raise DocumentReadError(name, f"cannot be read safely: its part {part.filename} declares a DTD (entities)",
                                    "Word never writes one; " + _UNREADABLE)


def _has_dtd(archive: zipfile.ZipFile, part: zipfile.ZipInfo, name: str) -> bool:
    try:
        with archive.open(part) as stream:
            head = stream.read(4096)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as error:
        raise DocumentReadError(name, f"is not a readable Word file: its part {part.filename} is damaged ({error})",
                                _UNREADABLE) from error
    return b"<!DOCTYPE" in head or b"<!ENTITY" in head


def _check_spans(row, name: str) -> None:
    for cell in row._tr.tc_lst:
        if cell.grid_span > MAX_GRID_SPAN:
            raise DocumentReadError(name, f"cannot be read safely: a table cell spans {cell.grid_span:,} columns "
                                          f"(limit {MAX_GRID_SPAN})", _UNREADABLE)


def _heading_level(paragraph) -> int | None:
    style = paragraph.style.name if paragraph.style is not None else ""
    if style == "Title":
        return 1
    match = _HEADING_STYLE.match(style)
    return int(match.group(1)) + 1 if match else None  # under a Title
