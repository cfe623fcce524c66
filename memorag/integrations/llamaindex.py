"""A LlamaIndex retriever over a saved MemoRAG pipeline (the `[llamaindex]` extra: llama-index-core).

    from memorag.integrations.llamaindex import MemoRAGLlamaRetriever

    retriever = MemoRAGLlamaRetriever.from_saved("book.mrag", k=4)   # or MemoRAGLlamaRetriever(rag, k=4)
    retriever = MemoRAGLlamaRetriever.from_documents([Path("reports/")])  # PDF, Word, HTML, Markdown, text
    for hit in retriever.retrieve("Who helps the narrator escape?"):
        print(hit.score, hit.node.metadata["doc_id"], hit.node.start_char_idx, hit.node.metadata["found_by"])

Each `NodeWithScore` is one chunk with its score in the memorag mode's ranking for the same
clues (`memorag.modes.evidence_plan`: 1 / (1 + place) under the default union, else the fused
score); the node's text is the chunk,
`start_char_idx`/`end_char_idx` its offsets in its document, and its metadata
`memorag.integrations.evidence_metadata`. `use_clues=False` retrieves with the query alone.
"""

from __future__ import annotations

import os
from typing import Any

from memorag.integrations import evidence_metadata, memorized_pipeline, missing_extra
from memorag.pipeline.search import search

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as error:
    raise missing_extra("LlamaIndex", "llamaindex", error) from error


class MemoRAGLlamaRetriever(BaseRetriever):
    """LlamaIndex `BaseRetriever`: the first `k` chunks of the memorag mode's ranking for the query and its clues."""

    def __init__(self, pipeline, k: int = 4, *, use_clues: bool = True, task: str = "memorag", **kwargs: Any):
        super().__init__(**kwargs)
        self.pipeline, self.k, self.use_clues, self.task = pipeline, k, use_clues, task

    @classmethod
    def from_saved(cls, directory: str | os.PathLike[str], *, k: int = 4, use_clues: bool = True,
                   **pipeline_options: Any) -> MemoRAGLlamaRetriever:
        """Load a saved pipeline (`MemoRAG.load(directory, **pipeline_options)`) and wrap it."""
        from memorag.pipeline import MemoRAG

        return cls(MemoRAG.load(directory, **pipeline_options), k=k, use_clues=use_clues)

    @classmethod
    def from_documents(cls, documents: Any, *, k: int = 4, use_clues: bool = True, read_options: Any = None,
                       **pipeline_options: Any) -> MemoRAGLlamaRetriever:
        """Memorize `documents` (texts, or `pathlib.Path`s of PDF, Word, HTML, Markdown and text files and
        folders) into a new pipeline (`MemoRAG(**pipeline_options)`) and wrap it."""
        return cls(memorized_pipeline(documents, read_options, **pipeline_options), k=k, use_clues=use_clues)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = search(self.pipeline, query_bundle.query_str, self.k, with_clues=self.use_clues, task=self.task)
        hits = []
        for rank, item in enumerate(result.evidence, start=1):
            metadata = evidence_metadata(result, item, rank)
            node = TextNode(id_=f"{item.doc_id}#{item.chunk_id}", text=item.text, metadata=metadata,
                            start_char_idx=item.start_char, end_char_idx=item.end_char,
                            excluded_embed_metadata_keys=list(metadata), excluded_llm_metadata_keys=list(metadata))
            hits.append(NodeWithScore(node=node, score=item.score))
        return hits
