"""Plain text in any encoding: the one named, or the one detected (charset-normalizer)."""

from __future__ import annotations

import codecs
import unicodedata

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted

AUTO = "auto"


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
            return _checked(data.decode(codec), name)
        except UnicodeDecodeError as error:
            raise DocumentReadError(
                name, f"is not valid {encoding} text (byte 0x{data[error.start]:02x} at offset {error.start})",
                "name its encoding with --encoding, or leave it out to have it detected") from error
    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return _checked(data.decode(codec, errors="strict"), name)
    try:
        return _checked(data.decode("utf-8"), name)
    except UnicodeDecodeError:
        pass
    if b"\x00" in data:
        raise DocumentReadError(name, "looks like a binary file (it holds NUL bytes)",
                                "give a document (PDF, Word, HTML, Markdown or text), or --encoding utf-16 for "
                                "UTF-16 text without a byte-order mark")
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise DocumentReadError(name, "is in no text encoding that could be recognised",
                                "convert it to UTF-8, or name its encoding with --encoding")
    return _checked(str(best), name)


def _checked(text: str, name: str) -> str:
    control = sum(1 for char in text if unicodedata.category(char) == "Cc" and char not in "\n\r\t\f\v")
    if control > max(8, len(text) // 100):
        raise DocumentReadError(name, f"looks like a binary file ({control} control characters)",
                                "give a document (PDF, Word, HTML, Markdown or text)")
    return text


def read_text(data: bytes, name: str, encoding: str = AUTO) -> Extracted:
    return Extracted(decode_text(data, name, encoding))  # as written: offsets point into the file's own text
