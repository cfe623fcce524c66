"""HTML: the text of the page's blocks in document order, with its headings (h1-h6) as
heading paths, parsed by selectolax (the lexbor engine; MIT), chosen by
`benchmarks/document_formats.py` (docs/formats.md).

Dropped: scripts, styles, navigation bars and forms. Tables are kept row by row, cells
joined by " | "; preformatted text keeps its lines. Lost: images and their alt text.
"""

from __future__ import annotations

import re

from memorag.documents.extracted import Extracted, TextBuilder

_SKIPPED = ("script", "style", "noscript", "template", "nav", "form", "svg", "iframe", "head")
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "caption", "dd", "details", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "header", "hr", "li", "main", "ol", "p", "section", "summary", "table",
    "tbody", "thead", "tfoot", "tr", "ul", "body", "center",
})
_CELLS = frozenset({"td", "th"})
_SPACE = re.compile(r"\s+")


def read_html(data: bytes, name: str, text: str | None = None) -> Extracted:
    """The page in `data` (its bytes; or `text`, already decoded) as text with heading paths."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(text if text is not None else data)
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
