"""The memory model's products over packed rows (`project` in memory/attention.py; docs/memory-model.md,
"Linear layers in decoding"): that `project` given a packed batch's `SequenceRows` rounds each sequence as
alone (its bounds an argument: two threads at once each get their own), that a batch decodes as one by one,
and that the LM head's rows computed together equal each alone.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from unittest.mock import patch

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from memorag.memory import MemoryConfig, MemoryModel
from memorag.memory.attention import (
    BATCHED,
    EACH,
    TOGETHER,
    ExactProducts,
    SequenceRows,
    is_plain_linear,
    project,
)
from tests.memory import decoding_cases as cases

from .conftest import random_ids, tiny_base, tiny_memory_model


@contextmanager
def threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_the_memory_models_linear_layers_stay_plain_and_each_model_keeps_its_own_table():
    model = cases.tiny_model(cases.TINY_CASES[0])
    linears = [module for module in model.modules() if isinstance(module, nn.Linear)]
    assert linears and all(type(module) is nn.Linear for module in linears)  # no class is swapped
    assert all(is_plain_linear(module) for module in linears)
    other = cases.tiny_model(cases.TINY_CASES[0])
    assert isinstance(model.exact_products, ExactProducts) and model.exact_products is not other.exact_products

    class Quantized(nn.Linear):  # a fake quantized layer: a subclass, called as a module
        pass

    assert not is_plain_linear(Quantized(4, 4))


def test_a_batch_decodes_as_one_by_one():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(16 * 5 + 3)[0].tolist(), show_progress=False)
    prompts = [random_ids(length, seed=length)[0].tolist() for length in (5, 9, 2)]
    tokens = dict(max_new_tokens=24, min_new_tokens=24)
    with threads(2):
        batch = model.generate_ids_batch(prompts, memory=memory, **tokens)
        alone = [model.generate_ids(prompt, memory=memory, **tokens) for prompt in prompts]
    assert batch == alone
    hidden = torch.randn(1, 1, model.base_model.config.hidden_size)
    with torch.no_grad():
        torch.testing.assert_close(model.logits(hidden), F.linear(model.final_norm(hidden), model.lm_head.weight),
                                   rtol=1e-5, atol=1e-5)


def test_the_lm_heads_rows_computed_together_equal_each_alone():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    size = model.base_model.config.hidden_size
    rows = [torch.randn(1, size, generator=torch.Generator().manual_seed(seed)) for seed in range(6)]
    with torch.no_grad():
        together = model.logits_alone(rows)
        alone = [model.logits(row) for row in rows]
    assert all(torch.equal(a, b) for a, b in zip(together, alone, strict=True))

    class Quantized(nn.Linear):  # a fake quantized head: not a plain nn.Linear, so each row goes through it alone
        pass

    model.lm_head.__class__ = Quantized
    with torch.no_grad(), patch.object(Quantized, "forward", autospec=True,
                                       side_effect=lambda module, rows: F.linear(rows, module.weight)) as head:
        quantized = model.logits_alone(rows)
    assert head.call_count == len(rows) and all(call.args[1].shape[0] == 1 for call in head.call_args_list)
    assert all(torch.equal(a, F.linear(model.final_norm(row), model.lm_head.weight))
               for a, row in zip(quantized, rows, strict=True))


def test_given_sequence_rows_each_sequence_rounds_as_alone_and_threads_share_nothing():
    layer = nn.Linear(64, 32)
    packed = torch.randn(1, 7, 64)
    verdicts = ExactProducts()
    with torch.no_grad():
        expected = {}
        for bounds in ([0, 1, 3, 7], [0, 1, 7], [0, 2, 7]):
            alone = torch.cat([layer(packed[:, start:end].clone()) for start, end in zip(bounds[:-1], bounds[1:])], 1)
            expected[tuple(bounds)] = alone
            sequences = SequenceRows({7: bounds}, verdicts)
            assert torch.equal(project(layer, packed, sequences), alone)
            # five rows, not a split size: plain rows
            assert torch.equal(project(layer, packed[:, :5], sequences),
                               F.linear(packed[:, :5], layer.weight, layer.bias))
        assert torch.equal(project(layer, packed), F.linear(packed, layer.weight, layer.bias))
        # two threads at once, each with its own bounds: each gets its own sequences' rounding
        with ThreadPoolExecutor(2) as pool:
            futures = {bounds: pool.submit(project, layer, packed, SequenceRows({7: list(bounds)}, verdicts))
                       for bounds in expected for _ in range(3)}
            assert all(torch.equal(future.result(), expected[bounds]) for bounds, future in futures.items())
        # bfloat16 alike: each sequence by its own `F.linear`
        layer16, packed16 = copy.deepcopy(layer).bfloat16(), packed.bfloat16()
        alone16 = torch.cat([F.linear(packed16[:, start:end].clone(), layer16.weight, layer16.bias)
                             for start, end in ((0, 1), (1, 3), (3, 7))], 1)
        assert torch.equal(project(layer16, packed16, SequenceRows({7: [0, 1, 3, 7]}, verdicts)), alone16)


def test_a_layer_that_is_not_plain_is_called_on_each_sequences_rows_alone():
    pytest.importorskip("peft")
    from memorag.memory.lowrank import apply_lowrank, merge_lowrank

    model = MemoryModel(tiny_base("llama"), MemoryConfig(window=16, ratios=[4]))  # untrained copies
    apply_lowrank(model, rank=2)
    lowrank = model.memory_attentions()[0].memory["q"]
    assert not is_plain_linear(lowrank)
    with torch.no_grad():
        torch.nn.init.normal_(lowrank.lora_B["default"].weight)
        packed = torch.randn(1, 5, lowrank.in_features)
        alone = torch.cat([lowrank(packed[:, start:end].clone()) for start, end in ((0, 2), (2, 3), (3, 5))], 1)
        with patch.object(type(lowrank), "forward", autospec=True, side_effect=type(lowrank).forward) as forward:
            together = project(lowrank, packed, SequenceRows({5: [0, 2, 3, 5]}, model.exact_products))
        assert [call.args[1].shape[1] for call in forward.call_args_list] == [2, 1, 2]
        assert torch.equal(together, alone)
    merge_lowrank(model)
    assert all(type(projection) is nn.Linear for attention in model.memory_attentions()
               for projection in attention.memory.values())


def fixed_timer(seconds: dict[str, float], timed: list[str]):
    """A fake timer: each way takes the seconds given, and the ways asked are recorded."""
    def timer(way, call):
        timed.append(way)
        call()
        return seconds[way]
    return timer


@pytest.mark.parametrize("fastest", [TOGETHER, BATCHED, EACH])
def test_sequences_of_one_size_take_the_fastest_way_that_rounds_as_alone(fastest):
    from memorag.memory import attention as linear

    layer = nn.Linear(64, 48)
    packed = torch.randn(1, 9, 64)
    bounds = [0, 1, 3, 4, 6, 7, 9]  # sizes 1, 2, 1, 2, 1, 2: two groups of three
    alone = torch.cat([F.linear(packed[:, start:end].clone(), layer.weight, layer.bias)
                       for start, end in zip(bounds[:-1], bounds[1:])], 1)
    timed, ways = [], []
    original = linear.multiply

    def exact_everywhere(way, rows, layer):  # every way rounds as alone here (as `each` does), and is recorded
        ways.append(way)
        return original(EACH, rows, layer)

    products = ExactProducts(fixed_timer({fastest: 1.0, **{way: 2.0 for way in (TOGETHER, BATCHED, EACH)
                                                            if way != fastest}}, timed))
    sequences = SequenceRows({9: bounds}, products)
    with torch.no_grad(), patch.object(linear, "multiply", exact_everywhere):
        assert torch.equal(project(layer, packed, sequences), alone)
        assert {key[3:5]: way for key, way in products.known.items()} == {(1, 3): fastest, (2, 3): fastest}
        assert sorted(timed) == sorted([TOGETHER, BATCHED, EACH] * 2)  # each shape checked and timed once
        timed.clear()
        ways.clear()
        assert torch.equal(project(layer, packed, sequences), alone)
        assert timed == [] and (ways == [fastest] * 2 or fastest == EACH)  # then read from the table


def test_a_way_that_rounds_otherwise_is_never_taken_however_fast():
    from memorag.memory import attention as linear

    layer = nn.Linear(64, 40)
    packed = torch.randn(1, 3, 64)
    alone = torch.cat([F.linear(packed[:, row : row + 1].clone(), layer.weight, layer.bias) for row in range(3)], 1)
    original = linear.multiply

    def off_by_rounding(way, rows, layer):  # a fake backend whose shared products round differently
        out = original(way, rows, layer)
        return out + 1e-3 if way != EACH else out

    timed = []
    products = ExactProducts(fixed_timer({TOGETHER: 0.1, BATCHED: 0.2, EACH: 5.0}, timed))
    with torch.no_grad(), patch.object(linear, "multiply", off_by_rounding):
        for _ in range(2):
            assert torch.equal(project(layer, packed, SequenceRows.one_each(3, products)), alone)
    assert list(products.known.values()) == [EACH] and timed == [EACH]


def test_the_real_ways_agree_with_each_where_they_are_taken():
    """On this machine's kernels: whatever way is kept for a shape gives the bits of one product per sequence."""
    for dtype in (torch.float32, torch.bfloat16):
        layer = nn.Linear(96, 200).to(dtype)
        products = ExactProducts()
        packed = torch.randn(1, 8, 96).to(dtype)
        bounds = [0, 2, 4, 6, 8]
        with torch.no_grad():
            alone = torch.cat([F.linear(packed[:, start:end].clone(), layer.weight, layer.bias)
                               for start, end in zip(bounds[:-1], bounds[1:])], 1)
            assert torch.equal(project(layer, packed, SequenceRows({8: bounds}, products)), alone)
        assert set(products.known.values()) <= {TOGETHER, BATCHED, EACH} and len(products.known) == 1
