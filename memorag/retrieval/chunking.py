"""Documents, chunks, and the two ways of cutting one into the other.

``chunk_documents`` cuts by tokens of a real tokenizer (windows with overlap),
for dense/sparse retrieval and the generator's budget. ``split_sentences_for_mixpr``
and ``chunk_documents_for_mixpr`` cut into short sentence-like pieces (at most
``max_words`` words), the node unit of the Mixture-of-PageRanks graph.

Every chunk keeps exact character offsets into its document, so
``chunk.text == document.text[chunk.start_char:chunk.end_char]`` always holds, and
the pages and section of the file it came from (``memorag.locations``).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from memorag.locations import Heading, Location, locate


@dataclass
class Document:
    """One source document; ``links`` name other document ids (used by LongRAG grouping).

    A document read from a file (``memorag.documents``) names it in ``source`` and maps its
    text to the file's pages (``page_starts``: where each page begins) and headings.
    """

    id: str
    text: str
    title: str = ""
    links: list[str] = field(default_factory=list)
    source: str = ""
    page_starts: list[int] = field(default_factory=list)
    headings: list[Heading] = field(default_factory=list)

    def __post_init__(self) -> None:
        # read back from JSON, a heading is a list [start_char, [path...]]
        self.headings = [Heading(int(start), tuple(path)) for start, path in self.headings]

    def locate(self, start_char: int, end_char: int) -> Location:
        """The pages and section of ``text[start_char:end_char]`` in the file it was read from."""
        return locate(self.page_starts, self.headings, start_char, end_char)


@dataclass
class Chunk:
    """A contiguous span of one document; ``id`` is unique within an index. ``page`` to
    ``last_page`` are the file's pages it runs over (None: no pages), ``section`` the heading
    path its start lies under (empty: none)."""

    id: int
    doc_id: str
    title: str
    text: str
    start_char: int
    end_char: int
    num_tokens: int
    page: int | None = None
    last_page: int | None = None
    section: list[str] = field(default_factory=list)


class OffsetTokenizer(Protocol):
    """What ``chunk_documents`` needs: a Hugging Face *fast* tokenizer call signature.

    ``tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)``
    must return a mapping with ``"offset_mapping"``: one ``(start, end)`` character
    span per token.
    """

    def __call__(self, text: str, **kwargs: Any) -> Mapping[str, Any]: ...


class TextSpan(NamedTuple):
    """A piece of a text with its character offsets: ``text == source[start_char:end_char]``."""

    text: str
    start_char: int
    end_char: int


def _validate_documents(documents: Sequence[Document]) -> None:
    if isinstance(documents, (str, Document)):
        raise TypeError("documents must be a list of Document, not a single string or Document")
    if len(documents) == 0:
        raise ValueError("no documents to chunk: the document list is empty")
    for position, document in enumerate(documents):
        if not isinstance(document, Document):
            raise TypeError(f"documents[{position}] is {type(document).__name__}, expected Document")
        if not document.text or not document.text.strip():
            raise ValueError(f"document {document.id!r} (position {position}) has empty text")


def token_spans(tokenizer: OffsetTokenizer, text: str) -> list[tuple[int, int]]:
    """The (start, end) character span of each token of `text` that covers some text."""
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    if "offset_mapping" not in encoding:
        raise TypeError("tokenizer did not return 'offset_mapping'; use a Hugging Face fast tokenizer")
    # Zero-width spans are special or empty tokens: they cover no text.
    return [(int(start), int(end)) for start, end in encoding["offset_mapping"] if end > start]


def count_tokens(tokenizer: OffsetTokenizer, text: str) -> int:
    """Tokens of `text` as chunks count them (no special tokens)."""
    return len(token_spans(tokenizer, text))


def chunk_documents(
    documents: Sequence[Document],
    tokenizer: OffsetTokenizer,
    chunk_tokens: int = 200,
    overlap_tokens: int = 20,
    first_id: int = 0,
) -> list[Chunk]:
    """Cut documents into windows of ``chunk_tokens`` tokens, consecutive windows sharing
    ``overlap_tokens`` tokens.

    Chunk ids are consecutive from ``first_id`` (pass ``len(existing)`` to extend an
    index). A chunk's text runs from its first token's start to its last token's end,
    so the whitespace between chunks belongs to none of them. A final window is never
    entirely contained in the previous one. A document with pages (a PDF) is cut page by
    page: no chunk runs over a page break, so a passage's citation names the one page it
    lies on (a page's last window may be shorter than ``chunk_tokens``).
    """
    _validate_documents(documents)
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    if overlap_tokens < 0:
        raise ValueError(f"overlap_tokens must be >= 0, got {overlap_tokens}")
    if overlap_tokens >= chunk_tokens:
        raise ValueError(
            f"overlap_tokens ({overlap_tokens}) must be smaller than chunk_tokens ({chunk_tokens})"
        )
    stride = chunk_tokens - overlap_tokens
    chunks: list[Chunk] = []
    for document in documents:
        spans = token_spans(tokenizer, document.text)
        if not spans:
            raise ValueError(f"document {document.id!r} produced no tokens")
        for page_spans in _by_page(spans, document.page_starts):
            for start_token, end_token in _windows(len(page_spans), chunk_tokens, stride):
                start_char, end_char = page_spans[start_token][0], page_spans[end_token - 1][1]
                chunks.append(
                    Chunk(
                        id=first_id + len(chunks),
                        doc_id=document.id,
                        title=document.title,
                        text=document.text[start_char:end_char],
                        start_char=start_char,
                        end_char=end_char,
                        num_tokens=end_token - start_token,
                        **document.locate(start_char, end_char)._asdict(),
                    )
                )
    return chunks


def _by_page(spans: list[tuple[int, int]], page_starts: Sequence[int]) -> list[list[tuple[int, int]]]:
    """The token spans of each page in turn (all of them when the text has no pages); a token that
    starts on a page belongs to it, and a page with no token gives nothing."""
    if len(page_starts) < 2:
        return [spans]
    pages: list[list[tuple[int, int]]] = []
    current = None
    for span in spans:
        page = bisect_right(page_starts, span[0])
        if not pages or page != current:
            pages.append([])
            current = page
        pages[-1].append(span)
    return pages


def _windows(num_tokens: int, chunk_tokens: int, stride: int) -> list[tuple[int, int]]:
    """(start, end) token windows over `num_tokens` tokens, `stride` apart; the last ends at the end."""
    windows, start = [], 0
    while True:
        end = min(start + chunk_tokens, num_tokens)
        windows.append((start, end))
        if end == num_tokens:
            return windows
        start += stride


# A sentence ends at . ! ? or an ellipsis, optionally followed by closing quotes or
# brackets, then whitespace; at a CJK full stop / exclamation / question mark with or
# without whitespace after it; or at a blank line.
_SENTENCE_END = re.compile(
    r"(?<=[.!?\u2026])[\"'\u201d\u2019)\]]*\s+"
    r"|(?<=[\u3002\uff01\uff1f])[\"'\u201d\u2019\u300d\u300f)\]]*\s*"
    r"|\n\s*\n"
)
_NEWLINE = re.compile(r"\n+")
_WORD = re.compile(r"\S+")


def _split_by(pattern: re.Pattern[str], text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Pieces of ``text[start:end]`` between matches of ``pattern``, whitespace trimmed."""
    pieces: list[tuple[int, int]] = []
    cursor = start
    for match in pattern.finditer(text, start, end):
        pieces.append((cursor, match.start()))
        cursor = match.end()
    pieces.append((cursor, end))
    trimmed = []
    for piece_start, piece_end in pieces:
        piece = text[piece_start:piece_end]
        stripped = piece.strip()
        if stripped:
            left = piece_start + (len(piece) - len(piece.lstrip()))
            trimmed.append((left, left + len(stripped)))
    return trimmed


def _even_word_split(text: str, start: int, end: int, max_words: int) -> list[tuple[int, int]]:
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
    num_pieces = math.ceil(len(words) / max_words)
    base, extra = divmod(len(words), num_pieces)
    pieces, first = [], 0
    for index in range(num_pieces):
        size = base + (1 if index < extra else 0)
        pieces.append((words[first][0], words[first + size - 1][1]))
        first += size
    return pieces


def _num_words(text: str, start: int, end: int) -> int:
    return sum(1 for _ in _WORD.finditer(text, start, end))


def split_sentences_for_mixpr(text: str, max_words: int = 32) -> list[TextSpan]:
    """Split ``text`` into pieces of at most ``max_words`` whitespace-separated words.

    The MixPR recipe: sentences first; a sentence still too long is split at newlines;
    a piece still too long is split into the fewest pieces of (nearly) equal word count.
    Pieces are whitespace-trimmed and carry their character offsets in ``text``.
    """
    if max_words < 1:
        raise ValueError(f"max_words must be >= 1, got {max_words}")
    spans: list[TextSpan] = []
    for sentence_start, sentence_end in _split_by(_SENTENCE_END, text, 0, len(text)):
        if _num_words(text, sentence_start, sentence_end) <= max_words:
            pieces = [(sentence_start, sentence_end)]
        else:
            pieces = []
            for line_start, line_end in _split_by(_NEWLINE, text, sentence_start, sentence_end):
                if _num_words(text, line_start, line_end) <= max_words:
                    pieces.append((line_start, line_end))
                else:
                    pieces.extend(_even_word_split(text, line_start, line_end, max_words))
        spans.extend(TextSpan(text[start:end], start, end) for start, end in pieces)
    return spans


def chunk_documents_for_mixpr(
    documents: Sequence[Document],
    max_words: int = 32,
    tokenizer: OffsetTokenizer | None = None,
    first_id: int = 0,
) -> list[Chunk]:
    """MixPR chunks (see ``split_sentences_for_mixpr``) as ``Chunk`` objects.

    ``num_tokens`` is counted with ``tokenizer`` when given, else it is the word count
    (an approximation that is good enough for budgeting 32-word pieces).
    """
    _validate_documents(documents)
    chunks: list[Chunk] = []
    for document in documents:
        for span in split_sentences_for_mixpr(document.text, max_words=max_words):
            if tokenizer is None:
                num_tokens = _num_words(span.text, 0, len(span.text))
            else:
                num_tokens = len(token_spans(tokenizer, span.text))
            chunks.append(
                Chunk(
                    id=first_id + len(chunks),
                    doc_id=document.id,
                    title=document.title,
                    text=span.text,
                    start_char=span.start_char,
                    end_char=span.end_char,
                    num_tokens=num_tokens,
                    **document.locate(span.start_char, span.end_char)._asdict(),
                )
            )
    return chunks
