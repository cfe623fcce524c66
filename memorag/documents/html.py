"""HTML: the text of the page's blocks in document order, with its headings (h1-h6) as
heading paths, parsed by selectolax (the lexbor engine; MIT), chosen by
`benchmarks/document_formats.py` (docs/formats.md).

The page is decoded before it is parsed: a byte-order mark first, then the charset its
`<meta charset>` or `<meta http-equiv="Content-Type">` declares in its first kB (the HTML
standard's prescan; "iso-8859-1" and "ascii" mean windows-1252, as in browsers), then
UTF-8 or the detected encoding. A declared charset the bytes contradict is refused, naming both.

Dropped: scripts, styles, navigation bars and forms. Tables are kept row by row, cells
joined by " | "; preformatted text keeps its lines. Lost: images and their alt text.
"""

from __future__ import annotations

import codecs
import re

from memorag.documents.errors import DocumentReadError
from memorag.documents.extracted import Extracted, TextBuilder
from memorag.documents.text import AUTO, checked_text, decode_text

_SKIPPED = ("script", "style", "noscript", "template", "nav", "form", "svg", "iframe", "head")
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "header", "hr", "li", "main", "ol", "p", "section", "summary", "table",
    "tbody", "thead", "tfoot", "tr", "ul", "body", "center",
})
_CELLS = frozenset({"td", "th"})
_SPACE = re.compile(r"\s+")
_META_CHARSET = re.compile(rb"<meta\s[^>]*?charset\s*=\s*[\"']?\s*([-\w.:]+)", re.IGNORECASE)
_BROWSER_ALIASES = {"iso8859-1": "cp1252", "ascii": "cp1252", "utf-16": "utf-8", "utf-16-le": "utf-8",
                    "utf-16-be": "utf-8"}
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def decode_html(data: bytes, name: str, encoding: str = AUTO) -> str:
    """The page `data` as text: in `encoding` when named, else as its byte-order mark or its
    declared charset says, else UTF-8 or the encoding detected."""
    declared = _declared_charset(data, name) if encoding == AUTO and not data.startswith(_BOMS) else None
    if declared is None:
        return decode_text(data, name, encoding)
    try:
        text = data.decode(declared)
    except UnicodeDecodeError as error:
        raise DocumentReadError(
            name, f"declares charset {declared} but is not {declared} (byte 0x{data[error.start]:02x} at offset "
                  f"{error.start})", "fix its <meta charset>, or name its encoding with --encoding") from error
    if declared != "utf-8" and not data.isascii() and _is_utf8(data):
        raise DocumentReadError(name, f"declares charset {declared} but its bytes are UTF-8",
                                f"fix its <meta charset>, or read it with --encoding utf-8 (or --encoding {declared})")
    return checked_text(text, name)


def _declared_charset(data: bytes, name: str) -> str | None:
    match = _META_CHARSET.search(data, 0, 1024)
    if match is None:
        return None
    label = match.group(1).decode("ascii", "replace")
    try:
        codec = codecs.lookup(label).name
    except LookupError as error:
        raise DocumentReadError(name, f"declares charset {label!r}, which is not known",
                                "fix its <meta charset>, or name its encoding with --encoding") from error
    return _BROWSER_ALIASES.get(codec, codec)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_html(text: str) -> Extracted:
    """The page `text` (decoded: `decode_html`) as text with heading paths."""
    from selectolax.lexbor import LexborHTMLParser, SelectolaxError

    try:
        tree = LexborHTMLParser(text)
    except SelectolaxError as error:  # lexbor gives up only when an allocation fails
        raise MemoryError(str(error)) from error
    for tag in _SKIPPED:
        for node in tree.css(tag):
            node.decompose()
    root = tree.body or tree.root
    builder = TextBuilder()
    inline: list[str] = []

    def flush() -> None:
        block = _SPACE.sub(" ", "".join(inline)).strip()
        inline.clear()
        builder.add(block)

    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if node is None:  # the end of a block: its text is one paragraph
            flush()
            continue
        tag = node.tag
        if tag == "-text":
            inline.append(node.text_content or "")
            continue
        if tag in _HEADINGS:
            flush()
            builder.heading(_HEADINGS[tag], node.text(deep=True))
            continue
        if tag == "pre":
            flush()
            builder.add((node.text(deep=True) or "").strip("\n"))
            continue
        if tag == "br":
            inline.append("\n")
            continue
        if tag in _CELLS and inline and inline[-1].strip():
            inline.append(" | ")
        block = tag in _BLOCKS
        if block:
            flush()
            stack.append(None)
        stack.extend(reversed(list(node.iter(include_text=True))))
    flush()
    return builder.build()
