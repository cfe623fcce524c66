"""The `memorag-full` mode: the memorag mode's prompts answered by the memory model's base over the whole
corpus (no memory): its replies are the base's over the memory path's token ids, whatever the memory
weights, and everything after the clues is the memorag mode's."""

from __future__ import annotations

import pytest
import torch

from memorag.generation.prefix_cache import PrefixCache
from memorag.memory import MemoryConfig, MemoryModel
from memorag.memory.schedule import ContextTooLongError
from memorag.modes.memorag import MemoRAGMode, clue_requests
from memorag.modes.memorag_full import full_context_replies, full_context_reply
from memorag.modes.results import memory_text
from memorag.prompting import prompts
from tests.memory.conftest import perturb_memory_parameters, tiny_base
from tests.memory.test_persistence import tiny_tokenizer, word
from tests.pipeline.conftest import make_rag


def words(*indices: int) -> str:
    return " ".join(word(i) for i in indices)


def tiny_tokenized_model(seed: int) -> MemoryModel:
    model = MemoryModel(tiny_base("llama"), MemoryConfig(window=16, ratios=[4]), tokenizer=tiny_tokenizer())
    perturb_memory_parameters(model, seed=seed)
    return model.eval()


def test_full_context_reply_is_the_plain_base_whatever_the_memory_weights():
    ids = torch.randint(2, 96, (40,), generator=torch.Generator().manual_seed(3)).tolist()  # longer than a window
    plain = tiny_base("llama")  # the same random base, never patched
    expected = plain.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, eos_token_id=1,
                              pad_token_id=1, attention_mask=torch.ones(1, 40, dtype=torch.long))[0, 40:].tolist()
    expected = expected[:expected.index(1)] if 1 in expected else expected
    tokenizer = tiny_tokenizer()
    for seed in (1, 2):  # other memory projections: the same reply, none of them is read
        reply = full_context_reply(tiny_tokenized_model(seed), ids, max_new_tokens=8)
        assert reply == tokenizer.decode(expected, skip_special_tokens=True)
    model = tiny_tokenized_model(1)
    prefix = PrefixCache(model.base_model)  # the first 30 ids read once: the same reply
    assert full_context_reply(model, ids, max_new_tokens=8, cache=prefix.past_for(ids[:30])) == reply
    assert prefix.past_for(ids[:30]).get_seq_length() == 30  # the reply extended a copy
    assert model.generate_ids(ids, max_new_tokens=8) != expected  # the memory model alone compresses the windows
    with pytest.raises(ContextTooLongError, match="positions"):
        full_context_reply(model, ids, max_new_tokens=model.max_positions)


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


def test_a_corpus_beyond_the_bases_positions_is_refused_before_the_corpus_is_read(monkeypatch):
    model = tiny_tokenized_model(1)
    read = []
    monkeypatch.setattr(PrefixCache, "past_for", lambda self, ids: read.append(len(ids)))
    text = words(*[10 + i % 80 for i in range(model.max_positions)])
    with pytest.raises(ContextTooLongError, match="positions"):
        full_context_replies(model, text, ["a question"], max_new_tokens=8)
    assert read == []  # no model work: the base never read the corpus
