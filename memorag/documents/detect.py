"""Which format a file is in, decided from its bytes (its name decides only between Markdown
and plain text, which no bytes tell apart).

Formats read: "pdf", "docx", "html", "markdown", "text". Anything else recognised by its
signature (images, archives, other office files, executables) is refused by name. A signature
counts only where the format has it: at offset 0, with the structure that follows it (a
bzip2 block header after `BZh`), and for binary formats only in bytes that are not plain
text, so a note that begins "GIF89a is..." or mentions `%PDF-1.7` stays a note.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePath

from memorag.documents.errors import DocumentReadError

READABLE = ("pdf", "docx", "html", "markdown", "text")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")
# Bytes of a file's start that decide its format; the rest is read only once the format is known.
SAMPLE_BYTES = 64 * 1024

# Signatures of binary formats we do not read, with what the file is.
_BINARY = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"), (b"II*\x00", "a TIFF image"), (b"MM\x00*", "a TIFF image"),
    (b"\x1f\x8b\x08", "a gzip archive"), (b"\xfd7zXZ\x00", "an xz archive"), (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive"),
    (b"\x7fELF", "an executable"), (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office file (.doc, .xls, .ppt)"),
    (b"AT&TFORM", "a DjVu file"),
)
# Text formats we do not read: their signature alone decides.
_TEXTUAL = ((b"{\\rtf", "an RTF file"), (b"%!PS", "a PostScript file"))
# bzip2: "BZh", the block size 1-9, then a block's or the end's magic number.
_BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")
_PDF_VERSION = re.compile(rb"%PDF-[12]\.\d")
_ZIPPED = {"ppt/": "a PowerPoint file (.pptx)", "xl/": "an Excel file (.xlsx)", "content.xml": "an OpenDocument file"}
_HTML_MARKS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml version")
_CONTROL = frozenset(range(32)) - {9, 10, 12, 13, 11, 27}
_CONVERT = "convert it to PDF, Word (.docx), HTML, Markdown or plain text"


def detect_format(data: bytes, name: str, tail: bytes | None = None) -> str:
    """The format of a file whose first bytes are `data` (one of `READABLE`); `name` (the file's)
    only tells Markdown from text, `tail` (its last kB; by default `data`'s) confirms a PDF whose
    header is not at offset 0. A format we do not read raises `DocumentReadError`."""
    if _is_pdf(data, data[-1024:] if tail is None else tail):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return _zipped_format(data, name)
    _refuse_foreign(data, name)
    head = data[:2048].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(_HTML_MARKS) and (b"<html" in head or b"<body" in head or b"<!doctype html" in head):
        return "html"
    if PurePath(name).suffix.lower() in MARKDOWN_SUFFIXES:
        return "markdown"
    if PurePath(name).suffix.lower() in (".html", ".htm", ".xhtml") and b"<" in head:
        return "html"
    return "text"


def looks_textual(sample: bytes) -> bool:
    """Whether `sample` (a file's first bytes) reads as text: no control bytes in its first 4 kB
    but whitespace and escape (text in any 8-bit encoding or UTF-8 passes; binary formats do not)."""
    return not any(byte in _CONTROL for byte in sample[:4096])


def _is_pdf(data: bytes, tail: bytes) -> bool:
    if data.startswith(b"%PDF-"):
        return True
    # PDF readers accept a header anywhere in the first kB (after junk a mailer added), but then
    # the file must end as a PDF does and the bytes before the header must not be plain text.
    match = _PDF_VERSION.search(data, 0, 1024)
    return bool(match) and b"%%EOF" in tail and not looks_textual(data[: match.start()] or b"\0")


def _refuse_foreign(data: bytes, name: str) -> None:
    what = next((what for magic, what in _TEXTUAL if data.startswith(magic)), None)
    if what is None and not looks_textual(data):
        what = next((what for magic, what in _BINARY if data.startswith(magic)), None)
        what = what or ("a bzip2 archive" if _BZIP2.match(data) else None)
    if what is not None:
        fix = "run OCR on it first (e.g. `ocrmypdf` on a PDF of it)" if "image" in what else _CONVERT
        raise DocumentReadError(name, f"is {what}, a format memorag does not read", fix)


def _zipped_format(data: bytes, name: str) -> str:
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise DocumentReadError(name, f"is a damaged or truncated ZIP file ({error})",
                                "save it again from the program that made it") from error
    if "word/document.xml" in names:
        return "docx"
    for prefix, what in _ZIPPED.items():
        if any(entry.startswith(prefix) for entry in names):
            raise DocumentReadError(name, f"is {what}, a format memorag does not read", _CONVERT)
    raise DocumentReadError(name, "is a ZIP archive", "unpack it and give the folder")
