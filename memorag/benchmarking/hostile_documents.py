"""Hostile documents built in-process, for the reader's tests and `benchmarks/hostile_documents.py`:
zip and Flate bombs, entity expansion, deep nesting, formatting bombs. Each inflating stream is written as one compressed block repeated (a full
flush resets deflate's state, so the same block compresses to the same bytes every time):
gigabytes of inflated content cost milliseconds and a few kB here.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass

_BLOCK = 1 << 20


@dataclass
class Deflated:
    """A raw deflate stream with the size and CRC-32 of what it inflates to."""

    data: bytes
    size: int
    crc: int
    adler: int


def repeated(unit: bytes, size: int, prefix: bytes = b"", suffix: bytes = b"", zlib_format: bool = False) -> Deflated:
    """`prefix`, `unit` repeated to about `size` bytes, `suffix`: deflated without ever holding it.
    Only the checksum the container needs is computed: CRC-32 for a ZIP, Adler-32 (`zlib_format`) for a PDF."""
    block = unit * max(1, _BLOCK // len(unit))
    times = max(1, size // len(block))
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
    body = compressor.compress(block) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.compress(suffix) + compressor.flush()
    checksum = zlib.adler32 if zlib_format else zlib.crc32
    value = checksum(prefix)
    for _ in range(times):
        value = checksum(block, value)
    value = checksum(suffix, value)
    crc, adler = (0, value) if zlib_format else (value, 0)
    return Deflated(head + body * times + tail, len(prefix) + len(block) * times + len(suffix), crc, adler)


def deflated(data: bytes) -> Deflated:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return Deflated(compressor.compress(data) + compressor.flush(), len(data), zlib.crc32(data), zlib.adler32(data))


def zip_bytes(members: dict[str, bytes | Deflated], declared: dict[str, int] | None = None) -> bytes:
    """A ZIP of `members` (deflated), written by hand so a member may declare a size (`declared`)
    other than its real one."""
    declared = declared or {}
    out, central = bytearray(), bytearray()
    for name, content in members.items():
        member = content if isinstance(content, Deflated) else deflated(content)
        size = declared.get(name, member.size)
        encoded = name.encode()
        offset = len(out)
        out += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, member.crc, len(member.data), size,
                           len(encoded), 0) + encoded + member.data
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, member.crc, len(member.data),
                               size, len(encoded), 0, 0, 0, 0, 0, offset) + encoded
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(out), 0)
    return bytes(out + central + end)


W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
_CONTENT_TYPES = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    b'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    b'<Default Extension="xml" ContentType="application/xml"/>'
    b'<Override PartName="/word/document.xml" '
    b'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_RELS = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
    b'officeDocument" Target="word/document.xml"/></Relationships>'
)
DOCUMENT_HEAD = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {W}><w:body>'.encode()
DOCUMENT_TAIL = b"</w:body></w:document>"


def docx_of(document: bytes | Deflated, extra: dict[str, bytes | Deflated] | None = None,
            declared: dict[str, int] | None = None) -> bytes:
    """A minimal Word file whose word/document.xml is `document`."""
    members = {"[Content_Types].xml": _CONTENT_TYPES, "_rels/.rels": _RELS, "word/document.xml": document}
    return zip_bytes({**members, **(extra or {})}, declared)


def paragraphs_docx(inflated: int, letter: bytes = b"a") -> bytes:
    """A .docx whose document.xml inflates to about `inflated` bytes of one-letter paragraphs."""
    unit = b"<w:p><w:r><w:t>" + letter + b"</w:t></w:r></w:p>"
    return docx_of(repeated(unit, inflated, DOCUMENT_HEAD, DOCUMENT_TAIL))


def whitespace_docx(inflated: int) -> bytes:
    """A .docx with one text node of about `inflated` bytes of spaces."""
    head = DOCUMENT_HEAD + b'<w:p><w:r><w:t xml:space="preserve">'
    return docx_of(repeated(b" ", inflated, head, b"</w:t></w:r></w:p>" + DOCUMENT_TAIL))


def grid_span_docx(span: int = 200_000_000) -> bytes:
    """A .docx whose one table cell claims to span `span` grid columns."""
    cell = (f'<w:tbl><w:tblGrid><w:gridCol w:w="100"/></w:tblGrid><w:tr><w:tc><w:tcPr><w:gridSpan w:val="{span}"/>'
            f'</w:tcPr><w:p><w:r><w:t>cell</w:t></w:r></w:p></w:tc></w:tr></w:tbl>').encode()
    return docx_of(DOCUMENT_HEAD + cell + DOCUMENT_TAIL)


def laughs_docx(levels: int = 10) -> bytes:
    """A .docx whose document.xml defines the billion-laughs entity chain and uses it."""
    entities = '<!ENTITY l0 "lol">' + "".join(
        f'<!ENTITY l{n} "{("&l" + str(n - 1) + ";") * 10}">' for n in range(1, levels))
    xml = (f'<?xml version="1.0"?><!DOCTYPE w:document [{entities}]><w:document {W}><w:body><w:p><w:r>'
           f'<w:t>&l{levels - 1};</w:t></w:r></w:p></w:body></w:document>').encode()
    return docx_of(xml)


def external_entity_docx(target: str) -> bytes:
    """A .docx whose text is an external entity pointing at `target` (a path)."""
    xml = (f'<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY secret SYSTEM "file://{target}">]>'
           f'<w:document {W}><w:body><w:p><w:r><w:t>before &secret; after</w:t></w:r></w:p></w:body>'
           f'</w:document>').encode()
    return docx_of(xml)


def numbered_docx(paragraphs: int) -> bytes:
    """A .docx of `paragraphs` short numbered paragraphs (they compress as text does, not as a bomb)."""
    body = b"".join(b"<w:p><w:r><w:t>%d</w:t></w:r></w:p>" % n for n in range(paragraphs))
    return docx_of(DOCUMENT_HEAD + body + DOCUMENT_TAIL)


def truncated_docx() -> bytes:
    """A .docx whose document.xml stops inside a text element (a whole ZIP around a cut part)."""
    return docx_of(DOCUMENT_HEAD + b"<w:p><w:r><w:t>The otter keeps")


def many_members_docx(count: int) -> bytes:
    """A .docx with `count` extra (tiny) members."""
    paragraph = DOCUMENT_HEAD + b"<w:p><w:r><w:t>hello</w:t></w:r></w:p>" + DOCUMENT_TAIL
    return docx_of(paragraph, {f"word/media/m{n}.xml": b"<a/>" for n in range(count)})


def pdf_of(objects: list[bytes]) -> bytes:
    """A PDF of `objects` (numbered from 1; object 1 the catalog) with a correct cross-reference table."""
    out, offsets = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def flate_stream(content: Deflated) -> bytes:
    data = b"\x78\xda" + content.data + struct.pack(">L", content.adler)
    return f"<< /Length {len(data)} /Filter /FlateDecode >>\nstream\n".encode() + data + b"\nendstream"


_PAGE = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << >> >>"


def stream_bomb_pdf(inflated: int, pages: int = 1) -> bytes:
    """A PDF of `pages` pages all drawing one content stream that inflates to about `inflated` bytes."""
    stream_number = 3 + pages
    kids = " ".join(f"{3 + n} 0 R" for n in range(pages))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode()]
    objects += [_PAGE % stream_number for _ in range(pages)]
    objects.append(flate_stream(repeated(b"0 0 m 1 1 l S\n", inflated, zlib_format=True)))
    return pdf_of(objects)


def page_tree_pdf(fanout: int = 10, depth: int = 6) -> bytes:
    """A PDF whose page tree repeats one child `fanout` times at each of `depth` levels: fanout**depth pages."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for level in range(depth):
        kids = " ".join([f"{3 + level} 0 R"] * fanout)
        parent = f"/Parent {1 + level} 0 R " if level else ""
        objects.append(f"<< /Type /Pages {parent}/Kids [{kids}] /Count {fanout ** (depth - level)} >>".encode())
    objects.append(f"<< /Type /Page /Parent {1 + depth} 0 R /MediaBox [0 0 612 792] >>".encode())
    return pdf_of(objects)


def nested_pdf(depth: int = 100_000) -> bytes:
    """A one-page PDF whose page dictionary holds arrays nested `depth` deep."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Deep " + b"[" * depth + b"]" * depth + b" >>"]
    return pdf_of(objects)


def outline_loop_pdf(items: int = 50_000) -> bytes:
    """A PDF whose outline is a chain of `items` entries each nested in the one before, the last
    pointing back at the first."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R /Outlines 4 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>", b"<< /Type /Outlines /First 5 0 R >>"]
    for n in range(items):
        child = 5 + n + 1 if n + 1 < items else 5
        objects.append(f"<< /Title (s{n}) /Parent {4 + n} 0 R /First {child} 0 R /Next {child} 0 R >>".encode())
    return pdf_of(objects)


def formatting_bomb_html(elements: int = 20_000, paragraphs: int = 2_000) -> bytes:
    """`elements` distinct <b> left open in a paragraph, then `paragraphs` paragraphs: the parser
    reopens every <b> in each (the HTML standard's reconstruction of formatting elements)."""
    opened = "".join(f'<b class="c{n}">' for n in range(elements))
    return f"<!DOCTYPE html><html><body><p>{opened}x</p>{'<p>x</p>' * paragraphs}</body></html>".encode()


def nested_html(depth: int = 200_000) -> bytes:
    return b"<!DOCTYPE html><html><body>" + b"<div>" * depth + b"deep" + b"</div>" * depth + b"</body></html>"


def write_one_line_html(path: str | os.PathLike[str], megabytes: int = 190) -> None:
    """An HTML page of `megabytes` MB of words in one paragraph on one line, written in 1 MB pieces."""
    with open(path, "wb") as out:
        out.write(b"<!DOCTYPE html><html><body><p>")
        for _ in range(megabytes):
            out.write(b"word " * 200_000)
        out.write(b"</p></body></html>")
