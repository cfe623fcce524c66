"""The `memorag-full` mode: the memorag mode's prompts answered by the memory model's base over the whole
corpus (no memory): its replies are the base's over the memory path's token ids, whatever the memory
weights, and everything after the clues is the memorag mode's."""

from __future__ import annotations

import pytest

from memorag import prompts
from memorag.memory.ratios import ContextTooLongError
from memorag.modes.memorag import MemoRAGMode, clue_requests
from memorag.modes.memorag_full import full_context_replies
from memorag.results import memory_text
from tests.evaluation.test_clue_sources import tiny_tokenized_model, words
from tests.pipeline.conftest import make_rag


def corpus_rag(seed: int = 1, text: str | None = None):
    rag = make_rag(tiny_tokenized_model(seed))
    rag.memorize(text or words(*range(10, 40)), with_memory=False)
    return rag


def test_qa_is_the_base_answering_the_memory_prompt_over_the_whole_corpus():
    rag = corpus_rag()
    question = words(60, 61, 62)
    answer = rag.ask(question, mode="memorag-full", task="qa")
    assert rag.memory is None  # nothing was memorized for it
    prompt = prompts.fill(prompts.MEMORY_ANSWER, "en", question=question)
    expected = full_context_replies(rag.memory_model, memory_text(rag.documents), [prompt], max_new_tokens=8)[0]
    assert answer.answer == expected.strip() and answer.generator.endswith("(full context)")
    assert answer.evidence == [] and answer.clues == []
    other = corpus_rag(seed=2)  # other memory weights over the same base: the same answer
    assert other.ask(question, mode="memorag-full", task="qa").answer == answer.answer
    memory_answer = corpus_rag().ask(question, mode="memorag", task="qa")  # the memory's own answer reads its memory
    assert memory_answer.generator.endswith("(memory)") and memory_answer.answer != answer.answer


def test_memorag_task_retrieves_with_the_base_clues_by_the_memorag_rule():
    rag = corpus_rag()
    question = words(60, 61, 62)
    answer = rag.ask(question, mode="memorag-full")
    settings = MemoRAGMode.settings_of(rag.config)
    requests = clue_requests(settings, question, "memorag", "en")
    replies = full_context_replies(rag.memory_model, memory_text(rag.documents), [p for p, _ in requests.values()],
                                   settings.clue_max_new_tokens)
    assert answer.raw_clues == dict(zip(requests, replies, strict=True))
    handler = rag.mode("memorag-full")
    assert handler.write_clues(rag.context(handler), question, "memorag", "en") == (answer.clues, answer.raw_clues)
    assert answer.evidence  # the query and the clues retrieved, as in the memorag mode
    with pytest.raises(ValueError, match="decoding='fast'"):
        handler.write_clues(rag.context(handler), question, "memorag", "en", decoding="fast")


def test_a_corpus_beyond_the_bases_positions_is_refused_with_the_fix():
    rag = corpus_rag()
    reach = rag.memory_model.max_positions
    rag.memorize(words(*[10 + i % 80 for i in range(reach)]), with_memory=False)
    with pytest.raises(ContextTooLongError, match="positions .*use a shorter context, or the memory"):
        rag.ask(words(60, 61), mode="memorag-full", task="qa")
