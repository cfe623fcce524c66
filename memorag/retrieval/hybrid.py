"""Fusing ranked lists, fitting evidence to a token budget, and a fused multi-retriever.

The pipeline's evidence rule (also DOS-RAG's): take the union of hits from every
retriever and every query (the user query, MemoRAG's clues, ...), rank it by fused
score, keep the best chunks that fit the token budget, then hand them to the
reader in document order, not score order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from memorag.retrieval.base import Hit, Retriever, check_queries, load_retriever
from memorag.retrieval.chunking import Chunk

FusionMethod = Literal["rrf", "score"]


def fuse(
    results: Sequence[Sequence[Hit]],
    method: FusionMethod = "rrf",
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """Fuse ranked hit lists (each best first) into one list, best first.

    ``"rrf"``: reciprocal-rank fusion, ``score(c) = sum_i w_i / (k + rank_i(c))`` with
    1-based ranks (Cormack et al. 2009; k = 60 is their constant).
    ``"score"``: each list's scores min-max normalised to [0, 1] (a list whose scores
    are all equal gives 1.0), then a weighted sum (CombSUM).
    A chunk absent from a list gets nothing from it; a chunk repeated within one list
    counts once, at its first (best) position, and ranks count distinct chunks. Ties
    keep the order of first appearance.
    """
    if method not in ("rrf", "score"):
        raise ValueError(f"unknown fusion method {method!r}; use 'rrf' or 'score'")
    if method == "rrf" and k < 0:
        raise ValueError(f"RRF constant k must be >= 0, got {k}")
    if weights is None:
        weights = [1.0] * len(results)
    if len(weights) != len(results):
        raise ValueError(f"{len(weights)} weights for {len(results)} result lists")
    fused: dict[int, float] = {}
    for hits, weight in zip(results, weights, strict=True):
        if not hits:
            continue
        low = min(hit.score for hit in hits)
        spread = max(hit.score for hit in hits) - low
        seen: set[int] = set()
        for hit in hits:
            if hit.chunk_id in seen:
                continue
            seen.add(hit.chunk_id)
            rank = len(seen)
            if method == "rrf":
                contribution = 1.0 / (k + rank)
            else:
                contribution = (hit.score - low) / spread if spread > 0 else 1.0
            fused[hit.chunk_id] = fused.get(hit.chunk_id, 0.0) + weight * contribution
    # sorted() is stable, so equal scores keep first-appearance order.
    return [Hit(chunk_id, score) for chunk_id, score in sorted(fused.items(), key=lambda item: -item[1])]


def round_robin(results: Sequence[Sequence[Hit]]) -> list[Hit]:
    """The union of ranked hit lists (each best first), deduplicated, taken round-robin by rank:
    every list's first hit, in list order, then every list's second hit, and so on.

    This is MemoRAG's evidence rule (each clue and the query retrieve their own top k, and
    the hits are unioned) with an order for when a budget cannot hold them all: no list's
    second hit comes before any list's first. A chunk keeps its earliest place. The
    returned scores are ``1 / (1 + place)``: they say only that order (scores of different
    queries' lists are not compared).
    """
    order: list[int] = []
    seen: set[int] = set()
    for rank in range(max((len(hits) for hits in results), default=0)):
        for hits in results:
            if rank < len(hits) and hits[rank].chunk_id not in seen:
                seen.add(hits[rank].chunk_id)
                order.append(hits[rank].chunk_id)
    return [Hit(chunk_id, 1.0 / (1 + place)) for place, chunk_id in enumerate(order)]


def _as_mapping(chunks: Sequence[Chunk] | Mapping[int, Chunk]) -> Mapping[int, Chunk]:
    return chunks if isinstance(chunks, Mapping) else {chunk.id: chunk for chunk in chunks}


def document_order(selected: Sequence[Chunk], corpus: Sequence[Chunk] | Mapping[int, Chunk]) -> list[Chunk]:
    """``selected`` sorted into document order: documents in the order they first appear
    in ``corpus``, then by ``start_char`` within a document."""
    document_rank: dict[str, int] = {}
    for chunk in _as_mapping(corpus).values():
        document_rank.setdefault(chunk.doc_id, len(document_rank))
    missing = {chunk.doc_id for chunk in selected} - document_rank.keys()
    if missing:
        raise ValueError(f"selected chunks come from documents not in the corpus: {sorted(missing)[:5]}")
    return sorted(selected, key=lambda chunk: (document_rank[chunk.doc_id], chunk.start_char, chunk.id))


def fit_to_budget(
    hits: Sequence[Hit], chunks: Sequence[Chunk] | Mapping[int, Chunk], max_tokens: int
) -> list[Chunk]:
    """Keep the best hits (``hits`` is best first) while their ``num_tokens`` sum stays
    within ``max_tokens``, then return those chunks in document order.

    Selection stops at the first chunk that does not fit, so a lower-ranked chunk is
    never kept in place of a higher-ranked one. Repeated chunk ids count once.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    by_id = _as_mapping(chunks)
    kept: list[Chunk] = []
    seen: set[int] = set()
    used = 0
    for hit in hits:
        if hit.chunk_id in seen:
            continue
        if hit.chunk_id not in by_id:
            raise ValueError(f"hit for chunk id {hit.chunk_id}, which is not among the given chunks")
        chunk = by_id[hit.chunk_id]
        if used + chunk.num_tokens > max_tokens:
            break
        seen.add(hit.chunk_id)
        kept.append(chunk)
        used += chunk.num_tokens
    return document_order(kept, by_id)


class HybridRetriever(Retriever):
    """Several retrievers over the same chunks, their ranked lists fused per query.

    Each part is asked for ``depth`` candidates (at least ``k``) before fusion, since
    a chunk ranked low by one retriever may win after fusion.
    """

    kind = "hybrid"

    def __init__(
        self,
        retrievers: Sequence[Retriever],
        method: FusionMethod = "rrf",
        rrf_k: int = 60,
        weights: Sequence[float] | None = None,
        depth: int = 100,
    ) -> None:
        if not retrievers:
            raise ValueError("HybridRetriever needs at least one retriever")
        if weights is not None and len(weights) != len(retrievers):
            raise ValueError(f"{len(weights)} weights for {len(retrievers)} retrievers")
        self.retrievers = list(retrievers)
        self.method, self.rrf_k, self.depth = method, rrf_k, depth
        self.weights = None if weights is None else [float(weight) for weight in weights]

    def __len__(self) -> int:
        return len(self.retrievers[0])

    def add(self, chunks: Sequence[Chunk]) -> None:
        for retriever in self.retrievers:
            retriever.add(chunks)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        check_queries(queries, k)
        depth = max(k, self.depth)
        per_retriever = [retriever.search(queries, depth) for retriever in self.retrievers]
        return [
            fuse([results[query] for results in per_retriever], self.method, self.rrf_k, self.weights)[:k]
            for query in range(len(queries))
        ]

    def _settings(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "rrf_k": self.rrf_k,
            "weights": self.weights,
            "depth": self.depth,
            "parts": [retriever.kind for retriever in self.retrievers],
        }

    def _write_files(self, directory: Path) -> None:
        for position, retriever in enumerate(self.retrievers):
            retriever.save(directory / f"part-{position}")

    @classmethod
    def _read_files(
        cls,
        directory: Path,
        manifest: dict[str, Any],
        kwargs_by_kind: Mapping[str, Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> HybridRetriever:
        """``kwargs_by_kind`` passes load arguments to parts, e.g. ``{"dense": {"embedder": model}}``."""
        settings = manifest["settings"]
        kwargs_by_kind = kwargs_by_kind or {}
        parts = [
            load_retriever(directory / f"part-{position}", **kwargs_by_kind.get(kind, {}))
            for position, kind in enumerate(settings["parts"])
        ]
        return cls(parts, settings["method"], settings["rrf_k"], settings["weights"], settings["depth"])
