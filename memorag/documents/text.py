"""Plain text in any encoding: the one named, or the one detected (charset-normalizer)."""

from __future__ import annotations

import codecs
import re

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted

AUTO = "auto"
_CONTROL_CHARS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")  # Unicode's Cc, whitespace aside
_UNICODE_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def decode_text(data: bytes, name: str, encoding: str = AUTO) -> str:
    """`data` as text: UTF-8 (with or without a byte-order mark) and UTF-16/32 with a mark are
    read as such; other bytes in `encoding`, or under "auto" in the encoding charset-normalizer
    finds. Binary data and undecodable bytes are refused with the fix."""
    if encoding != AUTO:
        try:
            codec = codecs.lookup(encoding).name
        except LookupError as error:
            raise DocumentReadError(name, f"unknown encoding {encoding!r}",
                                    "name one Python knows, e.g. --encoding latin-1") from error
        codec = "utf-8-sig" if codec == "utf-8" else codec
        try:
            return checked_text(data.decode(codec), name)
        except UnicodeDecodeError as error:
            raise DocumentReadError(
                name, f"is not valid {encoding} text (byte 0x{data[error.start]:02x} at offset {error.start})",
                "name its encoding with --encoding, or leave it out to have it detected") from error
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return checked_text(data.decode(codec, errors="strict"), name)
    try:
        return checked_text(data.decode("utf-8"), name)
    except UnicodeDecodeError:
        pass
    if b"\x00" in data:
        raise _nul_error(name)
    from charset_normalizer import from_bytes

    try:
        best = from_bytes(data).best()
    except (ValueError, LookupError, UnicodeError) as error:
        raise DocumentReadError(name, f"is in no text encoding that could be recognised ({error})",
                                "convert it to UTF-8, or name its encoding with --encoding") from error
    if best is None:
        raise DocumentReadError(name, "is in no text encoding that could be recognised",
                                "convert it to UTF-8, or name its encoding with --encoding")
    return checked_text(str(best), name)


def checked_text(text: str, name: str) -> str:
    """`text`, refused as binary when more than 1% of it (and more than 8 characters) is control characters."""
    control = sum(1 for _ in _CONTROL_CHARS.finditer(text))
    if control > max(8, len(text) // 100):
        raise DocumentReadError(name, f"looks like a binary file ({control} control characters)",
                                "give a document (PDF, Word, HTML, Markdown or text)")
    return text


def refuse_binary_sample(sample: bytes, name: str) -> None:
    """Refuse a file whose first bytes `sample` hold NULs (and no UTF-16/32 byte-order mark) before
    the whole file is decoded: text has none, binary data and UTF-16 without a mark do."""
    if b"\x00" in sample and not sample.startswith(_UNICODE_BOMS):
        raise _nul_error(name)


def _nul_error(name: str) -> DocumentReadError:
    return DocumentReadError(name, "looks like a binary file (it holds NUL bytes)",
                             "give a document (PDF, Word, HTML, Markdown or text), or --encoding utf-16 for "
                             "UTF-16 text without a byte-order mark")


def read_text(data: bytes, name: str, encoding: str = AUTO) -> Extracted:
    return Extracted(decode_text(data, name, encoding))  # as written: offsets point into the file's own text
