"""An eager batch's attention over stacked caches (memory/buffer_step.py, `StackedStep`;
memory/shared_buffers.py, `stacked_caches`): prompts whose caches have one capacity keep them as
rows of one buffer per layer, and a round in which each brings as many rows attends in one call.
Each sequence must still write its own rows and get, bit for bit, what it gets attending alone."""

from __future__ import annotations

import pytest
import torch

from memorag.memory import buffer_step
from memorag.memory.attention import PackedStep
from memorag.memory.buffer_step import BufferStep, StackedStep, stacked
from memorag.memory.cache import MemoryCache
from memorag.memory.shared_buffers import stacked_caches

from .conftest import random_ids, tiny_memory_model

LAYERS, HEADS, KV_HEADS, CAPACITY, DIM = 3, 6, 2, 256, 16


def _buffers(count: int, seed: int = 0) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    keys = [torch.randn(count, KV_HEADS, CAPACITY, DIM, generator=generator) for _ in range(LAYERS)]
    values = [torch.randn(count, KV_HEADS, CAPACITY, DIM, generator=generator) for _ in range(LAYERS)]
    return keys, values


def _steps(keys, values, lengths: list[int], rows: int) -> list[BufferStep]:
    """One decoding step per sequence: `rows` new rows after its `lengths[i]` valid ones, seeing those and
    the new rows up to its own (a causal bias over the whole buffer)."""
    steps = []
    for index, length in enumerate(lengths):
        bias = torch.full((rows, CAPACITY), float("-inf"))
        for row in range(rows):
            bias[row, : length + row + 1] = 0.0
        steps.append(BufferStep([k[index : index + 1] for k in keys], [v[index : index + 1] for v in values],
                                torch.arange(length, length + rows), bias, None, torch.float32, True))
    return steps


def _packed(steps: list[BufferStep], rows: int) -> PackedStep:
    return PackedStep(steps, [rows * index for index in range(len(steps) + 1)], None, torch.float32)


def _round(count: int, rows: int, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(1, HEADS, count * rows, DIM, generator=generator)
    key = torch.randn(1, KV_HEADS, count * rows, DIM, generator=generator)
    value = torch.randn(1, KV_HEADS, count * rows, DIM, generator=generator)
    return query, key, value


def test_stacked_views_consecutive_rows_of_one_buffer_and_nothing_else():
    buffer = torch.randn(4, KV_HEADS, CAPACITY, DIM)
    rows = [buffer[index : index + 1] for index in range(4)]
    together = stacked(rows[1:3])
    assert together is not None and together.shape == (2, KV_HEADS, CAPACITY, DIM)
    assert together.data_ptr() == buffer[1].data_ptr() and torch.equal(together, buffer[1:3])
    assert stacked([rows[0], rows[2]]) is None  # a gap
    assert stacked([rows[1], rows[0]]) is None  # out of order
    separate = [torch.randn(1, KV_HEADS, CAPACITY, DIM) for _ in range(2)]
    assert stacked(separate) is None  # separate allocations, even if adjacent in memory
    assert stacked([rows[0], buffer[1:2, :, :128]]) is None  # another shape


@pytest.mark.parametrize("rows", [1, 2])
def test_a_stacked_round_writes_and_attends_as_each_sequence_alone_bit_for_bit(rows):
    lengths = [100, 37, 180]
    keys, values = _buffers(3)
    alone_keys, alone_values = [k.clone() for k in keys], [v.clone() for v in values]
    query, key, value = _round(3, rows)
    packed = _packed(_steps(keys, values, lengths, rows), rows)
    together = StackedStep.of(packed)
    assert together is not None and together.write_rows.shape == (3, rows) and together.bias.shape == (3, rows, CAPACITY)
    alone = _packed(_steps(alone_keys, alone_values, lengths, rows), rows)  # per sequence, on copies of the buffers
    for layer in range(LAYERS):
        got = together.attend(layer, query, key, value, 0.25)
        expected = alone.attend(layer, query, key, value, 0.25)
        assert got.shape == expected.shape == (1, 3 * rows, HEADS, DIM)
        assert torch.equal(got, expected)
        assert torch.equal(keys[layer], alone_keys[layer]) and torch.equal(values[layer], alone_values[layer])


def test_rounds_that_do_not_stack_stay_per_sequence():
    keys, values = _buffers(3)
    steps = _steps(keys, values, [10, 20, 30], 1)
    assert StackedStep.of(_packed(steps[:1], 1)) is None  # one sequence
    uneven = _steps(keys, values, [10, 20], 1) + _steps(keys, values, [30], 2)[:1]
    assert StackedStep.of(PackedStep(uneven, [0, 1, 2, 4], None, torch.float32)) is None  # rows differ
    assert StackedStep.of(_packed([steps[0], steps[2]], 1)) is None  # not consecutive rows
    separate = _buffers(1, seed=5)
    apart = steps[:2] + _steps(*separate, [30], 1)
    assert StackedStep.of(_packed(apart, 1)) is None  # a cache of its own


def test_a_layer_whose_buffers_left_the_stack_attends_per_sequence():
    """A cache that grew gets buffers of its own; the layers whose buffers no longer stack fall back."""
    lengths = [50, 60]
    keys, values = _buffers(2)
    query, key, value = _round(2, 1)
    steps = _steps(keys, values, lengths, 1)
    together = StackedStep.of(_packed(steps, 1))
    steps[1].keys[2] = steps[1].keys[2].clone()  # layer 2 of sequence 1 left the shared buffer
    expected_keys = [k.clone() for k in keys]
    expected_values = [v.clone() for v in values]
    alone_steps = _steps(expected_keys, expected_values, lengths, 1)
    alone_steps[1].keys[2] = steps[1].keys[2].clone()
    alone = _packed(alone_steps, 1)
    for layer in range(LAYERS):
        assert torch.equal(together.attend(layer, query, key, value, 0.25), alone.attend(layer, query, key, value, 0.25))
    assert torch.equal(steps[1].keys[2], alone_steps[1].keys[2])


def test_stacked_caches_hold_what_each_prompt_has_alone_and_only_when_capacities_agree():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(50)[0].tolist())
    caches = stacked_caches(model, memory, [20, 45])
    assert caches is not None and len(caches) == 2
    for cache, reserve in zip(caches, [20, 45], strict=True):
        alone = MemoryCache.continuing(memory.keys, memory.values, memory.state, model.rotate, model.device,
                                       reserve=reserve)
        assert cache.reserve == reserve and cache.length == alone.length
        for mine, theirs in zip(cache.keys + cache.values, alone.keys + alone.values, strict=True):
            assert mine.shape == theirs.shape and torch.equal(mine, theirs)
    assert stacked([cache.keys[0] for cache in caches]) is not None
    rows = memory.keys[0].shape[2]
    assert stacked_caches(model, memory, [1, 200 - rows]) is None  # 128 and 256 rows alone: capacities differ
    assert stacked_caches(model, memory, [20]) is None
    assert stacked_caches(model, None, [20, 45]) is None


def test_a_batch_over_stacked_caches_equals_one_by_one_decoding(monkeypatch):
    """Three prompts whose caches stack: most rounds attend in one call, and every reply is the one it has
    alone (memory tokens and window completions at each prompt's own token included)."""
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(50)[0].tolist())
    prompts = [random_ids(5, seed=1)[0].tolist(), random_ids(9, seed=2)[0].tolist(), random_ids(14, seed=3)[0].tolist()]
    made = []
    original = StackedStep.of.__func__

    def counting(cls, packed):
        made.append(original(cls, packed))
        return made[-1]

    with torch.no_grad():
        alone = [model.generate_ids(prompt, memory, max_new_tokens=30, min_new_tokens=30) for prompt in prompts]
        monkeypatch.setattr(buffer_step.StackedStep, "of", classmethod(counting))
        batch = model.generate_ids_batch(prompts, memory, max_new_tokens=30, min_new_tokens=30)
    assert batch == alone
    # at ratio 4 a round in which some prompt, not all, brings a memory token attends per sequence: a third
    # or more of the rounds stack here (14 of 30 when written)
    assert sum(step is not None for step in made) >= len(made) // 3
