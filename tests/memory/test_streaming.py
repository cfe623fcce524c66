"""Streaming, generation from a memory, and batching give the same numbers as one pass."""

import torch

from memorag.memory.cache import MemoryCache, Rotate

from .conftest import random_ids, tiny_memory_model


class ReRotatingCache(MemoryCache):
    """The reference a rotated-key cache is checked against, the costly way (O(memory) per step): keys kept
    unrotated, moved unrotated when a window is compacted, and every key rotated from position 0 at every
    read. A row's position is its row in the cache, so the layer's rotated keys are turned back by it."""

    def __init__(self, num_layers: int, rotate: Rotate) -> None:
        super().__init__(num_layers, lambda keys, offsets: keys)  # compaction moves keys as they are
        self.rotate_from_origin = rotate

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               cache_kwargs: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        start = self.length
        offsets = torch.arange(start, start + key_states.shape[2], device=key_states.device)
        stored_keys, stored_values = super().update(self.rotate_from_origin(key_states, -offsets), value_states,
                                                    layer_idx)
        positions = torch.arange(stored_keys.shape[2], device=key_states.device)
        return self.rotate_from_origin(stored_keys, positions), stored_values


def test_one_memorize_call_equals_several(family):
    model = tiny_memory_model(family, ratios=[2, 4, 8], ratio_mix="step-random")
    ids = random_ids(90)[0].tolist()
    whole = model.memorize(ids)
    memory = model.memorize(ids[:5])
    for start, end in ((5, 16), (16, 17), (17, 61), (61, 90)):
        memory = model.memorize(ids[start:end], memory=memory)
    assert memory.state == whole.state
    for a, b in zip(memory.keys + memory.values, whole.keys + whole.values, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_feeding_in_odd_chunks_equals_one_forward():
    model = tiny_memory_model("qwen2")
    ids = random_ids(75)
    with torch.no_grad():
        expected = model(ids, return_logits=True).logits
        cache = model.new_cache()
        hidden = []
        for start, end in ((0, 3), (3, 19), (19, 20), (20, 75)):
            hidden += model.read_tokens(ids[:, start:end], cache, keep_hidden=True)
        got = model.lm_head(model.final_norm(torch.cat(hidden, 1))).float()
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_greedy_generation_equals_teacher_forcing(family):
    model = tiny_memory_model(family)
    ids = random_ids(60)[0].tolist()
    context, prompt = ids[:50], ids[50:]
    memory = model.memorize(context)
    generated = model.generate_ids(prompt, memory=memory, max_new_tokens=25)
    assert len(generated) == 25 or generated  # stops only on the eos id
    full = torch.tensor([context + prompt + generated])
    with torch.no_grad():
        logits = model(full, return_logits=True).logits[0]
    start = len(context) + len(prompt) - 1
    teacher_forced = logits[start : start + len(generated)].argmax(-1).tolist()
    assert teacher_forced == generated


def test_one_memory_serves_many_prompts_unchanged():
    model = tiny_memory_model("llama")
    memory = model.memorize(random_ids(45)[0].tolist())
    before = [k.clone() for k in memory.keys]
    first = model.generate_ids([5, 6, 7], memory=memory, max_new_tokens=30)
    model.generate_ids([9, 9, 9, 9], memory=memory, max_new_tokens=30)
    assert model.generate_ids([5, 6, 7], memory=memory, max_new_tokens=30) == first
    for a, b in zip(before, memory.keys, strict=True):
        assert torch.equal(a, b)


def test_a_batch_of_two_equals_two_single_runs():
    model = tiny_memory_model("mistral")
    ids = random_ids(50, batch=2)
    labels = ids.clone()
    with torch.no_grad():
        batched = model(ids, labels=labels, return_logits=True)
        singles = [model(ids[i : i + 1], labels=labels[i : i + 1], return_logits=True) for i in range(2)]
    torch.testing.assert_close(batched.logits, torch.cat([s.logits for s in singles]), atol=1e-5, rtol=1e-5)
    mean_single = sum(s.loss for s in singles) / 2
    torch.testing.assert_close(batched.loss, mean_single, atol=1e-5, rtol=1e-5)


def test_rotated_key_cache_equals_rerotating_every_step():
    """Caching rotated keys (re-rotating only compacted entries) equals the reference way."""
    model = tiny_memory_model("qwen3", ratios=[2, 4], ratio_mix="step-random")
    ids = random_ids(100)
    results = []
    with torch.no_grad():
        for rotated in (True, False):
            cache = model.new_cache() if rotated else ReRotatingCache(len(model.layers), model.rotate)
            hidden = []
            for start in range(0, 100, 7):  # many steps, many compactions
                hidden += model.read_tokens(ids[:, start : start + 7], cache, keep_hidden=True)
            results.append(torch.cat(hidden, 1))
    torch.testing.assert_close(results[0], results[1], atol=2e-5, rtol=1e-5)
