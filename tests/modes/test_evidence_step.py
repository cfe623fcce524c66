"""The evidence step: one place counts the generator's room, the empty prompt is counted once
per question, and modes are handed a context rather than the pipeline."""

from __future__ import annotations

import pytest

from memorag.modes.context import ModeContext
from memorag.modes.evidence import TOKENIZER_MARGIN, EvidenceStep
from memorag.pipeline import QueryTooLongError
from tests.pipeline.conftest import FakeEchoGenerator, corpus_documents, make_rag, topic


def counting(monkeypatch) -> list[int]:
    """How many evidence items each answer prompt rendered by an `EvidenceStep` held."""
    sizes: list[int] = []
    render = EvidenceStep.prompt

    def prompt(self, query, task, language, evidence, draft=""):
        sizes.append(len(evidence))
        return render(self, query, task, language, evidence, draft)

    monkeypatch.setattr(EvidenceStep, "prompt", prompt)
    return sizes


@pytest.mark.parametrize("mode", ["rag", "dos", "memorag"])
def test_the_prompt_without_evidence_is_counted_once_per_question(mode, monkeypatch):
    rag = make_rag(generator=FakeEchoGenerator(context_window=400))
    rag.memorize(corpus_documents())
    sizes = counting(monkeypatch)
    answer = rag.ask(topic(1, 6), mode=mode)
    assert answer.evidence and sizes.count(0) == 1  # the check before any work, reused for the budget
    assert sizes[-1] == len(answer.evidence)  # the prompt the generator got, rendered once more


def test_the_room_is_the_window_less_the_prompt_and_the_reply():
    generator = FakeEchoGenerator(context_window=300)
    rag = make_rag(generator=generator, answer_max_new_tokens=20)
    rag.memorize(corpus_documents())
    step = rag.context("rag").evidence
    prompt = step.prompt("a question", "qa", "en", [])
    system = step.system("qa", "en")
    room = 300 - generator.count_tokens(prompt, system) - 20
    assert step.room_after(prompt, system, 20) == step.room_left("a question", [], "qa", "en") == room
    assert step.room_for_evidence("a question", "qa", "en") == int(room * TOKENIZER_MARGIN)
    assert step.budget("a question", "qa", "en", 10) == 10
    with pytest.raises(QueryTooLongError, match="shorten the query"):
        step.room_for_evidence("word " * 400, "qa", "en")


def test_a_window_unknown_leaves_the_budget_to_the_settings():
    rag = make_rag(generator=FakeEchoGenerator(context_window=None), evidence_tokens=77)
    rag.memorize(corpus_documents())
    step = rag.context("rag").evidence
    assert step.room_left("q", [], "qa", "en") is None and step.budget("q", "qa", "en") == 77


def test_a_mode_is_handed_a_context_not_the_pipeline(monkeypatch):
    rag = make_rag(generator=FakeEchoGenerator(context_window=400))
    rag.memorize(corpus_documents(), with_memory=False)
    seen = []
    mode = rag.mode("rag")
    answer = type(mode).answer
    monkeypatch.setattr(type(mode), "answer", lambda self, context, *rest: seen.append(context) or answer(self, context, *rest))
    rag.ask(topic(1, 6), mode="rag")
    (context,) = seen
    assert isinstance(context, ModeContext) and context.corpus.chunks == tuple(rag.chunks)
    assert "memory" not in context.__dict__ and rag.memory is None  # the memory is built only when asked for
    assert not any(value is rag for value in vars(mode).values())
