"""Dense retrieval: any sentence-transformers style embedder plus an exact faiss inner-product index.

Vectors are L2-normalised float32, so inner product is cosine similarity. The index
is exact (``IndexFlatIP``): at the corpus sizes one memory model covers (up to a
few million tokens, i.e. tens of thousands of chunks) exact search costs
milliseconds and needs no training.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import faiss
import numpy as np
from tqdm.auto import tqdm

from memorag.retrieval.base import Hit, IndexFormatError, Retriever, check_new_chunk_ids, check_queries
from memorag.retrieval.chunking import Chunk

_PROGRESS_MIN_TEXTS = 1024  # show a progress bar only when encoding at least this many texts


class Embedder(Protocol):
    """The part of ``sentence_transformers.SentenceTransformer`` we use."""

    def encode(
        self,
        sentences: list[str],
        batch_size: int = ...,
        show_progress_bar: bool | None = ...,
        normalize_embeddings: bool = ...,
    ) -> np.ndarray: ...


def load_embedder(name_or_path: str | os.PathLike[str], device: str | None = None, dtype: Any = "auto") -> Any:
    """Load a SentenceTransformer on ``device`` (default "auto": CUDA when available, else CPU) in
    ``dtype`` ("auto": float32); see ``memorag.runtime.placement``."""
    from sentence_transformers import SentenceTransformer

    from memorag.runtime.placement import Placement

    return SentenceTransformer(str(name_or_path), **Placement.resolve(device or "auto", dtype).embedder_kwargs())


class DenseRetriever(Retriever):
    """Embedding search over chunk texts.

    ``embedder_name`` is recorded in the saved manifest so that an index is never
    searched with vectors from another model; give a stable name (a hub id such as
    ``"sentence-transformers/all-MiniLM-L6-v2"``), not a machine-specific path.
    """

    kind = "dense"

    def __init__(self, embedder: Embedder, embedder_name: str = "", batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.embedder = embedder
        self.embedder_name = embedder_name
        self.batch_size = batch_size
        self._chunk_ids: list[int] = []
        self._known_ids: set[int] = set()
        self._index: faiss.IndexFlatIP | None = None  # created on the first add, when the dimension is known

    @classmethod
    def from_name(cls, name_or_path: str, device: str | None = None, **kwargs: Any) -> DenseRetriever:
        """Load the embedder with ``load_embedder`` and record ``name_or_path`` as its name."""
        return cls(load_embedder(name_or_path, device=device), embedder_name=str(name_or_path), **kwargs)

    def __len__(self) -> int:
        return len(self._chunk_ids)

    @property
    def dimension(self) -> int | None:
        return None if self._index is None else self._index.d

    def encode(self, texts: Sequence[str], show_progress: bool | None = None) -> np.ndarray:
        """Unit-norm float32 embeddings of ``texts``: [len(texts), D]."""
        if show_progress is None:
            show_progress = len(texts) >= _PROGRESS_MIN_TEXTS
        batches = []
        starts = range(0, len(texts), self.batch_size)
        for start in tqdm(starts, desc="embedding", unit="batch", disable=not show_progress):
            batch = list(texts[start : start + self.batch_size])
            vectors = self.embedder.encode(
                batch, batch_size=self.batch_size, show_progress_bar=False, normalize_embeddings=True
            )
            batches.append(np.asarray(vectors, dtype=np.float32).reshape(len(batch), -1))  # [B, D]
        if not batches:
            return np.zeros((0, self.dimension or 0), dtype=np.float32)
        vectors = np.ascontiguousarray(np.concatenate(batches))  # [N, D]
        # Normalise again: cheap, and some embedders ignore normalize_embeddings.
        faiss.normalize_L2(vectors)
        return vectors

    def add(self, chunks: Sequence[Chunk]) -> None:
        new_ids = check_new_chunk_ids(self._known_ids, chunks)
        if not new_ids:
            return
        vectors = self.encode([chunk.text for chunk in chunks])  # [N_new, D]
        self._add_vectors(vectors, new_ids)

    def _add_vectors(self, vectors: np.ndarray, chunk_ids: list[int]) -> None:
        if self._index is None:
            self._index = faiss.IndexFlatIP(vectors.shape[1])
        elif vectors.shape[1] != self._index.d:
            raise ValueError(f"embedding dimension {vectors.shape[1]} != index dimension {self._index.d}")
        self._index.add(vectors)
        self._chunk_ids.extend(chunk_ids)
        self._known_ids.update(chunk_ids)

    def vectors(self) -> np.ndarray:
        """All stored chunk vectors in insertion order: [N, D]."""
        if self._index is None:
            return np.zeros((0, 0), dtype=np.float32)
        return self._index.reconstruct_n(0, self._index.ntotal)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        check_queries(queries, k)
        if self._index is None or not queries:
            return [[] for _ in queries]
        query_vectors = self.encode(list(queries), show_progress=False)  # [Q, D]
        if query_vectors.shape[1] != self._index.d:
            raise ValueError(
                f"query embedding dimension {query_vectors.shape[1]} != index dimension {self._index.d}; "
                "is this the embedder the index was built with?"
            )
        scores, rows = self._index.search(query_vectors, min(k, len(self)))  # [Q, k] each
        return [
            [
                Hit(self._chunk_ids[row], float(score))
                for score, row in zip(score_row, row_row, strict=True)
                if row >= 0
            ]
            for score_row, row_row in zip(scores, rows, strict=True)
        ]

    def _settings(self) -> dict[str, Any]:
        return {
            "embedder_name": self.embedder_name,
            "dimension": self.dimension,
            "batch_size": self.batch_size,
        }

    def _write_files(self, directory: Path) -> None:
        np.save(directory / "vectors.npy", self.vectors())
        np.save(directory / "chunk_ids.npy", np.asarray(self._chunk_ids, dtype=np.int64))

    @classmethod
    def _read_files(
        cls,
        directory: Path,
        manifest: dict[str, Any],
        embedder: Embedder | None = None,
        embedder_name: str | None = None,
        **kwargs: Any,
    ) -> DenseRetriever:
        """Without ``embedder``, load the one named in the manifest. With one, a given
        ``embedder_name`` must match the manifest's; the dimension is checked at search."""
        settings = manifest["settings"]
        saved_name = settings["embedder_name"]
        if embedder is None:
            if embedder_name is not None and embedder_name != saved_name:
                raise ValueError(f"index was built with embedder {saved_name!r}, not {embedder_name!r}")
            if not saved_name:
                raise ValueError("index records no embedder name; pass embedder= to load it")
            embedder = load_embedder(saved_name)
        elif embedder_name is not None and embedder_name != saved_name:
            raise ValueError(f"index was built with embedder {saved_name!r}, not {embedder_name!r}")
        retriever = cls(
            embedder, embedder_name=saved_name, batch_size=kwargs.get("batch_size", settings["batch_size"])
        )
        try:
            vectors = np.load(directory / "vectors.npy", allow_pickle=False)
            chunk_ids = [
                int(chunk_id) for chunk_id in np.load(directory / "chunk_ids.npy", allow_pickle=False)
            ]
        except (OSError, ValueError) as error:
            raise IndexFormatError(f"{directory}: unreadable dense index data ({error})") from error
        if vectors.ndim != 2 or len(vectors) != len(chunk_ids):
            raise IndexFormatError(f"{directory}: {vectors.shape} vectors for {len(chunk_ids)} chunk ids")
        if chunk_ids:
            retriever._add_vectors(np.ascontiguousarray(vectors, dtype=np.float32), chunk_ids)
        return retriever
