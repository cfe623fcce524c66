"""The windows a long text is cut into, one gist each."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from memorag.retrieval.chunking import Document

# A window ends at the last line break in its final share (this fraction of it) when there is
# one, so that a gist rarely starts or ends mid-sentence; else at its last whole token.
_BREAK_SHARE = 0.1


@dataclass(frozen=True)
class GistWindow:
    """Characters `[start_char, end_char)` of document `doc_id`, `num_tokens` long; `sha256` of its text."""

    doc_id: str
    title: str
    start_char: int
    end_char: int
    num_tokens: int
    sha256: str


def gist_windows(documents: Sequence[Document], tokenizer, window_tokens: int) -> list[GistWindow]:
    """Every document cut into consecutive windows of at most `window_tokens` tokens of `tokenizer`
    (a fast tokenizer: offsets are read from it), in order; a window never spans two documents."""
    windows: list[GistWindow] = []
    for document in documents:
        offsets = tokenizer(document.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        ends = [end for _, end in offsets]  # [T] the character each token ends at
        first = 0
        while first < len(ends):
            last = min(first + window_tokens, len(ends)) - 1
            last = _line_break_before(document.text, ends, first, last)
            start = 0 if not windows or windows[-1].doc_id != document.id else windows[-1].end_char
            end = len(document.text) if last == len(ends) - 1 else ends[last]
            text = document.text[start:end]
            windows.append(GistWindow(document.id, document.title, start, end, last - first + 1,
                                      hashlib.sha256(text.encode()).hexdigest()))
            first = last + 1
    return windows


def _line_break_before(text: str, ends: list[int], first: int, last: int) -> int:
    """The last token in the final share of tokens `first..last` that ends a line (or `last`)."""
    if last == len(ends) - 1:
        return last
    floor = last - int((last - first + 1) * _BREAK_SHARE)
    for token in range(last, max(first, floor), -1):
        if "\n" in text[ends[token - 1]:ends[token]] or text[ends[token]:ends[token] + 1] == "\n":
            return token
    return last
