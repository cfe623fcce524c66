"""Word (.docx): paragraphs and tables in document order, with the headings (the Title and
Heading 1-9 styles, or a paragraph's outline level) as heading paths, read by python-docx
(MIT), chosen by `benchmarks/document_formats.py` (docs/formats.md).

Tables are kept row by row, cells joined by " | ". Lost: images, text boxes, headers and
footers, footnotes and comments. Word has no fixed pages, so a .docx cites its section.
"""

from __future__ import annotations

import io
import re
import zipfile

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted, TextBuilder

_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)


def read_docx(data: bytes, name: str) -> Extracted:
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise DocumentReadError(name, f"is not a readable Word file: damaged or truncated ({error})",
                                "open it in Word or LibreOffice and save it again") from error
    builder = TextBuilder()
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                cells = list(dict.fromkeys(cell.text.strip() for cell in row.cells))  # merged cells repeat
                builder.add(" | ".join(cell for cell in cells if cell), separator="\n")
            continue
        level = _heading_level(block)
        if level is not None:
            builder.heading(level, block.text)
        else:
            builder.add(block.text.strip())
    return builder.build()


def _heading_level(paragraph) -> int | None:
    style = paragraph.style.name if paragraph.style is not None else ""
    if style == "Title":
        return 1
    match = _HEADING_STYLE.match(style)
    return int(match.group(1)) + 1 if match else None  # under a Title
