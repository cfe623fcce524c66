"""Our decoder layer over key/value slots gives transformers' own logits for a model without memory, in every
supported family; slots grow, move and leave without disturbing the other sequences."""

from __future__ import annotations

import pytest
import torch

from memorag.memory.families import UnsupportedModelError
from memorag.memory.plain_decoder import PlainDecoder, decodes_plainly
from tests.memory.conftest import random_ids, tiny_base, tiny_memory_model


def transformers_logits(model, ids: list[int]) -> torch.Tensor:
    """transformers' logits of every position of `ids` [T, V] (one forward, no cache)."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3"])
def test_prefill_and_decode_steps_give_transformers_logits(family):
    model = tiny_base(family, seed=7)
    decoder = PlainDecoder(model)
    prompts = [random_ids(11, seed=1)[0].tolist(), random_ids(4, seed=2)[0].tolist()]
    follow = [random_ids(5, seed=3)[0].tolist(), random_ids(5, seed=4)[0].tolist()]
    slots = decoder.new_slots()
    slots.ensure(2, 16)
    with torch.inference_mode():
        prefilled = [decoder.prefill(slots, slot, prompt) for slot, prompt in enumerate(prompts)]
        stepped = []
        lengths = [len(prompt) for prompt in prompts]
        for step in range(5):
            stepped.append(decoder.decode_step(slots, [follow[0][step], follow[1][step]], lengths))
            lengths = [length + 1 for length in lengths]
    for slot, prompt in enumerate(prompts):
        expected = transformers_logits(model, prompt + follow[slot])
        torch.testing.assert_close(prefilled[slot], expected[len(prompt) - 1], atol=1e-5, rtol=1e-5)
        for step in range(5):
            torch.testing.assert_close(stepped[step][slot], expected[len(prompt) + step], atol=1e-5, rtol=1e-5)


def test_a_memory_models_own_base_is_decoded_without_its_memory():
    """The memory model wraps each attention; its base decoded plainly is the base as it came."""
    memory_model = tiny_memory_model("llama", seed=3)
    plain = tiny_base("llama", seed=3)
    ids = random_ids(9, seed=5)[0].tolist()
    decoder = PlainDecoder(memory_model.base_model)
    slots = decoder.new_slots()
    slots.ensure(1, 16)
    with torch.inference_mode():
        logits = decoder.prefill(slots, 0, ids)
    torch.testing.assert_close(logits, transformers_logits(plain, ids)[-1], atol=1e-5, rtol=1e-5)


def test_slots_grow_and_move_keeping_what_they_hold():
    decoder = PlainDecoder(tiny_base("llama", seed=1))
    slots = decoder.new_slots()
    slots.ensure(1, 10)
    first = slots.capacity
    with torch.inference_mode():
        decoder.prefill(slots, 0, list(range(2, 12)))
        held = slots.keys[1][0, :, :10].clone()
        slots.ensure(3, first + 1)  # more slots and more columns: a copy, the columns held kept
        assert slots.slots == 3 and slots.capacity > first
        torch.testing.assert_close(slots.keys[1][0, :, :10], held, atol=0, rtol=0)
        slots.move(0, 2, 10)
        torch.testing.assert_close(slots.keys[1][2, :, :10], held, atol=0, rtol=0)


def test_a_sliding_window_or_another_family_keeps_transformers_decoding():
    from transformers import GPT2Config, GPT2LMHeadModel, MistralConfig, MistralForCausalLM

    from tests.memory.conftest import _COMMON

    assert decodes_plainly(tiny_base("mistral"))
    assert not decodes_plainly(MistralForCausalLM(MistralConfig(**{**_COMMON, "sliding_window": 8})))
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=96, n_positions=64, n_embd=32, n_layer=1, n_head=2))
    assert not decodes_plainly(gpt2)
    with pytest.raises(UnsupportedModelError, match="generate"):
        PlainDecoder(gpt2)
