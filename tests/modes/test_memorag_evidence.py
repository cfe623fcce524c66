"""The memorag mode's evidence under the bounded round-robin (`memorag_evidence="union"`): each clue
and the query retrieve their top k, the hits are unioned, taken round-robin by rank and cut to the
budget, in document order. (The default, reference rule: tests/modes/test_reference_evidence.py.)

A FAKE memory model (it reads nothing and always writes the same clues) points its clues at
chosen chunks, so the test can say which chunks the evidence must hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memorag.retrieval import Document
from memorag.retrieval.base import Hit
from memorag.retrieval.hybrid import round_robin
from tests.memory.test_persistence import tiny_tokenizer
from tests.pipeline.conftest import FakeEchoGenerator, make_rag, words


@dataclass
class FakeMemory:
    num_tokens: int


class FakeClueMemoryModel:
    """A FAKE memory model: `memorize` counts tokens and keeps nothing; every clue prompt is
    answered with `clues`, one per line."""

    name = "fake-clue-memory"

    def __init__(self, clues: list[str]):
        self.tokenizer = tiny_tokenizer()
        self.clues = clues
        self.prompts: list[str] = []

    def memorize(self, text, memory=None, show_progress=None, on_progress=None):
        return FakeMemory(len(self.tokenizer(text)["input_ids"]))

    def generate(self, prompt, memory=None, max_new_tokens=64, on_token=None):
        self.prompts.append(prompt)
        return "\n".join(self.clues)


# Six documents of 12 words each, on disjoint vocabularies: a text's own words find it first.
TEXTS = [words(12 * number, 12) for number in range(6)]
DOCUMENTS = [Document(id=f"doc{number}", title="", text=text) for number, text in enumerate(TEXTS)]
QUERY = TEXTS[0]
CLUES = [TEXTS[4], TEXTS[2]]  # point at doc4 and doc2, neither among the query's best


GENERATOR = FakeEchoGenerator()


def ask(**settings):
    # one chunk per document (16-token chunks, 12-word texts); room for three chunks
    settings = {"memorag_evidence": "union", **settings}
    rag = make_rag(FakeClueMemoryModel(CLUES), generator=GENERATOR, clue_kinds=["spans"],
                   evidence_tokens=36, **settings)
    rag.memorize(DOCUMENTS)
    return rag.ask(QUERY, mode="memorag")


def test_each_clue_s_best_chunk_reaches_the_evidence_in_document_order():
    answer = ask()
    assert answer.clues == CLUES
    assert [item.doc_id for item in answer.evidence] == ["doc0", "doc2", "doc4"]  # document order
    found_by = {item.doc_id: item.queries for item in answer.evidence}
    assert 0 in found_by["doc0"] and 1 in found_by["doc4"] and 2 in found_by["doc2"]
    # the generator read them in that order
    prompt = GENERATOR.prompts[-1]
    assert all(TEXTS[n] in prompt for n in (0, 2, 4)) and TEXTS[1] not in prompt
    assert prompt.index(TEXTS[0]) < prompt.index(TEXTS[2]) < prompt.index(TEXTS[4])


def test_weighted_fusion_stays_an_option_and_lets_the_query_crowd_out_single_clues():
    answer = ask(memorag_evidence="fusion", hits_per_query=3, query_weight=2.0)
    kept = [item.doc_id for item in answer.evidence]
    assert len(kept) == 3 and "doc0" in kept
    # the query's three hits (weight 2 each) outrank any chunk that a single clue (weight 1) found
    assert not {"doc2", "doc4"} <= set(kept)


def test_best_first_order_is_the_round_robin_order():
    answer = ask(evidence_order="best-first")
    assert [item.doc_id for item in answer.evidence] == ["doc0", "doc4", "doc2"]  # query, clue 1, clue 2


def test_round_robin_takes_every_first_hit_before_any_second_and_dedupes():
    lists = [[Hit(10, 0.9), Hit(11, 0.8), Hit(12, 0.7)], [Hit(20, 0.5), Hit(10, 0.4)], [Hit(10, 0.9), Hit(30, 0.1)]]
    merged = round_robin(lists)
    assert [hit.chunk_id for hit in merged] == [10, 20, 11, 30, 12]
    assert [hit.score for hit in merged] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4, 1 / 5])
    assert round_robin([]) == [] and round_robin([[], []]) == []
