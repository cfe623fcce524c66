"""Dense retrieval with a fake hashed bag-of-words embedder: ranking, incremental add, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from memorag.retrieval.base import IndexFormatError, load_retriever
from memorag.retrieval.chunking import Chunk
from memorag.retrieval.dense import DenseRetriever
from memorag.retrieval.hybrid import HybridRetriever
from memorag.retrieval.sparse import BM25Retriever

TEXTS = [
    "apples and pears grow in the orchard",
    "the submarine dived below the arctic ice",
    "violins and cellos play in the orchestra",
    "rockets launch satellites into orbit",
    "the baker bakes bread and croissants",
]


def make_chunks(texts: list[str], first_id: int = 0) -> list[Chunk]:
    return [
        Chunk(id=first_id + i, doc_id="doc", title="", text=text, start_char=0, end_char=len(text),
              num_tokens=len(text.split()))
        for i, text in enumerate(texts)
    ]  # fmt: skip


def test_dense_ranks_the_matching_chunk_first(fake_embedder):
    retriever = DenseRetriever(fake_embedder, embedder_name="fake-hash")
    retriever.add(make_chunks(TEXTS))
    results = retriever.search(["submarine under arctic ice", "satellites orbit"], k=2)
    assert [hits[0].chunk_id for hits in results] == [1, 3]
    assert len(results[0]) == 2 and results[0][0].score >= results[0][1].score
    assert results[0][0].score <= 1.0 + 1e-6  # cosine of unit vectors
    assert len(retriever.search(["bread"], k=50)[0]) == len(TEXTS)  # k larger than the index


def test_incremental_add_encodes_only_new_chunks(fake_embedder):
    retriever = DenseRetriever(fake_embedder, batch_size=2)
    retriever.add(make_chunks(TEXTS[:3]))
    assert (fake_embedder.texts_encoded, fake_embedder.calls) == (3, 2)  # batches of 2 + 1
    retriever.add(make_chunks(TEXTS[3:], first_id=3))
    assert fake_embedder.texts_encoded == 5
    retriever.search(["bread"], k=1)
    assert fake_embedder.texts_encoded == 6  # the query only
    assert len(retriever) == 5
    vectors = retriever.vectors()
    assert vectors.shape == (5, fake_embedder.dimension) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="already indexed"):
        retriever.add(make_chunks(["again"], first_id=4))


def test_save_load_round_trip_without_reencoding(tmp_path, fake_embedder, fake_embedder_factory):
    retriever = DenseRetriever(fake_embedder, embedder_name="fake-hash")
    retriever.add(make_chunks(TEXTS, first_id=7))
    retriever.save(tmp_path / "dense")
    fresh_embedder = fake_embedder_factory()
    loaded = DenseRetriever.load(tmp_path / "dense", embedder=fresh_embedder, embedder_name="fake-hash")
    assert fresh_embedder.texts_encoded == 0
    queries = ["orchestra violins", "bread"]
    assert loaded.search(queries, k=3) == retriever.search(queries, k=3)
    assert isinstance(load_retriever(tmp_path / "dense", embedder=fresh_embedder), DenseRetriever)


def test_load_refuses_another_embedder_or_corrupt_vectors(tmp_path, fake_embedder, fake_embedder_factory):
    retriever = DenseRetriever(fake_embedder, embedder_name="fake-hash")
    retriever.add(make_chunks(TEXTS))
    retriever.save(tmp_path / "dense")
    with pytest.raises(ValueError, match="built with embedder 'fake-hash'"):
        DenseRetriever.load(tmp_path / "dense", embedder=fake_embedder, embedder_name="other-model")
    loaded = DenseRetriever.load(tmp_path / "dense", embedder=fake_embedder_factory(dimension=8))
    with pytest.raises(ValueError, match="dimension"):
        loaded.search(["bread"], k=1)
    np.save(tmp_path / "dense" / "vectors.npy", np.zeros((5, 3), dtype=np.float32))
    with pytest.raises(IndexFormatError, match="checksum"):
        DenseRetriever.load(tmp_path / "dense", embedder=fake_embedder)


def test_hybrid_fuses_bm25_and_dense_and_round_trips(tmp_path, fake_embedder):
    hybrid = HybridRetriever([BM25Retriever(), DenseRetriever(fake_embedder, embedder_name="fake-hash")])
    hybrid.add(make_chunks(TEXTS))
    (hits,) = hybrid.search(["cellos in the orchestra"], k=3)
    assert hits[0].chunk_id == 2
    # Chunk 2 is first in both lists: RRF score 2 / (60 + 1).
    assert hits[0].score == pytest.approx(2 / 61)
    hybrid.save(tmp_path / "hybrid")
    loaded = HybridRetriever.load(tmp_path / "hybrid", kwargs_by_kind={"dense": {"embedder": fake_embedder}})
    assert loaded.search(["cellos in the orchestra"], k=3) == [hits]


@pytest.mark.parametrize("load", ["import memorag.retrieval.dense as dense; faiss = dense.faiss",
                                  "from memorag.runtime.placement import set_threads; set_threads(1); import faiss"])
def test_loading_faiss_leaves_no_lines_in_an_info_log(load):
    """The commands log at INFO; faiss's loader would add a line for each SIMD build it tries (missing ones
    with their ModuleNotFoundError), which read as errors in every run's log. Whichever module loads it first."""
    import subprocess
    import sys

    code = f"import logging; logging.basicConfig(level=logging.INFO); {load}; print(faiss.IndexFlatIP(4).d)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "4"
    assert "faiss" not in done.stderr, done.stderr
