"""Test documents built in-process: PDFs written with fpdf2 (a dev dependency), Word files
with python-docx, HTML and Markdown as text. Nothing here depends on files outside the tests."""

from __future__ import annotations

import io
from pathlib import Path


def pdf_bytes(pages: list[str], sections: list[str] | None = None, password: str | None = None) -> bytes:
    """A PDF with one page per text of `pages`; `sections[i]` (when given) is page i's outline entry."""
    from fpdf import FPDF

    pdf = FPDF()
    if password is not None:
        pdf.set_encryption(owner_password="owner", user_password=password)
    pdf.set_font("helvetica", size=11)
    for number, text in enumerate(pages):
        pdf.add_page()
        if sections is not None:
            pdf.start_section(sections[number])
        pdf.multi_cell(0, 7, text)
    return bytes(pdf.output())


def scanned_pdf_bytes(pages: int = 2) -> bytes:
    """A PDF of pages holding only a drawing, like a scan: no text layer."""
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.rect(20, 20, 120, 160, style="F")
    return bytes(pdf.output())


def docx_bytes(blocks: list[tuple[str, str]], table: list[list[str]] | None = None) -> bytes:
    """A Word file of (style, text) blocks: style "h1".."h3" for headings, "p" for a paragraph."""
    import docx

    document = docx.Document()
    for style, text in blocks:
        if style.startswith("h"):
            document.add_heading(text, level=int(style[1]))
        else:
            document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table):
            for cell, value in zip(row.cells, values):
                cell.text = value
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


HTML = """<!DOCTYPE html>
<html><head><title>Lighthouse guide</title><style>p { color: red }</style><script>var x = 1;</script></head>
<body><nav><a href="/">Home</a> <a href="/next">Next</a></nav>
<h1>Lighthouse guide</h1>
<p>The lighthouse stands on the northern cape.</p>
<h2>Keepers</h2>
<p>The keeper lights the lamp at dusk.</p>
<table><tr><th>Name</th><th>Years</th></tr><tr><td>Ada</td><td>1901-1920</td></tr></table>
<h3>Tools</h3>
<pre>wick trimmer
oil can</pre>
<h2>Visits</h2>
<p>Visitors climb <b>214</b> steps.</p>
</body></html>
"""

MARKDOWN = """# Harbour notes

The harbour opens at six.

## Boats

Fishing boats leave before dawn.

```
# not a heading, a comment in code
```

### Nets

Nets are mended on Sundays.

Moorings
--------

Each mooring costs a fee.
"""


def write(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path
