"""The baseline modes on hand-made corpora whose right evidence is known: full (cut in the
middle), hyde (a hypothetical passage retrieves), rqrag (rewritten and sub-questions
retrieve), dos (document order, a larger budget) beside rag (score order)."""

from __future__ import annotations

import pytest

import memorag.pipeline  # noqa: F401 - first: importing memorag.modes before it is an import cycle
from memorag.modes.rqrag import parse_queries
from memorag.pipeline import Evidence, PipelineConfig, PipelineError
from memorag.prompting import prompts
from memorag.retrieval import Document
from tests.memory.test_persistence import word
from tests.pipeline.conftest import FakeEchoGenerator, corpus_documents, make_rag, topic, words

OUTSIDE = " ".join(word(i) for i in (92, 93, 94, 95))  # words of no document: the query alone finds nothing


class ScriptedGenerator(FakeEchoGenerator):
    """A fake generator that answers prompts starting with a given text with a given reply."""

    def __init__(self, replies: dict[str, str], context_window: int | None = None):
        super().__init__("the fake answer", context_window)
        self.replies = replies

    def generate(self, prompt, *, system=None, max_new_tokens=256, on_text=None) -> str:
        self.prompts.append(prompt)
        return next((reply for start, reply in self.replies.items() if prompt.startswith(start)), self.reply)


def memorized(generator=None, documents=None, **settings):
    rag = make_rag(generator=generator or FakeEchoGenerator(), **settings)
    rag.memorize(documents or corpus_documents(), with_memory=False)
    return rag


def doc_ids(evidence) -> set[str]:
    return {item.doc_id for item in evidence}


# -- full ------------------------------------------------------------------------------------------


def test_full_keeps_every_document_when_the_corpus_fits():
    generator = FakeEchoGenerator(context_window=400)
    rag = memorized(generator)
    answer = rag.ask(topic(1, 4), mode="full")
    assert [(item.doc_id, item.start_char, item.end_char) for item in answer.evidence] == [
        (document.id, 0, len(document.text)) for document in corpus_documents()
    ]
    assert answer.warnings == [] and all(document.text in generator.prompts[-1] for document in corpus_documents())


def test_full_keeps_exactly_the_first_and_last_half_of_the_budget():
    document = Document("long", words(0, 200, step=1))
    tokens = document.text.split()  # the fake tokenizer: one token per word
    generator = FakeEchoGenerator(context_window=150)
    rag = memorized(generator, [document])
    answer = rag.ask(topic(1, 4), mode="full")
    head, tail = answer.evidence
    kept = head.num_tokens
    assert kept == tail.num_tokens > 40
    assert head.text == " ".join(tokens[:kept]) and (head.start_char, head.end_char) == (0, len(head.text))
    assert tail.text == " ".join(tokens[-kept:]) and tail.end_char == len(document.text)
    assert document.text[tail.start_char : tail.end_char] == tail.text
    prompt = generator.prompts[-1]
    assert head.text in prompt and tail.text in prompt
    assert " ".join(tokens[kept : kept + 2]) not in prompt  # the middle is gone
    # the prompt fits the window, and one more token on each side would not
    assert generator.count_tokens(prompt) + rag.config.answer_max_new_tokens <= 150
    wider = rag.mode("full").head_and_tail(2 * kept + 2)
    assert rag.context("full").evidence.room_left(topic(1, 4), wider, "qa", "en") < 0
    assert any(f"first {kept} and the last {kept}" in warning for warning in answer.warnings)


def test_full_cuts_across_documents_in_corpus_order():
    rag = memorized(FakeEchoGenerator(context_window=10_000))
    full = rag.mode("full")
    rag.ask(topic(0, 3), mode="full")  # prepares the mode
    alpha, beta, gamma = corpus_documents()  # 60 tokens each
    pieces = full.head_and_tail(100)  # 50 from the start, 50 from the end
    assert [(p.doc_id, p.num_tokens) for p in pieces] == [("alpha", 50), ("gamma", 50)]
    assert pieces[0].text == " ".join(alpha.text.split()[:50]) and pieces[1].text == " ".join(gamma.text.split()[10:])
    pieces = full.head_and_tail(141)  # 70 and 70: all of alpha and gamma, 10 of beta at each end
    assert [(p.doc_id, p.num_tokens) for p in pieces] == [("alpha", 60), ("beta", 10), ("beta", 10), ("gamma", 60)]
    assert pieces[1].text == " ".join(beta.text.split()[:10]) and pieces[2].text == " ".join(beta.text.split()[-10:])
    assert "\n\n[3] " in rag.context().evidence.render_passages(pieces)  # two pieces of beta: two passages, nothing between


def test_full_summarizes_and_needs_a_known_window():
    generator = FakeEchoGenerator(context_window=800)  # the summary itself takes 320
    rag = memorized(generator)
    answer = rag.ask("Summarize the text.", task="summarize", mode="full")
    assert generator.prompts[-1].startswith("Request: Summarize the text.") and len(answer.evidence) == 3
    with pytest.raises(PipelineError, match="window of fake-echo is unknown; set generator_window"):
        memorized().ask(topic(0, 3), mode="full")
    with pytest.raises(PipelineError, match="no room for evidence"):  # refused before any work
        memorized(FakeEchoGenerator(context_window=40)).ask(topic(0, 3), mode="full")


# -- hyde ------------------------------------------------------------------------------------------


def test_hyde_retrieves_with_the_hypothetical_passage():
    hyde_start = prompts.fill(prompts.HYDE_PASSAGE, "en", question=OUTSIDE)
    passage = topic(2, 8)
    generator = ScriptedGenerator({hyde_start: passage})
    rag = memorized(generator, hits_per_query=4, evidence_tokens=200)
    assert "gamma" not in doc_ids(rag.ask(OUTSIDE, mode="rag").evidence)  # the query alone misses it
    answer = rag.ask(OUTSIDE, mode="hyde")
    assert generator.prompts[-2] == hyde_start  # the hypothesis prompt, as written in prompts.py
    assert answer.clues == [passage] and answer.raw_clues == {"hyde": passage}
    found = [item for item in answer.evidence if item.doc_id == "gamma"]
    assert len(found) == 4 and all(1 in item.queries for item in found)
    assert all(item.queries == [0] for item in answer.evidence if item.doc_id != "gamma")
    assert generator.prompts[-1].startswith(f"Question: {OUTSIDE}") and found[0].text in generator.prompts[-1]


def test_hyde_weights_the_query_and_warns_without_a_passage():
    query = topic(0, 6)
    silent = ScriptedGenerator({prompts.fill(prompts.HYDE_PASSAGE, "en", question=query): "  "})
    answer = memorized(silent).ask(query, mode="hyde")
    assert answer.clues == [] and "alpha" in doc_ids(answer.evidence)
    assert any("no hypothetical passage" in warning for warning in answer.warnings)
    generator = ScriptedGenerator({prompts.fill(prompts.HYDE_PASSAGE, "en", question=query): topic(2, 6)})
    heavy = memorized(generator, hits_per_query=3, evidence_tokens=32, hyde={"query_weight": 3.0})
    assert doc_ids(heavy.ask(query, mode="hyde").evidence) == {"alpha"}  # the query's hits outweigh


# -- rqrag -----------------------------------------------------------------------------------------


def test_rqrag_retrieves_with_every_rewritten_and_sub_question():
    rewrite_start = prompts.fill(prompts.RQRAG_QUERIES, "en", question=OUTSIDE, max_queries="4")
    reply = (f"Sure, here are the questions:\nRewritten question: {topic(0, 5)}?\n"
             f"Sub-question 1: {topic(2, 5)}?\n3. {OUTSIDE}\n- {topic(0, 5)}?")
    generator = ScriptedGenerator({rewrite_start: reply})
    rag = memorized(generator, hits_per_query=3, evidence_tokens=200)
    answer = rag.ask(OUTSIDE, mode="rqrag")
    assert generator.prompts[-2] == rewrite_start
    assert answer.clues == [f"{topic(0, 5)}?", f"{topic(2, 5)}?"]  # acknowledgement, echo and repeat dropped
    assert answer.raw_clues == {"rqrag": reply}
    assert all(1 in item.queries for item in answer.evidence if item.doc_id == "alpha")
    assert all(2 in item.queries for item in answer.evidence if item.doc_id == "gamma")
    assert {"alpha", "gamma"} <= doc_ids(answer.evidence)


def test_rqrag_without_readable_questions_retrieves_with_the_query_and_warns():
    query = topic(1, 6)
    generator = ScriptedGenerator({prompts.fill(prompts.RQRAG_QUERIES, "en", question=query, max_queries="4"):
                                   f"Sure, here they are:\n{query}"})
    rag = memorized(generator)
    answer = rag.ask(query, mode="rqrag")
    alone = rag.ask(query, mode="rag").evidence
    assert answer.clues == [] and {item.chunk_id for item in answer.evidence} == {item.chunk_id for item in alone}
    assert all(item.queries == [0] for item in answer.evidence)
    assert any("no rewritten or sub-question" in warning for warning in answer.warnings)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("1. Where was Ada born?\n2. Who was Ada's father?", ["Where was Ada born?", "Who was Ada's father?"]),
        ("Rewritten query: Ada Lovelace birthplace\nSimpler question 2: Who raised Ada?",
         ["Ada Lovelace birthplace", "Who raised Ada?"]),
        ("* Search query: Ada's teachers\n* sub-questions: Who taught her?", ["Ada's teachers", "Who taught her?"]),
        ("Where was Ada born?\nwhere was ada born\nWhere was Ada born", ["Where was Ada born?"]),
        ("Here are the questions:\n\n", []),
        ("Who taught Ada?\n" * 2 + "a?\nb c?\nd e?\nf g?\nh i?", ["Who taught Ada?", "b c?", "d e?", "f g?"]),
        ("改写后的问题：艾达出生在哪里？\n小问题1：谁教过艾达？", ["艾达出生在哪里？", "谁教过艾达？"]),
    ],
)
def test_rqrag_reads_its_questions_from_noisy_replies(reply, expected):
    assert parse_queries(reply, "Where did Ada Lovelace grow up and who taught her?", "en", 4) == expected


def test_rqrag_keeps_sub_questions_made_of_the_query_words():
    query = "Who is the spouse of the director of Inception?"
    reply = "Who is the director of Inception?\nWho is the spouse of that director?"
    assert parse_queries(reply, query, "en", 4) == ["Who is the director of Inception?",
                                                    "Who is the spouse of that director?"]
    assert parse_queries(f"{query}\n{query.lower()}", query, "en", 4) == []  # the query itself is no new query


# -- dos and rag -----------------------------------------------------------------------------------

MIXED = topic(2, 6) + " " + topic(0, 2)  # gamma first, a little of alpha


def test_dos_and_rag_read_the_same_chunks_in_different_orders_at_equal_budgets():
    rag = memorized(evidence_tokens=64, hits_per_query=8, dos={"evidence_tokens": 64})
    by_score = rag.ask(MIXED, mode="rag").evidence
    in_order = rag.ask(MIXED, mode="dos").evidence
    assert {item.chunk_id for item in by_score} == {item.chunk_id for item in in_order}
    assert [item.score for item in by_score] == sorted((item.score for item in by_score), reverse=True)
    assert [item.start_char for item in in_order] == sorted(item.start_char for item in in_order)
    assert [item.chunk_id for item in by_score] != [item.chunk_id for item in in_order]  # the test means something


def test_dos_reads_a_larger_budget_in_document_order():
    generator = FakeEchoGenerator()
    rag = memorized(generator, evidence_tokens=48, hits_per_query=3, dos={"evidence_tokens": 150})
    narrow = rag.ask(MIXED, mode="rag").evidence
    answer = rag.ask(MIXED, mode="dos")
    wide = answer.evidence
    assert sum(item.num_tokens for item in narrow) <= 48 < sum(item.num_tokens for item in wide) <= 150
    assert len(wide) > len(narrow) == 3 and doc_ids(wide) >= {"alpha", "gamma"}
    rank = {document.id: number for number, document in enumerate(corpus_documents())}
    positions = [(rank[item.doc_id], item.start_char) for item in wide]
    assert positions == sorted(positions)
    assert all(item.queries == [0] for item in wide)
    # the prompt shows the passages in that order
    prompt = generator.prompts[-1]
    assert prompt.index(wide[0].text[:20]) < prompt.index(wide[-1].text[-20:])


def test_dos_budget_is_capped_by_the_window():
    generator = FakeEchoGenerator(context_window=120)
    rag = memorized(generator, dos={"evidence_tokens": 8192})
    rag.ask(MIXED, mode="dos")
    assert generator.count_tokens(generator.prompts[-1]) + rag.config.answer_max_new_tokens <= 120


def test_passages_in_score_order_merge_without_losing_text():
    rag = memorized(documents=corpus_documents()[:1])
    chunks = rag.chunks[:3]  # consecutive, overlapping
    evidence = [Evidence(c.id, c.doc_id, c.title, c.start_char, c.end_char, c.num_tokens, 1.0, [0], c.text)
                for c in reversed(chunks)]
    passages = rag.context().evidence.render_passages(evidence)
    assert passages.count("[1]") == 1 and "[2]" not in passages
    assert rag.documents[0].text[chunks[0].start_char : chunks[2].end_char] in passages


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("cic.examples=-1", r"cic\.examples=-1"),
        ("hyde.query_weight=0", r"hyde\.query_weight=0"),
        ("rqrag.max_queries=0", r"rqrag\.max_queries=0"),
        ("dos.evidence_tokens=0", r"dos\.evidence_tokens=0"),
    ],
)
def test_mode_settings_are_checked(settings, message):
    from memorag.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=message):
        load_config(PipelineConfig, None, [settings])
