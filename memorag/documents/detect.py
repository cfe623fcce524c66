"""Which format a file is in, decided from its first bytes (its name decides only between
Markdown and plain text, which no bytes tell apart).

Formats read: "pdf", "docx", "html", "markdown", "text". Anything else recognised by its
magic bytes (images, archives, other office files, executables) is refused by name.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePath

from memorag.documents.errors import DocumentReadError

READABLE = ("pdf", "docx", "html", "markdown", "text")
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkd")

# Magic bytes of formats we do not read, with the fix to suggest.
_FOREIGN = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"), (b"MM\x00*", "a TIFF image"), (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"), (b"\xfd7zXZ\x00", "an xz archive"), (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive"),
    (b"\x7fELF", "an executable"), (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office file (.doc, .xls, .ppt)"),
    (b"{\\rtf", "an RTF file"), (b"%!PS", "a PostScript file"), (b"AT&TFORM", "a DjVu file"),
)
_ZIPPED = {"ppt/": "a PowerPoint file (.pptx)", "xl/": "an Excel file (.xlsx)", "content.xml": "an OpenDocument file"}
_HTML_MARKS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml version")
_CONVERT = "convert it to PDF, Word (.docx), HTML, Markdown or plain text"


def detect_format(data: bytes, name: str) -> str:
    """The format of a file's bytes `data` (one of `READABLE`); `name` (the file's) only tells
    Markdown from text. A format we do not read raises `DocumentReadError`."""
    if data.startswith(b"%PDF-") or b"%PDF-" in data[:1024]:
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return _zipped_format(data, name)
    for magic, what in _FOREIGN:
        if data.startswith(magic):
            fix = "run OCR on it first (e.g. `ocrmypdf` on a PDF of it)" if "image" in what else _CONVERT
            raise DocumentReadError(name, f"is {what}, a format memorag does not read", fix)
    head = data[:2048].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(_HTML_MARKS) and (b"<html" in head or b"<body" in head or b"<!doctype html" in head):
        return "html"
    if PurePath(name).suffix.lower() in MARKDOWN_SUFFIXES:
        return "markdown"
    if PurePath(name).suffix.lower() in (".html", ".htm", ".xhtml") and b"<" in head:
        return "html"
    return "text"


def _zipped_format(data: bytes, name: str) -> str:
    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, OSError) as error:
        raise DocumentReadError(name, f"is a damaged or truncated ZIP file ({error})",
                                "save it again from the program that made it") from error
    if "word/document.xml" in names:
        return "docx"
    for prefix, what in _ZIPPED.items():
        if any(entry.startswith(prefix) for entry in names):
            raise DocumentReadError(name, f"is {what}, a format memorag does not read", _CONVERT)
    raise DocumentReadError(name, "is a ZIP archive", "unpack it and give the folder")
