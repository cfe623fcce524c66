"""The LangChain and LlamaIndex retrievers, driven through each library's own retriever interface,
over a saved pipeline of tiny fake models."""

from __future__ import annotations

import importlib
import sys

import pytest

from memorag.pipeline.search import search
from tests.pipeline.conftest import (
    FakeEchoGenerator,
    FakeHashEmbedder,
    corpus_documents,
    make_rag,
    one_thread,  # noqa: F401 -- autouse fixture: tiny models on one torch thread
    tiny_model,
    topic,
)

QUERY = topic(1, 6)  # words of topic 1 only: the document "beta"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved pipeline over three documents, and the models to load it with."""
    models = {"memory_model": tiny_model(), "embedder": FakeHashEmbedder(), "embedder_name": "fake-hash",
              "generator": FakeEchoGenerator()}
    rag = make_rag(models["memory_model"], models["embedder"], models["generator"])
    rag.memorize(corpus_documents())
    directory = tmp_path_factory.mktemp("retrievers") / "corpus"
    rag.save(directory)
    settings = {"clue_max_new_tokens": 12, "max_clues": 4, "hits_per_query": 3}
    return directory, {**models, **settings}


def check_metadata(metadata: dict, text: str, texts: dict[str, str]) -> None:
    assert texts[metadata["doc_id"]][metadata["start_char"]:metadata["end_char"]] == text
    assert metadata["found_by"] and all(name == "query" or name.startswith("clue: ") for name in metadata["found_by"])
    assert metadata["found_by"] == ["query" if index == 0 else f"clue: {metadata['retrieval_queries'][index]}"
                                    for index in metadata["queries"]]


def test_langchain_retriever_through_invoke(saved):
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda

    from memorag.integrations.langchain import MemoRAGRetriever

    directory, options = saved
    retriever = MemoRAGRetriever.from_saved(directory, k=3, **options)
    assert isinstance(retriever, BaseRetriever)
    documents = retriever.invoke(QUERY)
    assert len(documents) == 3 and all(isinstance(document, Document) for document in documents)
    texts = {document.id: document.text for document in retriever.pipeline.documents}
    for rank, document in enumerate(documents, start=1):
        check_metadata(document.metadata, document.page_content, texts)
        assert document.metadata["rank"] == rank
    # the query's own document is found by the query (the fake memory's clues may rank others above it)
    assert any(d.metadata["doc_id"] == "beta" and "query" in d.metadata["found_by"] for d in documents)
    scores = [document.metadata["score"] for document in documents]
    assert scores == sorted(scores, reverse=True)
    queries = documents[0].metadata["retrieval_queries"]
    assert queries[0] == QUERY and len(queries) >= 1
    # the same chunks and scores as the pipeline's own search, and usable in a chain
    expected = search(retriever.pipeline, QUERY, 3)
    assert [(d.metadata["chunk_id"], d.metadata["score"]) for d in documents] == [
        (item.chunk_id, item.score) for item in expected.evidence]
    chain = retriever | RunnableLambda(lambda found: [document.metadata["doc_id"] for document in found])
    assert chain.invoke(QUERY) == [document.metadata["doc_id"] for document in documents]
    assert [len(found) for found in retriever.batch([QUERY, topic(2, 6)])] == [3, 3]


def test_langchain_retriever_without_clues_uses_the_query_alone(saved):
    from memorag.integrations.langchain import MemoRAGRetriever

    directory, options = saved
    retriever = MemoRAGRetriever.from_saved(directory, k=2, use_clues=False, **options)
    documents = retriever.invoke(topic(2, 6))
    assert [document.metadata["doc_id"] for document in documents] == ["gamma", "gamma"]
    assert all(document.metadata["found_by"] == ["query"] for document in documents)
    assert documents[0].metadata["retrieval_queries"] == [topic(2, 6)]
    with pytest.raises(ValueError, match="the query is empty"):
        retriever.invoke("  ")


def test_llamaindex_retriever_through_retrieve(saved):
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle

    from memorag.integrations.llamaindex import MemoRAGLlamaRetriever

    directory, options = saved
    retriever = MemoRAGLlamaRetriever.from_saved(directory, k=3, **options)
    assert isinstance(retriever, BaseRetriever)
    hits = retriever.retrieve(QUERY)
    assert len(hits) == 3 and all(isinstance(hit, NodeWithScore) for hit in hits)
    texts = {document.id: document.text for document in retriever.pipeline.documents}
    for hit in hits:
        node = hit.node
        check_metadata(node.metadata, node.get_content(), texts)
        assert (node.start_char_idx, node.end_char_idx) == (node.metadata["start_char"], node.metadata["end_char"])
        assert hit.score == node.metadata["score"]
    assert any(hit.node.metadata["doc_id"] == "beta" and "query" in hit.node.metadata["found_by"] for hit in hits)
    expected = search(retriever.pipeline, QUERY, 3)
    assert [(hit.node.metadata["chunk_id"], hit.score) for hit in hits] == [
        (item.chunk_id, item.score) for item in expected.evidence]
    assert [hit.node.node_id for hit in retriever.retrieve(QueryBundle(QUERY))] == [hit.node.node_id for hit in hits]
    only_query = MemoRAGLlamaRetriever(retriever.pipeline, k=1, use_clues=False).retrieve(topic(0, 6))
    assert only_query[0].node.metadata["doc_id"] == "alpha" and only_query[0].node.metadata["found_by"] == ["query"]


@pytest.mark.parametrize(("module", "packages", "extra"), [
    ("memorag.integrations.langchain", ["langchain_core"], "langchain"),
    ("memorag.integrations.llamaindex", ["llama_index"], "llamaindex"),
])
def test_a_missing_extra_fails_at_import_naming_the_install_command(monkeypatch, module, packages, extra):
    monkeypatch.delitem(sys.modules, module, raising=False)
    for name in list(sys.modules):
        if any(name == package or name.startswith(package + ".") for package in packages):
            monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    for package in packages:
        monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(ImportError, match=rf"\[{extra}\] extra .*pip install -e '\.\[{extra}\]'"):
        importlib.import_module(module)


def test_search_checks_its_input(saved):
    directory, options = saved
    from memorag.pipeline import EmptyCorpusError, InputError, MemoRAG

    rag = MemoRAG.load(directory, **options)
    with pytest.raises(InputError, match="at least 1"):
        search(rag, QUERY, 0)
    empty = MemoRAG(memory_model=options["memory_model"], embedder=options["embedder"], embedder_name="fake-hash")
    with pytest.raises(EmptyCorpusError):
        search(empty, QUERY, 2, with_clues=False)


def test_retrievers_from_documents_cite_the_page(tmp_path):
    from memorag.documents import DocumentReadError
    from memorag.integrations.langchain import MemoRAGRetriever
    from memorag.integrations.llamaindex import MemoRAGLlamaRetriever
    from tests.documents.builders import pdf_bytes, scanned_pdf_bytes, write

    book = write(tmp_path, "book.pdf", pdf_bytes([topic(0), topic(1), topic(2)]))
    models = {"memory_model": tiny_model(), "embedder": FakeHashEmbedder(), "embedder_name": "fake-hash",
              "generator": FakeEchoGenerator(), "chunk_tokens": 16, "overlap_tokens": 4, "clue_max_new_tokens": 12,
              "max_clues": 4, "hits_per_query": 3}
    found = MemoRAGRetriever.from_documents([book], k=2, use_clues=False, **models).invoke(topic(2, 6))
    assert found[0].metadata["citation"] == "book.pdf, p. 3" and found[0].metadata["page"] == 3
    hits = MemoRAGLlamaRetriever.from_documents([book], k=2, use_clues=False, **models).retrieve(topic(2, 6))
    assert hits[0].node.metadata["citation"] == "book.pdf, p. 3"
    with pytest.raises(DocumentReadError, match="scan.pdf: has no text layer"):
        MemoRAGRetriever.from_documents([book, write(tmp_path, "scan.pdf", scanned_pdf_bytes())], **models)
