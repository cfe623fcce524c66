"""The `mixpr` mode on a hand-made corpus: the router (the fake generator's reply decides the
route), the rule-based option, the fallback on a malformed reply, top-k within the budget in
document order, settings from the command line."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from memorag.commands.main import _overrides, build_parser
from memorag.config import ConfigError, load_config
from memorag.modes.mixpr import MixPRSettings
from memorag.pipeline import MemoRAG, PipelineConfig
from memorag.prompting import prompts
from memorag.retrieval import mixture_pagerank as mixpr_module
from tests.pipeline.conftest import FakeEchoGenerator, make_rag

from .conftest import WICK_QUESTION, WICK_SENTENCE, FakeScriptedGenerator, village_documents

THEMES_QUESTION = "What are the main themes of the text?"


def mixpr(generator, **settings) -> MemoRAG:
    rag = make_rag(generator=generator, **settings)
    rag.memorize(village_documents(), with_memory=False)
    return rag


def in_document_order(rag: MemoRAG, evidence) -> bool:
    order = [d.id for d in rag.documents]
    keys = [(order.index(item.doc_id), item.start_char) for item in evidence]
    return keys == sorted(keys)


def test_the_router_prompt_shows_the_first_two_and_last_two_chunks_and_local_finds_the_answer():
    generator = FakeScriptedGenerator(["local", "Mara Quill did."])
    rag = mixpr(generator)
    answer = rag.ask(WICK_QUESTION, mode="mixpr")
    router_prompt, reader_prompt = generator.prompts
    chunks = rag.mode("mixpr").retriever._texts
    assert len(chunks) > 4 and WICK_QUESTION in router_prompt
    shown = [text for text in chunks if text in router_prompt]
    assert shown == [chunks[0], chunks[1], chunks[-2], chunks[-1]]
    assert answer.extras == {"route": "local", "router_reply": "local"}
    assert answer.answer == "Mara Quill did." and answer.mode == "mixpr"
    best = max(answer.evidence, key=lambda item: item.score)
    assert best.text == WICK_SENTENCE and WICK_SENTENCE in reader_prompt
    texts = {d.id: d.text for d in rag.documents}
    for item in answer.evidence:
        assert texts[item.doc_id][item.start_char : item.end_char] == item.text
        assert len(item.text.split()) <= 32
    assert in_document_order(rag, answer.evidence)


def test_the_route_decides_the_restart_weight():
    answers = {}
    for route in ("local", "global"):
        rag = mixpr(FakeScriptedGenerator([route, "an answer"]), evidence_tokens=1000)
        answers[route] = rag.ask(WICK_QUESTION, mode="mixpr")
        assert answers[route].extras["route"] == route
        retriever = rag.mode("mixpr").retriever
        expected = retriever.scores(WICK_QUESTION, route)
        got = np.array([item.score for item in answers[route].evidence])
        np.testing.assert_allclose(got, expected[[item.chunk_id for item in answers[route].evidence]])
    local = {item.chunk_id: item.score for item in answers["local"].evidence}
    plain = {item.chunk_id: item.score for item in answers["global"].evidence}
    assert local.keys() == plain.keys() and local != plain  # same chunks sent, scored by different walks


@pytest.mark.parametrize(("question", "rule_route"), [(WICK_QUESTION, "local"), (THEMES_QUESTION, "global")])
def test_a_malformed_router_reply_falls_back_to_the_rules_with_a_warning(caplog, question, rule_route):
    rag = mixpr(FakeScriptedGenerator(["it depends, maybe both", "an answer"]))
    with caplog.at_level(logging.WARNING, logger="memorag.retrieval.mixture_pagerank"):
        answer = rag.ask(question, mode="mixpr")
    assert answer.extras == {"route": rule_route, "router_reply": "it depends, maybe both"}
    assert any("names neither local nor global" in record.getMessage() for record in caplog.records)


def test_the_rule_based_router_asks_the_generator_nothing():
    generator = FakeEchoGenerator("an answer")
    rag = mixpr(generator, mixpr={"router": "rules"})
    assert rag.ask(THEMES_QUESTION, mode="mixpr").extras == {"route": "global"}
    assert rag.ask(WICK_QUESTION, mode="mixpr").extras == {"route": "local"}
    assert len(generator.prompts) == 2  # the two reader prompts only


def test_summarize_is_global_and_uses_the_summary_prompt():
    generator = FakeEchoGenerator("a summary")
    rag = mixpr(generator)
    answer = rag.ask("Summarize the village stories.", task="summarize", mode="mixpr")
    assert answer.extras == {"route": "global"} and len(generator.prompts) == 1
    assert generator.prompts[0].startswith("Request: Summarize the village stories.")
    assert answer.evidence and in_document_order(rag, answer.evidence)


def test_top_k_the_evidence_budget_and_the_window_cap_what_is_sent():
    rag = mixpr(FakeEchoGenerator(), mixpr={"router": "rules", "top_k": 2}, evidence_tokens=1000)
    assert len(rag.ask(WICK_QUESTION, mode="mixpr").evidence) == 2
    rag = mixpr(FakeEchoGenerator(), mixpr={"router": "rules"}, evidence_tokens=30)
    evidence = rag.ask(WICK_QUESTION, mode="mixpr").evidence
    assert 0 < sum(item.num_tokens for item in evidence) <= 30
    generator = FakeEchoGenerator(context_window=110)
    rag = mixpr(generator, mixpr={"router": "rules"}, evidence_tokens=1000, answer_max_new_tokens=8)
    answer = rag.ask(WICK_QUESTION, mode="mixpr")
    every = len(rag.mode("mixpr").retriever)
    assert 0 < len(answer.evidence) < every
    assert generator.count_tokens(generator.prompts[0], prompts.fill(prompts.GENERATOR_SYSTEM)) <= 110 - 8


def test_settings_from_the_command_line_and_their_validation():
    args = build_parser().parse_args(["ask", "--context", "book.txt", WICK_QUESTION, "--mode", "mixpr",
                                      "--set", "mixpr.router=rules", "--set", "mixpr.top_k=3"])
    overrides = _overrides(args)
    assert overrides == {"mode": "mixpr", "mixpr": MixPRSettings(router="rules", top_k=3)}
    rag = mixpr(FakeEchoGenerator("Mara Quill"), evidence_tokens=1000, **overrides)
    answer = rag.ask(WICK_QUESTION)
    assert answer.mode == "mixpr" and answer.answer == "Mara Quill" and len(answer.evidence) == 3
    assert WICK_SENTENCE in [item.text for item in answer.evidence]
    with pytest.raises(ConfigError, match=r"mixpr\.router"):
        PipelineConfig(mixpr=MixPRSettings(router="sometimes"))
    with pytest.raises(ConfigError, match=r"mixpr\.top_k"):
        load_config(PipelineConfig, None, ["mixpr.top_k=0"])


def test_the_mode_builds_the_paper_settings_and_the_convention_is_stated():
    rag = mixpr(FakeEchoGenerator(), mixpr={"router": "rules"})
    rag.ask(WICK_QUESTION, mode="mixpr")
    retriever = rag.mode("mixpr").retriever
    assert (retriever.max_words, retriever.alpha_local, retriever.alpha_global, retriever.max_iter) == (32, 0.6, 0.0, 18)
    assert retriever.graph.nnz > 0
    assert "*restart* weight" in mixpr_module.__doc__ and "damping" in mixpr_module.__doc__
