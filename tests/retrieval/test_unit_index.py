"""LongRAG's unit index: link policies, MaxP chunk size, spans of a unit mapped back to documents."""

from __future__ import annotations

import pytest

from memorag.retrieval import BM25Retriever, Document
from memorag.retrieval.unit_index import UnitIndex, choose_links, default_chunk_tokens


def documents(with_links: bool) -> list[Document]:
    return [
        Document("x1", "The zeppelin Hindenburg burned at Lakehurst.", "Airship", ["x2"] if with_links else []),
        Document("x2", "Lakehurst airfield saw the Hindenburg zeppelin disaster.", "Airfield"),
        Document("y", "Chloroplasts carry out photosynthesis in plants.", "Plants"),
    ]


def test_link_policies():
    assert choose_links(documents(True), "auto") is None  # the documents' own links
    assert choose_links(documents(True), "given") is None
    inferred = choose_links(documents(True), "terms")
    assert inferred["x1"] == ["x2"] and inferred["y"] == []
    assert choose_links(documents(False), "auto") == choose_links(documents(False), "terms")
    with pytest.raises(ValueError, match="link policy"):
        choose_links(documents(True), "sometimes")


def test_maxp_chunks_fit_what_the_embedder_reads():
    assert default_chunk_tokens(None) == 512
    assert default_chunk_tokens(256) == 256
    assert default_chunk_tokens(1024) == 512


def test_unit_spans_map_back_to_document_text(fake_tokenizer):
    index = UnitIndex(documents(True), fake_tokenizer, BM25Retriever(), max_tokens=100, chunk_tokens=6)
    unit = next(unit for unit in index.units if unit.doc_ids == ("x1", "x2"))
    boundary = unit.spans[1][1]  # where the second member (its title line first) starts
    crossing = index.pieces(unit, boundary - len("Lakehurst.\n\n"), boundary + len("Airfield\nLakehurst"))
    assert [(doc.id, doc.text[start:end]) for doc, start, end in crossing] == [
        ("x1", "Lakehurst."), ("x2", "Lakehurst")
    ]
    assert index.pieces(unit, boundary, boundary + len("Airfield")) == []  # a title maps to no text
    for chunk in index.chunks:
        assert chunk.text == index.unit_by_id[chunk.doc_id].text[chunk.start_char : chunk.end_char]
        pieces = index.pieces(index.unit_by_id[chunk.doc_id], chunk.start_char, chunk.end_char)
        assert all(doc.text[start:end] in chunk.text for doc, start, end in pieces)
    ranked, hits = index.rank("Hindenburg Lakehurst")
    assert ranked[0][0] == unit.id and hits


def test_the_retriever_must_start_empty(fake_tokenizer):
    retriever = BM25Retriever()
    UnitIndex(documents(True), fake_tokenizer, retriever)
    with pytest.raises(ValueError, match="empty retriever"):
        UnitIndex(documents(True), fake_tokenizer, retriever)
