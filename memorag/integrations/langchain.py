"""A LangChain retriever over a saved MemoRAG pipeline (the `[langchain]` extra: langchain-core).

    from memorag.integrations.langchain import MemoRAGRetriever

    retriever = MemoRAGRetriever.from_saved("book.mrag", k=4)     # or MemoRAGRetriever(pipeline=rag, k=4)
    retriever = MemoRAGRetriever.from_documents([Path("reports/")])  # PDF, Word, HTML, Markdown, text
    for document in retriever.invoke("Who helps the narrator escape?"):
        print(document.metadata["doc_id"], document.metadata["start_char"], document.metadata["found_by"])

Each `Document` is one chunk; its metadata is `memorag.integrations.evidence_metadata`
(document id, title, chunk id, character offsets, tokens, score, rank, and which
query or clue found it). The chunks are the first `k` of the memorag mode's ranking for the
same clues (`memorag.modes.evidence_plan`). `use_clues=False` retrieves with the query alone.
"""

from __future__ import annotations

import os
from typing import Any

from memorag.integrations import evidence_metadata, memorized_pipeline, missing_extra
from memorag.pipeline.search import search

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError as error:
    raise missing_extra("LangChain", "langchain", error) from error


class MemoRAGRetriever(BaseRetriever):
    """LangChain `BaseRetriever`: the first `k` chunks of the memorag mode's ranking for the query and its clues."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pipeline: Any  # a memorag.MemoRAG with something memorized
    k: int = 4
    use_clues: bool = True
    task: str = "memorag"

    @classmethod
    def from_saved(cls, directory: str | os.PathLike[str], *, k: int = 4, use_clues: bool = True,
                   **pipeline_options: Any) -> MemoRAGRetriever:
        """Load a saved pipeline (`MemoRAG.load(directory, **pipeline_options)`) and wrap it."""
        from memorag.pipeline import MemoRAG

        return cls(pipeline=MemoRAG.load(directory, **pipeline_options), k=k, use_clues=use_clues)

    @classmethod
    def from_documents(cls, documents: Any, *, k: int = 4, use_clues: bool = True, read_options: Any = None,
                       **pipeline_options: Any) -> MemoRAGRetriever:
        """Memorize `documents` (texts, or `pathlib.Path`s of PDF, Word, HTML, Markdown and text files and
        folders) into a new pipeline (`MemoRAG(**pipeline_options)`) and wrap it."""
        return cls(pipeline=memorized_pipeline(documents, read_options, **pipeline_options), k=k,
                   use_clues=use_clues)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        result = search(self.pipeline, query, self.k, with_clues=self.use_clues, task=self.task)
        return [
            Document(page_content=item.text, metadata=evidence_metadata(result, item, rank),
                     id=f"{item.doc_id}#{item.chunk_id}")
            for rank, item in enumerate(result.evidence, start=1)
        ]
