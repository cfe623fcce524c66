"""Retrieval alone: the chunks a query (and the memory's clues) find, with where they are and who found them.

`search(rag, query, k)` is what the `memorag` mode retrieves before it answers, without
the generator: the memory model writes clues for the query, the query and the clues make
the retrieval plan of `memorag.modes.evidence_plan.clue_plan` (the mode's one rule: by
default each retrieves its `memorag_hits` chunks, unioned round-robin by rank), and the
first `k` chunks of its ranking come back best first, as `Evidence` (document id, title,
character offsets, token count, score, and the indices of the queries that found it: 0 is
the query, 1.. the clues). So they are the chunks the mode ranks first, before it fits
them to its budget; the plan may find fewer than `k`. With `with_clues=False` the query
makes the plan alone (no memory model is run). The LangChain and LlamaIndex retrievers
(`memorag.integrations`) are thin wrappers around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memorag.modes.evidence import chunk_evidence
from memorag.modes.evidence_plan import clue_plan
from memorag.pipeline.types import EmptyCorpusError, Evidence, InputError

if TYPE_CHECKING:
    from memorag.pipeline.assistant import MemoRAG


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
    """The first `k` chunks of the memorag mode's ranking for `query` and its clues (the query
    alone when `with_clues` is False), best first."""
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
    plan = clue_plan(query, clues, rag.config, rag.config.hits_per_query)
    ranked, found_by = rag.retrieve_plan(plan)  # no budget: the plan's first `k`
    chunks = {chunk.id: chunk for chunk in rag.chunks}
    evidence = [chunk_evidence(chunks[hit.chunk_id], hit.score, found_by) for hit in ranked[:k]]
    return SearchResult(evidence, list(plan.queries), clues)
