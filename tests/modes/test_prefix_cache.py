"""The local generator's prefix cache: equal to uncached generation, the prefix run once."""

from __future__ import annotations

import pytest
import torch

from memorag.generation import Generator, LocalGenerator
from memorag.generation.prefix_cache import PrefixCache, common_prefix_length
from memorag.runtime.cache_argument import cache_kwargs
from tests.memory.conftest import tiny_base
from tests.memory.test_persistence import tiny_tokenizer
from tests.pipeline.conftest import FakeEchoGenerator, one_thread, words  # noqa: F401 - one_thread: autouse


def tiny_generator(**kwargs) -> LocalGenerator:
    """A 2-layer random llama over the fake letter-pair tokenizer (no chat template)."""
    return LocalGenerator(tiny_base("llama", seed=3), tiny_tokenizer(), name="tiny", **kwargs)


class ForwardLengths:
    """Records how many tokens each forward pass of a model reads."""

    def __init__(self, model):
        self.lengths: list[int] = []
        self.handle = model.register_forward_pre_hook(self.record, with_kwargs=True)

    def record(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.lengths.append(int(ids.shape[1]))


PREFIX = words(0, 40, step=3)  # 40 tokens shared by every prompt
RESTS = [" " + words(5, 6), " " + words(50, 9, step=5), " " + words(11, 4, step=7)]


def test_prefix_cached_generation_equals_uncached_token_for_token():
    generator = tiny_generator(repetition_penalty=1.1)
    expected = [generator.generate(PREFIX + rest, max_new_tokens=12) for rest in RESTS]
    assert all(len(reply.split()) >= 6 for reply in expected)  # the replies are long enough to compare
    cached = [generator.generate_with_prefix(PREFIX, rest, max_new_tokens=12) for rest in RESTS]
    assert cached == expected


def test_the_prefix_is_run_once_for_several_queries():
    generator = tiny_generator()
    prefix_tokens = len(generator.tokenizer(PREFIX)["input_ids"])  # 40 words, one token each
    forwards = ForwardLengths(generator.model)
    for rest in RESTS:
        generator.generate_with_prefix(PREFIX, rest, max_new_tokens=4)
    cache = generator.prefix_cache
    assert (cache.builds, cache.reuses, cache.num_tokens) == (1, 3, prefix_tokens)
    assert forwards.lengths.count(prefix_tokens) == 1  # the one pass over the prefix alone
    # each query's first pass reads only its own tokens; every later pass one new token
    assert forwards.lengths == [prefix_tokens, *[n for rest in RESTS for n in [len(rest.split())] + [1] * 3]]
    forwards.handle.remove()


def test_a_new_prefix_replaces_the_old_one():
    generator = tiny_generator()
    generator.generate_with_prefix(PREFIX, RESTS[0], max_new_tokens=2)
    other = words(7, 30, step=11)
    assert generator.generate_with_prefix(other, RESTS[1], max_new_tokens=6) == generator.generate(
        other + RESTS[1], max_new_tokens=6
    )
    assert generator.prefix_cache.builds == 2
    assert generator.prefix_cache.token_ids == tuple(generator.tokenizer(other)["input_ids"])


def test_a_system_prompt_is_part_of_the_prefix():
    generator = tiny_generator()
    system = words(80, 5)
    reply = generator.generate_with_prefix(PREFIX, RESTS[0], system=system, max_new_tokens=8)
    assert reply == generator.generate(PREFIX + RESTS[0], system=system, max_new_tokens=8)
    assert generator.prefix_cache.num_tokens == len(generator.tokenizer(f"{system}\n\n{PREFIX}")["input_ids"])


def test_the_window_still_applies_with_a_cached_prefix():
    generator = tiny_generator()
    generator.context_window = 50
    from memorag.generation import GeneratorError

    with pytest.raises(GeneratorError, match="exceeds the 50-token window"):
        generator.generate_with_prefix(PREFIX, RESTS[1], max_new_tokens=8)


def test_prefix_cache_copies_are_independent():
    model = tiny_base("llama", seed=3)
    cache = PrefixCache(model)
    first = cache.past_for([5, 6, 7, 8])
    second = cache.past_for([5, 6, 7, 8])
    assert first is not second and cache.builds == 1 and cache.reuses == 2
    with torch.no_grad():
        model(input_ids=torch.tensor([[9, 10]]), use_cache=True, **cache_kwargs(first))
    assert first.get_seq_length() == 6 and second.get_seq_length() == 4
    with pytest.raises(ValueError, match="empty prefix"):
        cache.past_for([])
    cache.clear()
    assert cache.num_tokens == 0


def test_common_prefix_length():
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix_length([], [1]) == 0
    assert common_prefix_length([1, 2], [1, 2]) == 2


def test_other_generators_send_the_whole_prompt():
    fake = FakeEchoGenerator()
    assert isinstance(fake, Generator)
    fake.generate_with_prefix("corpus ", "query", max_new_tokens=3)
    assert fake.prompts == ["corpus query"]


def test_prefix_cache_through_a_chat_template():
    generator = tiny_generator()
    # a fake chat template over the letter-pair words ("<s>" and "</s>" are the fake's special tokens)
    generator.tokenizer.chat_template = (
        "{% for m in messages %}<s> {{ m['role'] }} {{ m['content'] }} </s> {% endfor %}"
        "{% if add_generation_prompt %}<s> ab {% endif %}"
    )
    system = words(80, 3)
    expected = [generator.generate(PREFIX + rest, system=system, max_new_tokens=8) for rest in RESTS[:2]]
    cached = [generator.generate_with_prefix(PREFIX, rest, system=system, max_new_tokens=8) for rest in RESTS[:2]]
    assert cached == expected
    # <s> system (3 words) </s> <s> user, then the prefix's 40 words
    assert (generator.prefix_cache.builds, generator.prefix_cache.num_tokens) == (1, 1 + 1 + 3 + 1 + 1 + 1 + 40)


def test_the_memory_models_base_caches_a_prefix_too():
    """The default generator is the memory model's base, its attention wrapped for memory."""
    from tests.pipeline.conftest import tiny_model

    generator = LocalGenerator.from_memory_model(tiny_model(seed=2))
    expected = [generator.generate(PREFIX + rest, max_new_tokens=8) for rest in RESTS[:2]]
    assert [generator.generate_with_prefix(PREFIX, rest, max_new_tokens=8) for rest in RESTS[:2]] == expected
    assert (generator.prefix_cache.builds, generator.prefix_cache.reuses) == (1, 2)


@pytest.mark.slow
def test_the_embedded_smollm2_caches_a_corpus_prefix_through_its_chat_template():
    import memorag.pipeline  # noqa: F401 - before memorag.modes (import cycle)
    from memorag.generation.models import EMBEDDED_LM
    from memorag.modes import cic_prompt
    from tests.modes.test_cic import DOCUMENTS

    generator = LocalGenerator.from_pretrained(EMBEDDED_LM, dtype=torch.float32)
    prefix = cic_prompt.corpus_prefix(DOCUMENTS, "retrieval", "en", cic_prompt.build_examples(DOCUMENTS, 2, 0, "en"))
    for query in ("When was the observatory on the library roof built?", "Who bakes rye bread?"):
        suffix = cic_prompt.query_suffix(query, "en")
        assert generator.generate_with_prefix(prefix, suffix, max_new_tokens=16) == generator.generate(
            prefix + suffix, max_new_tokens=16
        )
    cache = generator.prefix_cache
    # all of the prefix but its last token or so (merged with the query's first characters) is reused
    assert (cache.builds, cache.reuses) == (1, 2) and cache.num_tokens >= len(generator._prefix_ids(prefix, None)) - 2
