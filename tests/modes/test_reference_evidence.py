"""The reference evidence rule on fixed retrieval lists: the memorag mode keeps every chunk the
query's own hits hold (so every chunk the rag mode gives on the same lists), reads the whole union
in document order, offers the draft, and when the generator's window is short cuts the chunks clues
alone found first; the old `union` setting still gives the bounded round-robin.

A FAKE memory model writes fixed clues (tests/modes/test_memorag_evidence.py) and a FAKE retriever
answers each query with a fixed list of chunks, so every list, and so every expected union, is known.
"""

from __future__ import annotations

import random

import pytest

from memorag.modes.evidence import cut_clue_hits_first
from memorag.retrieval import Document
from memorag.retrieval.base import Hit
from memorag.retrieval.hybrid import fit_to_budget, round_robin
from tests.modes.test_memorag_evidence import FakeClueMemoryModel
from tests.pipeline.conftest import FakeEchoGenerator, make_rag, words

# Eight documents of 12 words each (one 16-token chunk each), on disjoint vocabularies.
TEXTS = [words(12 * number, 12) for number in range(8)]
DOCUMENTS = [Document(id=f"doc{number}", title="", text=text) for number, text in enumerate(TEXTS)]
QUERY = "which passage holds the answer"
CLUES = ["the first clue's words", "the second clue's words"]
# doc numbers each query's list holds, best first: the query's own hits are not the clues' first ones
LISTS = {QUERY: [5, 1, 6], CLUES[0]: [2, 5, 7], CLUES[1]: [3, 0, 4]}
DRAFT = " ".join(CLUES)  # the fake memory writes its clues as its draft too, read whole as one clue
WITH_DRAFT = {**LISTS, DRAFT: [7]}


class FakeBatchClueMemoryModel(FakeClueMemoryModel):
    """The FAKE clue memory, also asked several clue kinds as one batch (each answered alone)."""

    def generate_batch(self, prompts, memory=None, max_new_tokens=64, exact=True):
        return [self.generate(prompt, memory, max_new_tokens) for prompt in prompts]


class FakeListsRetriever:
    """A FAKE retriever: each query's hits are its fixed list of `LISTS` (doc numbers), scored
    0.9, 0.8, 0.7... down the list; stands in for the index's `search` only."""

    def __init__(self, lists: dict[str, list[int]], chunk_of_doc: dict[int, int]):
        self.lists = lists
        self.chunk_of_doc = chunk_of_doc

    def search(self, queries, k):
        return [[Hit(self.chunk_of_doc[number], round(0.9 - 0.1 * rank, 6))
                 for rank, number in enumerate(self.lists[query][:k])] for query in queries]


def rag_on_lists(monkeypatch, lists=LISTS, clue_kinds=("spans",), generator=None, **settings):
    settings = {"evidence_tokens": 36, **settings}
    rag = make_rag(FakeBatchClueMemoryModel(CLUES), generator=generator or FakeEchoGenerator(),
                   clue_kinds=list(clue_kinds), **settings)
    rag.memorize(DOCUMENTS)
    chunk_of_doc = {int(chunk.doc_id[3:]): chunk.id for chunk in rag.chunks}
    assert len(chunk_of_doc) == len(rag.chunks) == len(DOCUMENTS)  # one chunk a document
    monkeypatch.setattr(rag.retriever, "search", FakeListsRetriever(lists, chunk_of_doc).search)
    return rag


def doc_numbers(answer) -> list[int]:
    return [int(item.doc_id[3:]) for item in answer.evidence]


def test_the_whole_union_is_read_in_document_order_with_every_query_hit(monkeypatch):
    answer = rag_on_lists(monkeypatch).ask(QUERY, mode="memorag")
    assert answer.clues == CLUES
    union = sorted(set(LISTS[QUERY]) | set(LISTS[CLUES[0]]) | set(LISTS[CLUES[1]]))
    assert doc_numbers(answer) == union  # no budget: 8 chunks of 16 tokens against evidence_tokens=36
    assert set(LISTS[QUERY]) <= set(doc_numbers(answer))
    assert not answer.warnings and answer.offered_draft == ""


def test_each_item_names_the_lists_that_fetched_it_with_rank_and_score(monkeypatch):
    answer = rag_on_lists(monkeypatch).ask(QUERY, mode="memorag")
    doc5 = next(item for item in answer.evidence if item.doc_id == "doc5")
    assert [(f.query_index, f.query, f.rank, f.score) for f in doc5.found_by] == [
        (0, QUERY, 1, 0.9), (1, CLUES[0], 2, 0.8)]
    assert doc5.queries == [0, 1] and [f.label for f in doc5.found_by] == ["query", "clue 1"]
    as_json = answer.to_dict()["evidence"][doc_numbers(answer).index(5)]
    assert as_json["found_by"][1] == {"query_index": 1, "query": CLUES[0], "rank": 2, "score": 0.8}


@pytest.mark.parametrize("seed", range(20))
def test_the_query_s_own_hits_are_never_pushed_out_by_a_clue_s(monkeypatch, seed):
    picks = random.Random(seed)
    lists = {query: picks.sample(range(8), 3) for query in (QUERY, *CLUES)}
    answer = rag_on_lists(monkeypatch, lists).ask(QUERY, mode="memorag")
    assert set(lists[QUERY]) <= set(doc_numbers(answer))


@pytest.mark.parametrize("evidence_tokens", [36, 48])
@pytest.mark.parametrize("seed", range(10))
def test_memorag_holds_every_chunk_the_rag_mode_gives_on_the_same_lists(monkeypatch, seed, evidence_tokens):
    picks = random.Random(seed)
    lists = {query: picks.sample(range(8), 3) for query in (QUERY, *CLUES)}
    rag = rag_on_lists(monkeypatch, lists, evidence_tokens=evidence_tokens)  # rag retrieves 3, as each clue
    rag_docs = doc_numbers(rag.ask(QUERY, mode="rag"))
    assert rag_docs and set(rag_docs) <= set(lists[QUERY])  # rag's evidence is the query's own hits, cut
    assert set(rag_docs) <= set(doc_numbers(rag.ask(QUERY, mode="memorag")))


def test_the_old_union_setting_reproduces_the_bounded_round_robin(monkeypatch):
    rag = rag_on_lists(monkeypatch, memorag_evidence="union")
    answer = rag.ask(QUERY, mode="memorag")
    chunk_of_doc = {int(chunk.doc_id[3:]): chunk.id for chunk in rag.chunks}
    lists = [[Hit(chunk_of_doc[n], 1.0) for n in LISTS[query]] for query in (QUERY, *CLUES)]
    expected = fit_to_budget(round_robin(lists), rag.chunks, 36)  # room for three 12-token chunks
    assert [item.chunk_id for item in answer.evidence] == [chunk.id for chunk in expected]
    assert doc_numbers(answer) == [2, 3, 5]  # every list's first hit: the query's 1 and 6 are pushed out
    assert answer.offered_draft == ""


def window_for(rag, kept_docs: list[int], draft: str = "") -> int:
    """The generator window that holds the answer prompt over `kept_docs` exactly (and the answer)."""
    step = rag.context("memorag").evidence
    evidence = [item for item in rag.ask(QUERY, mode="memorag").evidence if int(item.doc_id[3:]) in kept_docs]
    step.generator.context_window = 10**6
    return 10**6 - step.room_left(QUERY, evidence, "memorag", "en", draft)


def test_a_short_window_cuts_the_clues_hits_first_from_the_end_of_the_round_robin(monkeypatch):
    generator = FakeEchoGenerator()
    rag = rag_on_lists(monkeypatch, generator=generator)
    # round robin: 5 2 3 | 1 0 | 6 7 4 ; clue-only hits from the end: 4, 7, 0, 3, 2
    generator.context_window = window_for(rag, [5, 1, 6, 2, 3])
    answer = rag.ask(QUERY, mode="memorag")
    assert doc_numbers(answer) == [1, 2, 3, 5, 6]  # 4, 7 and 0 cut, the query's 5, 1, 6 kept
    assert len(answer.warnings) == 1 and "3 found by clues alone" in answer.warnings[0]


def test_only_a_window_too_short_for_the_query_s_hits_cuts_them_lowest_first(monkeypatch):
    generator = FakeEchoGenerator()
    rag = rag_on_lists(monkeypatch, generator=generator)
    generator.context_window = window_for(rag, [5, 1])
    answer = rag.ask(QUERY, mode="memorag")
    assert doc_numbers(answer) == [1, 5]  # every clue-only hit cut, then the query's third (6)
    assert len(answer.warnings) == 2 and "the query's own hits: 1 were left out" in answer.warnings[1]


def test_the_cut_order_on_a_ranking():
    class Item:
        def __init__(self, queries):
            self.queries = queries

    ranking = [Item([0]), Item([1]), Item([0, 2]), Item([2]), Item([0])]
    assert cut_clue_hits_first(ranking) == 3  # the last one clues alone found
    assert cut_clue_hits_first(ranking[:3] + ranking[4:]) == 1
    assert cut_clue_hits_first([Item([0]), Item([0, 1])]) == 1  # only the query's: its last


def test_the_draft_is_offered_after_the_evidence_in_the_reference_s_words(monkeypatch):
    generator = FakeEchoGenerator()
    rag = rag_on_lists(monkeypatch, WITH_DRAFT, clue_kinds=("spans", "draft"), generator=generator)
    answer = rag.ask(QUERY, mode="memorag")
    assert answer.offered_draft == DRAFT and DRAFT in answer.clues  # it retrieves as a clue, and is offered
    prompt = generator.prompts[-1]
    offer = f"The answer might be {answer.offered_draft}."
    assert offer in prompt and prompt.index(TEXTS[7]) < prompt.index(offer)
    assert answer.to_dict()["offered_draft"] == answer.offered_draft


def test_no_draft_is_offered_under_the_round_robin(monkeypatch):
    generator = FakeEchoGenerator()
    rag = rag_on_lists(monkeypatch, WITH_DRAFT, clue_kinds=("spans", "draft"), generator=generator,
                       memorag_evidence="union")
    answer = rag.ask(QUERY, mode="memorag")
    assert answer.offered_draft == "" and "The answer might be" not in generator.prompts[-1]


@pytest.mark.parametrize("seed", range(10))
def test_with_the_default_depths_memorag_holds_every_chunk_of_the_rag_mode(monkeypatch, seed):
    """rag's query retrieves 6 and each clue 3 (the defaults): rag's chunks at ranks 4 to 6 stay in
    memorag's evidence too, whatever the clues fetch."""
    picks = random.Random(seed)
    lists = {QUERY: picks.sample(range(8), 6), **{clue: picks.sample(range(8), 3) for clue in CLUES}}
    rag = rag_on_lists(monkeypatch, lists, evidence_tokens=96, hits_per_query=6, memorag_hits=3)
    rag_docs = doc_numbers(rag.ask(QUERY, mode="rag"))
    assert len(rag_docs) > 3 and set(rag_docs) <= set(lists[QUERY])
    assert set(rag_docs) <= set(doc_numbers(rag.ask(QUERY, mode="memorag")))
