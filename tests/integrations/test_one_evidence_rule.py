"""The same clues give the same evidence through every path that retrieves with clues: the memorag
mode (`ask`), `search`, the LangChain and LlamaIndex retrievers and clue recall all execute the
plan of `memorag.modes.evidence_plan.clue_plan`.

A FAKE memory model always writes the same two clues, each pointing at a document that the query
alone does not rank first (tests/modes/test_memorag_evidence.py), so the rule shows in the chunks.
"""

from __future__ import annotations

import pytest

from memorag.evaluation.clue_recall import clue_recall
from memorag.evaluation.datasets.schema import EvalExample
from memorag.pipeline.search import search
from tests.modes.test_memorag_evidence import CLUES, DOCUMENTS, QUERY, FakeClueMemoryModel
from tests.pipeline.conftest import FakeEchoGenerator, make_rag


def new_rag(memorag_evidence: str):
    # room for every chunk: the mode keeps the whole ranking, given best first
    return make_rag(FakeClueMemoryModel(CLUES), generator=FakeEchoGenerator(), clue_kinds=["spans"],
                    evidence_tokens=1000, evidence_order="best-first", memorag_evidence=memorag_evidence)


@pytest.fixture(params=["reference", "union", "fusion"])
def rag(request):
    rag = new_rag(request.param)
    rag.memorize(DOCUMENTS)
    return rag


def test_same_clues_same_chunks_through_every_path(rag):
    from memorag.integrations.langchain import MemoRAGRetriever
    from memorag.integrations.llamaindex import MemoRAGLlamaRetriever

    k = len(rag.chunks)  # more than any plan finds: every path gives its whole ranking
    answer = rag.ask(QUERY, mode="memorag")
    assert answer.clues == CLUES
    mode_ids = [item.chunk_id for item in answer.evidence]

    found = search(rag, QUERY, k)
    assert found.clues == CLUES
    search_ids = [item.chunk_id for item in found.evidence]
    langchain_ids = [document.metadata["chunk_id"] for document in MemoRAGRetriever(pipeline=rag, k=k).invoke(QUERY)]
    llama_ids = [hit.node.metadata["chunk_id"] for hit in MemoRAGLlamaRetriever(rag, k=k).retrieve(QUERY)]
    example = EvalExample(id="q", task="same-evidence", question=QUERY, answers=["-"], documents=DOCUMENTS)
    record, = clue_recall([example], lambda: new_rag(rag.config.memorag_evidence), k=k, memorize="documents",
                          progress=False)
    assert record["clues"] == CLUES
    chunk_at = {(chunk.doc_id, chunk.start_char, chunk.end_char): chunk.id for chunk in rag.chunks}
    recall_ids = [chunk_at[doc_id, start, end] for doc_id, start, end, _ in record["hits"]["query+clues"]]

    assert search_ids == langchain_ids == llama_ids == recall_ids
    if rag.config.memorag_evidence in ("reference", "union"):  # distinct scores: best first is the ranking's order
        assert mode_ids == search_ids
    else:  # fused scores may tie, and best first orders ties by document
        assert sorted(mode_ids) == sorted(search_ids) and len(mode_ids) == len(search_ids)
    # a smaller k is the same ranking cut
    assert [item.chunk_id for item in search(rag, QUERY, 2).evidence] == search_ids[:2]


def test_the_default_rule_lets_each_clue_s_own_hit_rank_before_the_query_s_second():
    rag = new_rag("union")
    rag.memorize(DOCUMENTS)
    first_three = [item.doc_id for item in search(rag, QUERY, 3).evidence]
    assert first_three == ["doc0", "doc4", "doc2"]  # the query's best, then each clue's best
