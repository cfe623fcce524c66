"""The corpus object: the pipeline's documents, hashes, chunks, index, memory and version, written by it alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from memorag.pipeline import DocumentConflictError, MemoRAG, MemorizedCorpus, SaveFormatError
from memorag.pipeline.corpus import CHUNKS, DOCUMENTS, INDEX, MEMORY
from memorag.retrieval import Document
from memorag.retrieval.base import load_retriever
from memorag.retrieval.sparse import BM25Retriever

from .conftest import (
    ASK_SETTINGS,
    FakeEchoGenerator,
    FakeHashEmbedder,
    corpus_documents,
    make_rag,
    tiny_model,
    topic,
)


def test_the_pipeline_reads_its_corpus_and_cannot_be_written_from_outside():
    rag = make_rag()
    rag.memorize(corpus_documents())
    corpus = rag.memorized
    assert rag.documents == list(corpus.documents) and rag.chunks == list(corpus.chunks)
    assert rag.memory is corpus.memory and rag.retriever is corpus.retriever and corpus.version == 1
    for name in ("documents", "chunks", "memory", "retriever", "content_sha256", "memorized"):
        with pytest.raises(AttributeError):
            setattr(rag, name, None)
    for name in ("documents", "chunks", "memory", "retriever", "version", "chunk_by_id"):
        with pytest.raises(AttributeError):
            setattr(corpus, name, None)
    rag.documents.append(Document(id="x", title="", text="stray"))  # a copy: the corpus is unchanged
    rag.chunks.clear()
    assert len(rag.documents) == 3 and rag.chunks == list(corpus.chunks) != []
    with pytest.raises(TypeError):
        corpus.chunk_by_id[0] = None  # a read-only view


def test_admit_sorts_new_and_known_documents_and_changes_nothing():
    corpus = MemorizedCorpus()
    alpha, beta = corpus_documents()[:2]
    admission = corpus.admit([alpha, beta, alpha, Document(id="alpha-again", title="", text=alpha.text)])
    assert [d.id for d in admission.new] == ["alpha", "beta"] and admission.skipped == ["alpha", "alpha-again"]
    assert corpus.documents == () and corpus.version == 0
    corpus.add(admission, [], BM25Retriever(), None)
    assert corpus.documents == (alpha, beta) and corpus.version == 1
    assert corpus.admit([beta]).skipped == ["beta"]
    with pytest.raises(DocumentConflictError, match="'beta' is already memorized with another text"):
        corpus.admit([Document(id="beta", title="", text=topic(2))])


def test_the_corpus_saves_and_loads_its_own_part(tmp_path):
    rag = make_rag(retriever="bm25")
    rag.memorize(corpus_documents())
    corpus = rag.memorized
    record = corpus.save(tmp_path)
    assert {path.name for path in tmp_path.iterdir()} == {DOCUMENTS, CHUNKS, INDEX, MEMORY}
    assert record["num_chunks"] == len(corpus.chunks) and record["content_sha256"] == corpus.content_sha256
    manifest = {**record, "models": {"memory_identity": corpus.memory.identity}}
    checked = []
    loaded = MemorizedCorpus.load(tmp_path, manifest, load_retriever, checked.append)
    assert loaded.documents == corpus.documents and loaded.chunks == corpus.chunks
    assert loaded.content_sha256 == corpus.content_sha256 and len(loaded.retriever) == len(corpus.chunks)
    assert checked == [loaded.memory] and loaded.memory.num_tokens == corpus.memory.num_tokens
    rows = (tmp_path / DOCUMENTS).read_text().splitlines()
    (tmp_path / DOCUMENTS).write_text("\n".join(rows[:1] + [json.dumps({**json.loads(rows[1]), "text": "edited"})]
                                                + rows[2:]) + "\n")
    with pytest.raises(SaveFormatError, match="does not match the manifest's documents"):
        MemorizedCorpus.load(tmp_path, manifest, load_retriever, checked.append)


# Saves written by the pipeline before the corpus object existed (commit a2a00f1's code, the fakes of
# tests/pipeline/conftest.py over corpus_documents()), one per retriever kind.
OLD_SAVES = Path(__file__).resolve().parents[1] / "fixtures" / "pipeline_saves_v2"


@pytest.mark.parametrize("retriever", ["dense", "bm25"])
def test_a_save_from_before_the_corpus_object_loads_and_saves_the_same(retriever, tmp_path):
    loaded = MemoRAG.load(OLD_SAVES / retriever, memory_model=tiny_model(), embedder=FakeHashEmbedder(),
                          embedder_name="fake-hash", generator=FakeEchoGenerator(), **ASK_SETTINGS)
    assert loaded.documents == corpus_documents() and loaded.memorized.version == 1
    rag = make_rag(retriever=retriever)
    rag.memorize(corpus_documents())
    asked, again = (pipeline.ask(topic(2, 6)) for pipeline in (loaded, rag))
    assert asked.clues == again.clues and asked.evidence == again.evidence != []
    old_files = json.loads((OLD_SAVES / retriever / "manifest.json").read_text())["files"]
    loaded.save(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "manifest.json").read_text())["files"] == old_files  # byte for byte
    # a fresh memorize writes the same files, the memory's tensors up to this machine's floating-point
    # kernels (the fixture was written on an Intel Xeon; an AMD EPYC rounds a few fp32 values otherwise)
    rag.save(tmp_path / "new")
    new_files = json.loads((tmp_path / "new" / "manifest.json").read_text())["files"]
    memory_files = {name for name in old_files if name.startswith("memory/")}
    assert {k: v for k, v in new_files.items() if k not in memory_files} == {
        k: v for k, v in old_files.items() if k not in memory_files}
    old_memory, new_memory = (load_file(root / "memory" / "memory.safetensors")
                              for root in (OLD_SAVES / retriever, tmp_path / "new"))
    assert old_memory.keys() == new_memory.keys()
    for name, tensor in old_memory.items():
        torch.testing.assert_close(new_memory[name], tensor, rtol=1e-5, atol=1e-5)  # fp32: 2.4e-6 seen
