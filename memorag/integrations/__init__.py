"""Retrievers for other frameworks over a saved MemoRAG pipeline (each needs its optional extra).

    from memorag.integrations.langchain import MemoRAGRetriever          # pip install -e '.[langchain]'
    from memorag.integrations.llamaindex import MemoRAGLlamaRetriever    # pip install -e '.[llamaindex]'

Both return the chunks `memorag.pipeline.search.search` finds (query and memory clues,
combined by the memorag mode's one rule, `memorag.modes.evidence_plan`, best first): the
evidence `ask` ranks for the same clues, with our metadata: `evidence_metadata` below, which
says where each chunk lies in its file ("report.pdf, p. 12"). Each also builds from documents
(`from_documents(paths_or_texts)`: PDF, Word, HTML, Markdown, text files and folders).
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
        "page": item.page,  # the first page of a PDF the chunk runs over (None: no pages)
        "last_page": item.last_page,
        "section": list(item.section),  # the heading path the chunk starts under (empty: none)
        "citation": item.citation,  # "report.pdf, p. 12"
        "queries": list(item.queries),  # indices into `retrieval_queries`: 0 the query, 1.. the clues
        "found_by": result.found_by(item),
        "retrieval_queries": list(result.queries),
    }


def memorized_pipeline(documents: Any, read_options: Any = None, **pipeline_options: Any):
    """A new pipeline (`MemoRAG(**pipeline_options)`) holding `documents` (texts, `Document`s, or
    `pathlib.Path`s of files and folders); a file that cannot be read raises (nothing is left out
    silently)."""
    from memorag.documents import DocumentReadError
    from memorag.pipeline import MemoRAG

    rag = MemoRAG(**pipeline_options)
    report = rag.memorize(documents, read_options=read_options)
    if report.problems:
        raise DocumentReadError(f"{len(report.problems)} file(s)", "cannot be read: " + " | ".join(report.problems),
                                "fix or leave them out, then build the retriever again")
    return rag


def missing_extra(framework: str, extra: str, error: ImportError) -> ImportError:
    return ImportError(
        f"the {framework} retriever needs the [{extra}] extra ({error.name} is not installed); install it with "
        f"`pip install -e '.[{extra}]'`"
    )
