"""The evidence step: one place counts the generator's room, the empty prompt is counted once
per question, the answer prompt is rendered and tokenized once and sent as measured, and modes
are handed a context rather than the pipeline."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memorag.generation import LocalGenerator
from memorag.modes.context import ModeContext
from memorag.modes.evidence import TOKENIZER_MARGIN, EvidenceStep, weakest_first
from memorag.pipeline import QueryTooLongError
from tests.pipeline.conftest import FakeEchoGenerator, corpus_documents, make_rag, tiny_model, topic


class FakeCountingTokenizer:
    """The tiny models' tokenizer, counting the texts it tokenizes (a fake wrapper)."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.inner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class Recorder:
    """What one `ask` did: the answer prompts rendered, the prompts measured, the ids the model got."""

    def __init__(self, monkeypatch):
        self.renders: list[int] = []  # the evidence count of each prompt rendered
        self.measured: list = []
        self.sent: list[list[int]] = []
        render, measure, run = EvidenceStep.render, EvidenceStep.measure, LocalGenerator._generate

        def counted_render(step, query, task, language, evidence, draft=""):
            self.renders.append(len(evidence))
            return render(step, query, task, language, evidence, draft)

        def recorded_measure(step, *args, **kwargs):
            self.measured.append(measure(step, *args, **kwargs))
            return self.measured[-1]

        def recorded_run(generator, input_ids, *args, **kwargs):
            self.sent.append(input_ids[0].tolist())
            return run(generator, input_ids, *args, **kwargs)

        monkeypatch.setattr(EvidenceStep, "render", counted_render)
        monkeypatch.setattr(EvidenceStep, "measure", recorded_measure)
        monkeypatch.setattr(LocalGenerator, "_generate", recorded_run)


def local_rag(**settings):
    """A pipeline over the three topic documents whose generator is the tiny model, its tokenizer
    counted (`FakeCountingTokenizer`). The documents have long titles: each passage of a prompt
    costs tokens beyond the budget's, so a window can be too short for evidence within budget."""
    model = tiny_model()
    tokenizer = FakeCountingTokenizer(model.tokenizer)
    rag = make_rag(model=model, generator=LocalGenerator(model.base_model, tokenizer, name="tiny"), **settings)
    rag.memorize([replace(document, title=f"the {document.id} part of the long story told here")
                  for document in corpus_documents()], with_memory=False)
    return rag, tokenizer


@pytest.mark.parametrize("order", ["document", "best-first"])
@pytest.mark.parametrize("mode", ["rag", "dos", "mixpr"])
def test_one_ask_renders_and_tokenizes_its_prompt_once_and_sends_what_it_measured(mode, order, monkeypatch):
    query = topic(1, 6)
    rag, tokenizer = local_rag(evidence_order=order, evidence_tokens=64, hits_per_query=4)
    rag.ask(query, mode=mode)  # the mode prepares (mixpr builds its graph) outside the count
    tokenizer.calls = 0
    seen = Recorder(monkeypatch)
    answer = rag.ask(query, mode=mode)
    assert len(answer.evidence) > 1
    # the prompt without evidence, counted once for the budget; the answer prompt, once (mixpr's
    # generator also reads its router prompt, a prompt of its own)
    assert seen.renders == [0, len(answer.evidence)] and tokenizer.calls == 2 + (mode == "mixpr")
    prompt = seen.measured[-1]
    step = rag.context(mode).evidence
    assert prompt.evidence == answer.evidence == step.order(answer.evidence, order)
    assert len(seen.sent) == 1 + (mode == "mixpr")
    assert seen.sent[-1] == list(prompt.tokens.ids)  # the ids measured are the ids the model read
    assert prompt.text == step.prompt(query, "qa", "en", answer.evidence)


@pytest.mark.parametrize("order", ["document", "best-first"])
def test_a_prompt_cut_to_the_window_is_measured_once_more_and_sent_as_measured(order, monkeypatch):
    query = topic(1, 6)
    rag, tokenizer = local_rag(evidence_order=order, evidence_tokens=64, hits_per_query=5)
    full = rag.ask(query, mode="rag").evidence
    assert len(full) == 4
    step = rag.context("rag").evidence
    whole = step.measure(query, "qa", "en", full).tokens.count + rag.config.answer_max_new_tokens
    rag.generator.context_window = whole - 1  # one token short
    tokenizer.calls = 0
    seen = Recorder(monkeypatch)
    answer = rag.ask(query, mode="rag")
    weakest = min(range(len(full)), key=lambda index: full[index].score)
    assert answer.evidence == full[:weakest] + full[weakest + 1 :]  # the lowest score cut, the order kept
    assert seen.renders == [0, len(full), len(full) - 1] and tokenizer.calls == 3
    assert seen.sent == [list(seen.measured[-1].tokens.ids)]


@pytest.mark.parametrize("order", ["document", "best-first"])
def test_an_endpoint_is_sent_the_text_that_was_measured(order, monkeypatch):
    generator = FakeEchoGenerator(context_window=400)  # a generator without token ids, as an endpoint
    rag = make_rag(generator=generator, evidence_order=order)
    rag.memorize(corpus_documents(), with_memory=False)
    seen = Recorder(monkeypatch)
    answer = rag.ask(topic(1, 6), mode="rag")
    assert len(answer.evidence) > 1 and seen.renders == [0, len(answer.evidence)]
    assert seen.measured[-1].tokens.ids is None and generator.prompts == [seen.measured[-1].text]


def test_cuts_read_from_the_token_offsets_agree_with_cutting_one_at_a_time():
    query = topic(1, 6)
    rag, _ = local_rag(evidence_tokens=120, hits_per_query=8)
    evidence = rag.ask(query, mode="rag").evidence
    step = rag.context("rag").evidence
    cuts = weakest_first(evidence)
    whole = step.measure(query, "qa", "en", evidence).tokens.count + rag.config.answer_max_new_tokens
    for short in (1, 9, 20, 40, whole // 2):
        rag.generator.context_window = whole - short
        kept = list(range(len(evidence)))
        for position in cuts:  # the rule measured one cut at a time
            if step.room_left(query, [evidence[index] for index in kept], "qa", "en") >= 0:
                break
            kept.remove(position)
        fitted = step.fit(query, "qa", "en", evidence, cuts)
        assert fitted.evidence == [evidence[index] for index in kept], short


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
