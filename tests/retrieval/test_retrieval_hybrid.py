"""Rank fusion and fitting evidence to a token budget in document order."""

from __future__ import annotations

import pytest

from memorag.retrieval.base import Hit
from memorag.retrieval.chunking import Chunk
from memorag.retrieval.hybrid import document_order, fit_to_budget, fuse


def hits(*pairs: tuple[int, float]) -> list[Hit]:
    return [Hit(chunk_id, score) for chunk_id, score in pairs]


def test_rrf_scores_and_order():
    fused = fuse([hits((1, 9.0), (2, 5.0), (3, 1.0)), hits((3, 0.9), (1, 0.8))], method="rrf", k=60)
    assert [hit.chunk_id for hit in fused] == [1, 3, 2]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)
    assert fused[1].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2].score == pytest.approx(1 / 62)


def test_rrf_weights_ties_and_repeats():
    # Equal scores keep first-appearance order; a repeat within a list counts once.
    assert [hit.chunk_id for hit in fuse([hits((5, 1.0)), hits((4, 1.0))])] == [5, 4]
    fused = fuse([hits((1, 3.0), (1, 2.0), (2, 1.0))], k=0)
    assert fused == [Hit(1, 1.0), Hit(2, 0.5)]
    weighted = fuse([hits((1, 1.0)), hits((2, 1.0))], weights=[1.0, 3.0], k=0)
    assert [hit.chunk_id for hit in weighted] == [2, 1]
    with pytest.raises(ValueError):
        fuse([hits((1, 1.0))], weights=[1.0, 2.0])
    with pytest.raises(ValueError):
        fuse([hits((1, 1.0))], method="borda")
    assert fuse([]) == [] and fuse([[], []]) == []


def test_normalized_score_fusion():
    # List A: 10 -> 1.0, 6 -> 0.5, 2 -> 0.0.  List B (all equal): 1.0 each.
    fused = fuse([hits((1, 10.0), (2, 6.0), (3, 2.0)), hits((3, 0.4), (4, 0.4))], method="score")
    assert {hit.chunk_id: hit.score for hit in fused} == pytest.approx({1: 1.0, 2: 0.5, 3: 1.0, 4: 1.0})
    assert [hit.chunk_id for hit in fused] == [1, 3, 4, 2]


def chunk(chunk_id: int, doc_id: str, start: int, tokens: int) -> Chunk:
    return Chunk(chunk_id, doc_id, "", f"text {chunk_id}", start, start + 10, tokens)


CORPUS = [
    chunk(0, "b", 0, 50),
    chunk(1, "b", 100, 50),
    chunk(2, "a", 0, 30),
    chunk(3, "a", 100, 40),
    chunk(4, "c", 0, 200),
    chunk(5, "c", 300, 10),
]


def test_fit_to_budget_keeps_best_then_document_order():
    ranked = hits((3, 0.9), (1, 0.8), (2, 0.7), (4, 0.6), (5, 0.5))
    kept = fit_to_budget(ranked, CORPUS, max_tokens=125)
    # 3 (40) + 1 (50) + 2 (30) = 120; chunk 4 (200) does not fit, so selection stops there.
    assert [c.id for c in kept] == [1, 2, 3]  # doc "b" appears first in the corpus, then "a"
    assert fit_to_budget(ranked, CORPUS, max_tokens=39) == []
    everything = fit_to_budget(ranked + hits((3, 0.1), (0, 0.0)), {c.id: c for c in CORPUS}, 10_000)
    assert [c.id for c in everything] == [0, 1, 2, 3, 4, 5]


def test_fit_to_budget_errors():
    with pytest.raises(ValueError, match="not among"):
        fit_to_budget(hits((42, 1.0)), CORPUS, max_tokens=100)
    with pytest.raises(ValueError):
        fit_to_budget([], CORPUS, max_tokens=-1)


def test_document_order_uses_first_appearance_then_start_char():
    selected = [CORPUS[5], CORPUS[2], CORPUS[1], CORPUS[4], CORPUS[0]]
    assert [c.id for c in document_order(selected, CORPUS)] == [0, 1, 2, 4, 5]
