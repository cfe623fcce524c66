"""Retrievers for other frameworks over a saved MemoRAG pipeline (each needs its optional extra).

    from memorag.integrations.langchain import MemoRAGRetriever          # pip install -e '.[langchain]'
    from memorag.integrations.llamaindex import MemoRAGLlamaRetriever    # pip install -e '.[llamaindex]'

Both return the chunks `memorag.pipeline.search.search` finds (query and memory clues,
combined by the memorag mode's one rule, `memorag.modes.evidence_plan`, best first): the
evidence `ask` ranks for the same clues, with our metadata: `evidence_metadata` below.
"""

from __future__ import annotations

from typing import Any

from memorag.pipeline.search import SearchResult
from memorag.pipeline.types import Evidence


def evidence_metadata(result: SearchResult, item: Evidence, rank: int) -> dict[str, Any]:
    """What a framework's document carries about one piece of evidence (JSON-friendly)."""
    return {
        "doc_id": item.doc_id,
        "title": item.title,
        "chunk_id": item.chunk_id,
        "start_char": item.start_char,
        "end_char": item.end_char,
        "num_tokens": item.num_tokens,
        "score": item.score,
        "rank": rank,
        "queries": list(item.queries),  # indices into `retrieval_queries`: 0 the query, 1.. the clues
        "found_by": result.found_by(item),
        "retrieval_queries": list(result.queries),
    }


def missing_extra(framework: str, extra: str, error: ImportError) -> ImportError:
    return ImportError(
        f"the {framework} retriever needs the [{extra}] extra ({error.name} is not installed); install it with "
        f"`pip install -e '.[{extra}]'`"
    )
