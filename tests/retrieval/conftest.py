"""Fakes for retrieval tests: a word-level tokenizer with offsets and a hashed bag-of-words embedder."""

from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np
import pytest

_FAKE_TOKEN = re.compile(r"\w+|[^\w\s]")


class FakeWordTokenizer:
    """Stands in for a Hugging Face fast tokenizer: one token per word or punctuation mark,
    with ``offset_mapping`` like ``tokenizer(text, return_offsets_mapping=True)``."""

    def __call__(self, text: str, **kwargs: Any) -> dict[str, list]:
        assert kwargs.get("return_offsets_mapping"), "chunking must ask for offsets"
        spans = [(match.start(), match.end()) for match in _FAKE_TOKEN.finditer(text)]
        return {"input_ids": list(range(len(spans))), "offset_mapping": spans}


class FakeHashEmbedder:
    """Deterministic stand-in for a SentenceTransformer: hashed bag of lower-cased words.

    Counts calls and texts so tests can check what was (re-)encoded.
    """

    def __init__(self, dimension: int = 256) -> None:
        self.dimension = dimension
        self.calls = 0
        self.texts_encoded = 0

    def encode(
        self,
        sentences: list[str],
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
    ) -> np.ndarray:
        self.calls += 1
        self.texts_encoded += len(sentences)
        vectors = np.zeros((len(sentences), self.dimension), dtype=np.float32)  # [B, D]
        for row, sentence in enumerate(sentences):
            for word in re.findall(r"\w+", sentence.lower()):
                vectors[row, zlib.crc32(word.encode("utf-8")) % self.dimension] += 1.0
        if normalize_embeddings:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return vectors


@pytest.fixture
def fake_tokenizer() -> FakeWordTokenizer:
    return FakeWordTokenizer()


@pytest.fixture
def fake_embedder() -> FakeHashEmbedder:
    return FakeHashEmbedder()


@pytest.fixture
def fake_embedder_factory() -> type[FakeHashEmbedder]:
    return FakeHashEmbedder
