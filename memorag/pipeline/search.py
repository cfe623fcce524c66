"""Retrieval alone: the chunks a query (and the memory's clues) find, with where they are and who found them.

`search(rag, query, k)` is what the `memorag` mode retrieves before it answers, without
the generator: the memory model writes clues for the query, the query (weight
`query_weight`) and every clue (weight 1) retrieve `hits_per_query` chunks each, the
lists are fused, and the `k` best chunks come back best first, as `Evidence` (document
id, title, character offsets, token count, fused score, and the indices of the
queries that found it: 0 is the query, 1.. the clues). With `with_clues=False` the
query retrieves alone (no memory model is run). The LangChain and LlamaIndex
retrievers (`memorag.integrations`) are thin wrappers around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memorag.modes.evidence import chunk_evidence
from memorag.pipeline.types import EmptyCorpusError, Evidence, InputError

if TYPE_CHECKING:
    from memorag.pipeline.core import MemoRAG


@dataclass
class SearchResult:
    """The evidence, best first, and the retrieval queries: `queries[0]` is the user's query,
    the rest are the clues (`Evidence.queries` indexes this list)."""

    evidence: list[Evidence]
    queries: list[str]
    clues: list[str] = field(default_factory=list)

    def found_by(self, item: Evidence) -> list[str]:
        """Which queries found `item`, as "query" or "clue: TEXT"."""
        return ["query" if index == 0 else f"clue: {self.queries[index]}" for index in item.queries]


def search(rag: MemoRAG, query: str, k: int = 4, *, with_clues: bool = True, task: str = "memorag") -> SearchResult:
    """The `k` best chunks for `query` (and its clues, unless `with_clues` is False), best first."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("the query is empty; ask something")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InputError(f"k={k!r}: ask for at least 1 result")
    query = query.strip()
    clues: list[str] = []
    if with_clues:
        clues, _ = rag.clues(query, task)  # checks the corpus and the task, builds the memory if needed
    elif not rag.documents:
        raise EmptyCorpusError("nothing is memorized yet; call memorize() (or load a saved pipeline) first")
    queries = [query, *clues]
    weights = [rag.config.query_weight] + [1.0] * len(clues)
    # the evidence step's retrieval (`MemoRAG.retrieve`), fused by weight; no budget: the `k` best
    fused, found_by = rag.retrieve(queries, weights, max(k, rag.config.hits_per_query))
    chunks = {chunk.id: chunk for chunk in rag.chunks}
    evidence = [chunk_evidence(chunks[hit.chunk_id], hit.score, found_by) for hit in fused[:k]]
    return SearchResult(evidence, queries, clues)
