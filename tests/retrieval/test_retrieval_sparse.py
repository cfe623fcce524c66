"""BM25 scores and ranking, incremental add, persistence; the TF-IDF encoder's pruning."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memorag.retrieval.base import IndexFormatError, Retriever, load_retriever
from memorag.retrieval.chunking import Chunk
from memorag.retrieval.sparse import BM25Retriever, TfidfEncoder, tokenize


def make_chunks(texts: list[str], first_id: int = 0) -> list[Chunk]:
    return [
        Chunk(id=first_id + i, doc_id=f"d{first_id + i}", title="", text=text, start_char=0,
              end_char=len(text), num_tokens=len(text.split()))
        for i, text in enumerate(texts)
    ]  # fmt: skip


CORPUS = [
    "The Eiffel Tower is in Paris and was finished in 1889.",
    "Mount Everest is the highest mountain above sea level.",
    "The Great Wall of China is thousands of kilometres long.",
    "Paris is the capital of France; the Louvre is a museum in Paris.",
]


def test_tokenize_is_unicode_aware_and_lowercase():
    assert tokenize("Grüße, МИР! naïve_café 42") == ["grüße", "мир", "naïve_café", "42"]


def test_bm25_ranks_the_right_chunk_first():
    retriever = BM25Retriever()
    retriever.add(make_chunks(CORPUS))
    (hits,) = retriever.search(["When was the Eiffel Tower finished?"], k=4)
    assert hits[0].chunk_id == 0
    (hits,) = retriever.search(["highest mountain"], k=2)
    assert [hit.chunk_id for hit in hits] == [1]  # only matching chunks are returned


def test_bm25_matches_hand_computed_scores():
    # N = 3, lengths 3, 2, 1, avgdl = 2; query "cat dog"; k1 = 1.2, b = 0.75.
    retriever = BM25Retriever(k1=1.2, b=0.75)
    retriever.add(make_chunks(["cat cat dog", "dog bird", "fish"]))
    idf_cat = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # df = 1
    idf_dog = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # df = 2
    norm_0 = 1.2 * (1 - 0.75 + 0.75 * 3 / 2)  # 1.65
    norm_1 = 1.2 * (1 - 0.75 + 0.75 * 2 / 2)  # 1.2
    expected_0 = idf_cat * 2 * 2.2 / (2 + norm_0) + idf_dog * 1 * 2.2 / (1 + norm_0)
    expected_1 = idf_dog * 1 * 2.2 / (1 + norm_1)
    (hits,) = retriever.search(["cat dog"], k=3)
    assert [hit.chunk_id for hit in hits] == [0, 1]
    assert hits[0].score == pytest.approx(expected_0, rel=1e-12)
    assert hits[1].score == pytest.approx(expected_1, rel=1e-12)
    np.testing.assert_allclose(retriever.score_all("cat dog"), [expected_0, expected_1, 0.0], rtol=1e-12)
    # A repeated query term counts twice (Lucene and rank_bm25 do the same).
    expected_dog_dog = [2 * idf_dog * 2.2 / (1 + norm_0), 2 * expected_1, 0.0]
    np.testing.assert_allclose(retriever.score_all("dog dog"), expected_dog_dog, rtol=1e-12)


def test_incremental_add_equals_one_add():
    at_once, in_parts = BM25Retriever(), BM25Retriever()
    chunks = make_chunks(CORPUS)
    at_once.add(chunks)
    in_parts.add(chunks[:2])
    assert in_parts.search(["Paris museum"], k=3)[0][0].chunk_id == 0
    in_parts.add(chunks[2:])
    queries = ["Paris museum", "wall of china", "sea level"]
    assert in_parts.search(queries, k=4) == at_once.search(queries, k=4)
    assert len(in_parts) == 4


def test_bad_arguments_are_errors():
    retriever = BM25Retriever()
    retriever.add(make_chunks(CORPUS))
    with pytest.raises(ValueError, match="already indexed"):
        retriever.add(make_chunks(["again"], first_id=1))
    with pytest.raises(TypeError):
        retriever.search("a bare string", k=3)
    with pytest.raises(ValueError):
        retriever.search(["ok"], k=0)
    assert BM25Retriever().search(["empty index"], k=3) == [[]]


def test_save_load_round_trip(tmp_path):
    retriever = BM25Retriever(k1=0.9, b=0.4)
    retriever.add(make_chunks(CORPUS, first_id=10))
    retriever.save(tmp_path / "bm25")
    loaded = BM25Retriever.load(tmp_path / "bm25")
    assert (loaded.k1, loaded.b, len(loaded)) == (0.9, 0.4, 4)
    queries = ["Paris", "mountain", "Grüße"]
    assert loaded.search(queries, k=3) == retriever.search(queries, k=3)
    assert isinstance(load_retriever(tmp_path / "bm25"), BM25Retriever)
    assert isinstance(Retriever.load(tmp_path / "bm25"), BM25Retriever)
    # Saving again replaces the index atomically and leaves no temporary directories.
    loaded.add(make_chunks(["Paris again"], first_id=99))
    loaded.save(tmp_path / "bm25")
    assert len(BM25Retriever.load(tmp_path / "bm25")) == 5
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bm25"]


def test_corrupt_or_foreign_index_is_a_clear_error(tmp_path):
    retriever = BM25Retriever()
    retriever.add(make_chunks(CORPUS))
    directory = tmp_path / "index"
    retriever.save(directory)
    manifest_path = directory / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["kind"] == "bm25" and manifest["format_version"] == 1
    assert manifest["settings"] == {"k1": 1.2, "b": 0.75}

    with pytest.raises(IndexFormatError, match=r"manifest\.json is missing"):
        BM25Retriever.load(tmp_path / "missing")
    (directory / "vocabulary.json").write_text('["tampered"]')
    with pytest.raises(IndexFormatError, match="checksum"):
        BM25Retriever.load(directory)
    manifest_path.write_text("{not json")
    with pytest.raises(IndexFormatError, match="not valid JSON"):
        BM25Retriever.load(directory)
    manifest_path.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(IndexFormatError, match="does not describe a memorag-retriever"):
        BM25Retriever.load(directory)
    manifest_path.write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(IndexFormatError, match="version"):
        BM25Retriever.load(directory)
    manifest_path.write_text(json.dumps({**manifest, "kind": "dense"}))
    with pytest.raises(IndexFormatError, match="expected 'bm25'"):
        BM25Retriever.load(directory)


def test_save_refuses_to_replace_an_unrelated_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("precious")
    retriever = BM25Retriever()
    retriever.add(make_chunks(CORPUS))
    with pytest.raises(FileExistsError):
        retriever.save(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "precious"


def test_tfidf_prunes_very_frequent_terms():
    texts = [f"common word{i} filler{i % 3}" for i in range(40)]
    vectors = TfidfEncoder(max_df=0.5, min_pruned_df=5).fit_transform(texts)
    encoder = TfidfEncoder(max_df=0.5, min_pruned_df=5)
    encoder.fit_transform(texts)
    vocabulary = encoder._vectorizer.vocabulary_
    assert "common" not in vocabulary  # in 40/40 texts > max(20, 5)
    assert "filler0" in vocabulary  # in 14/40 texts
    np.testing.assert_allclose(np.sqrt(vectors.multiply(vectors).sum(axis=1)).ravel(), 1.0, rtol=1e-6)
    # A small corpus keeps its shared terms thanks to min_pruned_df.
    small = TfidfEncoder(max_df=0.05, min_pruned_df=10)
    small.fit_transform(["alpha beta", "alpha gamma", "alpha delta"])
    assert "alpha" in small._vectorizer.vocabulary_
    assert small.transform(["alpha unknownterm"]).shape == (1, small.vocabulary_size)
