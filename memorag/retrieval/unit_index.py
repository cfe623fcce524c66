"""LongRAG's unit index: documents grouped into long units, the units' chunks indexed, MaxP ranking.

The grouping and MaxP themselves are in ``memorag.retrieval.long_units``; this module puts
them together over any ``Retriever`` (dense, BM25, hybrid), so that the ``longrag`` mode
and the retrieval benchmark build exactly the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from memorag.retrieval.base import Hit, Retriever
from memorag.retrieval.chunking import Chunk, Document, OffsetTokenizer, chunk_documents, count_tokens
from memorag.retrieval.long_units import Unit, group_documents, infer_links, maxp

LinkPolicy = Literal["auto", "given", "terms"]
LINK_POLICIES: tuple[str, ...] = ("auto", "given", "terms")
PAPER_CHUNK_TOKENS = 512  # LongRAG's MaxP chunk size


def choose_links(documents: Sequence[Document], policy: LinkPolicy) -> Mapping[str, Iterable[str]] | None:
    """The links to group by: ``None`` means each document's own ``links`` field.

    ``"auto"``: the documents' own links when any document carries some, else links
    inferred from shared rare terms (``infer_links``); ``"given"``: only the documents'
    own links (documents without any stay units of their own); ``"terms"``: always
    inferred.
    """
    if policy not in LINK_POLICIES:
        raise ValueError(f"link policy {policy!r} unknown; choose one of {', '.join(LINK_POLICIES)}")
    if policy == "given" or (policy == "auto" and any(document.links for document in documents)):
        return None
    return infer_links(documents)


def default_chunk_tokens(embedder_limit: int | None) -> int:
    """MaxP chunk size: the paper's 512 tokens, or fewer when the embedder reads fewer
    (all-MiniLM-L6-v2 reads 256 word pieces and would silently drop the rest)."""
    return min(PAPER_CHUNK_TOKENS, embedder_limit) if embedder_limit else PAPER_CHUNK_TOKENS


class UnitIndex:
    """Long units over ``documents``, their ~512-token chunks in ``retriever``, ranked by MaxP.

    ``retriever`` must be empty: it receives the unit chunks (ids from 0). A unit chunk's
    ``doc_id`` is its unit's id and its offsets are into the unit's text; ``pieces`` maps
    such a span back to the member documents.
    """

    def __init__(
        self,
        documents: Sequence[Document],
        tokenizer: OffsetTokenizer,
        retriever: Retriever,
        *,
        max_tokens: int = 4096,
        chunk_tokens: int = PAPER_CHUNK_TOKENS,
        overlap_tokens: int = 0,
        links: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        if len(retriever) != 0:
            raise ValueError("UnitIndex needs an empty retriever; it indexes the unit chunks itself")
        self.tokenizer = tokenizer
        self.documents = {document.id: document for document in documents}
        self.units: list[Unit] = group_documents(
            documents, lambda text: count_tokens(tokenizer, text), max_tokens, links
        )
        self.unit_by_id = {unit.id: unit for unit in self.units}
        self.chunks: list[Chunk] = chunk_documents(
            [unit.as_document() for unit in self.units], tokenizer, chunk_tokens, overlap_tokens
        )
        self.chunk_by_id = {chunk.id: chunk for chunk in self.chunks}
        self.unit_of_chunk = {chunk.id: chunk.doc_id for chunk in self.chunks}
        self.retriever = retriever
        retriever.add(self.chunks)

    def rank(self, query: str) -> tuple[list[tuple[str, float]], list[Hit]]:
        """Units by MaxP score, best first, and the chunk hits behind them (best first).

        Every chunk is scored, so every unit with a hit is ranked exactly; a unit that
        no chunk matches (possible with BM25) is left out.
        """
        hits = self.retriever.search([query], len(self.chunks))[0]
        return maxp(hits, self.unit_of_chunk), hits

    def pieces(self, unit: Unit, start: int, end: int) -> list[tuple[Document, int, int]]:
        """The parts of the unit text ``[start, end)`` as (document, start, end) in each
        member document's own text; a member's title line maps to no document text."""
        found = []
        for doc_id, member_start, member_end in unit.spans:
            document = self.documents[doc_id]
            text_start = member_start + (len(document.title) + 1 if document.title else 0)
            begin, finish = max(start, text_start) - text_start, min(end, member_end) - text_start
            if finish > begin:
                found.append((document, begin, finish))
        return found
