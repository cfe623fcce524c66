"""Markdown: the file's own text, with the heading path of every line, found by markdown-it-py
(CommonMark; MIT), chosen by `benchmarks/document_formats.py` (docs/formats.md).

The text is kept as written (markup included), so offsets point into the file itself; only
the headings are parsed. Setext (underlined) and ATX (#) headings both count; a `#` line
inside a code block does not.
"""

from __future__ import annotations

from memorag.documents.extracted import Extracted
from memorag.locations import Heading


def read_markdown(text: str) -> Extracted:
    from markdown_it import MarkdownIt

    text = text.replace("\r\n", "\n")
    line_starts = [0]
    for line in text.split("\n")[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    tokens = MarkdownIt("commonmark").parse(text)
    headings, path = [], []
    for position, token in enumerate(tokens):
        if token.type != "heading_open" or token.map is None:
            continue
        level = int(token.tag[1])
        title = " ".join(tokens[position + 1].content.split())
        path = [(depth, name) for depth, name in path if depth < level] + [(level, title)]
        headings.append(Heading(line_starts[token.map[0]], tuple(name for _, name in path)))
    return Extracted(text, [], headings)
