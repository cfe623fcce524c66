"""Greedy decoding in a batch that prompts join and leave between steps equals each prompt decoded alone."""

from __future__ import annotations

import pytest
import torch

from memorag.generation.base import GeneratorError
from memorag.generation.batched import LanguageModelRows
from memorag.memory.decoding import MemoryRows
from memorag.runtime.decode_loop import DecodeBatch, Sampling, Stops
from tests.memory.conftest import random_ids, tiny_base, tiny_memory_model

STOP = 1  # the tiny models' eos token


def alone(model, prompt: list[int], max_new_tokens: int, repetition_penalty: float = 1.0) -> list[int]:
    """transformers' own greedy decoding of one prompt, the stop token dropped (as the generator drops it)."""
    ids = torch.tensor([prompt])
    output = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                            do_sample=False, eos_token_id=[STOP], pad_token_id=STOP,
                            repetition_penalty=repetition_penalty)
    return [int(token) for token in output[0, len(prompt):] if int(token) != STOP]


def prompts(count: int, seed: int) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 40, (count,), generator=generator).tolist()
    return [torch.randint(2, 64, (length,), generator=generator).tolist() for length in lengths]


@pytest.mark.parametrize(("family", "penalty"), [("llama", 1.0), ("qwen2", 1.0), ("llama", 1.3)])
def test_prompts_joining_at_different_steps_get_the_tokens_they_get_alone(family, penalty):
    model = tiny_base(family, seed=5)
    batch_prompts = prompts(5, seed=1)
    budgets = [12, 3, 9, 16, 6]
    joins = {0: [0, 1], 2: [2], 4: [3], 7: [4]}  # step -> prompts that join before it
    expected = [alone(model, prompt, budget, penalty) for prompt, budget in zip(batch_prompts, budgets)]
    assert len({len(prompt) for prompt in batch_prompts}) > 1 and any(len(ids) >= 8 for ids in expected)
    if penalty != 1.0:  # the penalty changes what greedy decoding picks
        assert expected != [alone(model, prompt, budget) for prompt, budget in zip(batch_prompts, budgets)]
    batch, got = DecodeBatch(LanguageModelRows(model), Stops.of([STOP]), Sampling(repetition_penalty=penalty)), {}
    for step in range(40):
        for index in joins.get(step, []):
            batch.join(index, batch_prompts[index], budgets[index])
        got.update({row.key: row.new_ids for row in batch.step()})
    assert got == dict(enumerate(expected))
    assert max(batch.steps_by_size) >= 3 and len(batch) == 0


def test_a_prompt_that_leaves_leaves_the_others_exact():
    model = tiny_base("llama", seed=5)
    first, dropped, last = prompts(3, seed=2)
    batch = DecodeBatch(LanguageModelRows(model), Stops.of([STOP]))
    batch.join("first", first, 10)
    batch.join("dropped", dropped, 10)
    batch.step()
    batch.step()
    batch.leave("dropped")  # its client went away
    batch.join("last", last, 10)
    got = {}
    while len(batch):
        got.update({row.key: row.new_ids for row in batch.step()})
    assert got == {"first": alone(model, first, 10), "last": alone(model, last, 10)}


def test_bad_joins_are_refused_with_the_reason():
    batch = DecodeBatch(LanguageModelRows(tiny_base("llama", seed=5)), Stops.of([STOP]))
    batch.join("a", [3, 4, 5], 4)
    with pytest.raises(ValueError, match="already decoding"):  # the loop's own bookkeeping (memorag/runtime/decode_loop.py)
        batch.join("a", [3, 4], 4)
    with pytest.raises(GeneratorError, match="at least one token"):  # the generator's rows
        batch.join("b", [], 4)
    with pytest.raises(ValueError, match="no prompt with the key"):
        batch.leave("c")


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_memory_prompts_over_different_memories_get_the_tokens_they_get_alone(family):
    """Clue prompts of different corpora (two memories and none) share one batch, joining at different steps."""
    model = tiny_memory_model(family, seed=3)
    memories = [model.memorize(random_ids(40, seed=1)[0].tolist()), model.memorize(random_ids(70, seed=2)[0].tolist()), None]
    batch_prompts = prompts(5, seed=4)
    over = [memories[index % 3] for index in range(5)]
    budgets = [10, 4, 12, 7, 9]
    expected = [model.generate_ids(prompt, memory=memory, max_new_tokens=budget)
                for prompt, memory, budget in zip(batch_prompts, over, budgets)]
    assert any(len(ids) >= 7 for ids in expected)
    joins = {0: [0, 1], 1: [2], 3: [3, 4]}
    batch, got = DecodeBatch(MemoryRows(model, "shared"), Stops.of(model.stop_ids())), {}
    for step in range(30):
        for index in joins.get(step, []):
            batch.join(index, (model.prompt_ids(batch_prompts[index], over[index]), over[index]), budgets[index])
        got.update({row.key: row.new_ids for row in batch.step()})
    assert got == dict(enumerate(expected))
    assert max(batch.steps_by_size) >= 4 and len(batch) == 0
