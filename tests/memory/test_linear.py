"""The memory model's linear layers (memory/linear.py; docs/memory-model.md, "Linear layers in decoding"):
that the memory model's linear layers are `MemoryLinear`s, that inside `sequences_alone` each sequence
rounds as alone (and only in its own thread), that a batch decodes as one by one, and that the LM
head's rows computed together equal each alone."""

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
from memorag.memory.linear import MemoryLinear, is_plain_linear, sequences_alone, use_memory_linears
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


def test_the_memory_models_linear_layers_are_memory_linears_and_keep_their_weights():
    model = cases.tiny_model(cases.TINY_CASES[0])
    linears = [module for module in model.modules() if isinstance(module, nn.Linear)]
    assert linears and all(type(module) is MemoryLinear for module in linears)
    assert model.lm_head in linears
    assert all(type(projection) is MemoryLinear for attention in model.memory_attentions()
               for projection in attention.memory.values())
    assert type(copy.deepcopy(model.lm_head)) is MemoryLinear
    assert all(is_plain_linear(module) for module in linears)

    class Quantized(nn.Linear):  # a fake quantized layer: a subclass, left as it is
        pass

    holder = nn.Sequential(nn.Linear(4, 4), Quantized(4, 4))
    state = {key: value.clone() for key, value in holder.state_dict().items()}
    assert use_memory_linears(holder) == 1
    assert type(holder[0]) is MemoryLinear and type(holder[1]) is Quantized
    assert not is_plain_linear(holder[1])
    assert holder.state_dict().keys() == state.keys()
    assert all(torch.equal(holder.state_dict()[key], value) for key, value in state.items())


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

    class Quantized(nn.Linear):  # a fake quantized head: not a MemoryLinear, so each row goes through it alone
        pass

    model.lm_head.__class__ = Quantized
    with torch.no_grad(), patch.object(Quantized, "forward", autospec=True,
                                       side_effect=lambda module, rows: F.linear(rows, module.weight)) as head:
        quantized = model.logits_alone(rows)
    assert head.call_count == len(rows) and all(call.args[1].shape[0] == 1 for call in head.call_args_list)
    assert all(torch.equal(a, F.linear(model.final_norm(row), model.lm_head.weight))
               for a, row in zip(quantized, rows, strict=True))


def test_inside_sequences_alone_each_sequence_rounds_as_alone_and_only_in_its_thread():
    layer = nn.Linear(64, 32)
    use_memory_linears(layer)
    packed = torch.randn(1, 7, 64)
    with torch.no_grad():
        for bounds in ([0, 1, 3, 7], [0, 1, 7]):
            alone = torch.cat([layer(packed[:, start:end].clone()) for start, end in zip(bounds[:-1], bounds[1:])], 1)
            with sequences_alone({7: bounds}):
                assert torch.equal(layer(packed), alone)
                # five rows, not a split size: plain rows
                assert torch.equal(layer(packed[:, :5]), F.linear(packed[:, :5], layer.weight, layer.bias))
                with ThreadPoolExecutor(1) as pool:  # another thread: plain rows
                    assert torch.equal(pool.submit(layer, packed).result(), F.linear(packed, layer.weight, layer.bias))
                with pytest.raises(RuntimeError, match="inside another"), sequences_alone({7: bounds}):
                    pass
        assert torch.equal(layer(packed), F.linear(packed, layer.weight, layer.bias))
        # bfloat16 alike: each sequence by its own `F.linear`
        layer16, packed16 = copy.deepcopy(layer).bfloat16(), packed.bfloat16()
        alone16 = torch.cat([F.linear(packed16[:, start:end].clone(), layer16.weight, layer16.bias)
                             for start, end in ((0, 1), (1, 3), (3, 7))], 1)
        with sequences_alone({7: [0, 1, 3, 7]}):
            assert torch.equal(layer16(packed16), alone16)


def test_low_rank_factors_are_memory_linears_too():
    pytest.importorskip("peft")
    from memorag.memory.lowrank import apply_lowrank, merge_lowrank

    model = MemoryModel(tiny_base("llama"), MemoryConfig(window=16, ratios=[4]))  # untrained copies
    apply_lowrank(model, rank=2)
    assert all(type(module) is not nn.Linear for module in model.modules())
    merge_lowrank(model)
    assert all(type(projection) is MemoryLinear for attention in model.memory_attentions()
               for projection in attention.memory.values())


def test_sequences_of_one_size_share_one_batched_product_that_rounds_as_alone():
    from memorag.memory import linear

    layer = nn.Linear(64, 48)
    use_memory_linears(layer)
    packed = torch.randn(1, 9, 64)
    bounds = [0, 1, 3, 4, 6, 7, 9]  # sizes 1, 2, 1, 2, 1, 2: two groups of three
    alone = torch.cat([F.linear(packed[:, start:end].clone(), layer.weight, layer.bias)
                       for start, end in zip(bounds[:-1], bounds[1:])], 1)
    calls = []
    original = linear._products_together

    def counted(rows, weight, bias):
        calls.append(tuple(rows.shape))
        return original(rows, weight, bias)

    with torch.no_grad(), patch.object(linear, "_products_together", counted), \
            patch.dict(linear._ROUNDS_AS_ALONE, clear=True):
        with sequences_alone({9: bounds}):
            together = layer(packed)
        assert torch.equal(together, alone)
        verified = {key[3:5]: value for key, value in linear._ROUNDS_AS_ALONE.items()}
        assert set(verified) == {(1, 3), (2, 3)}
        # each shape checked once on random rows; where it rounds as alone, the real rows then went through it
        batched = sorted((3, size, 64) for (size, _), same in verified.items() if same)
        assert sorted(calls) == sorted([(3, 1, 64), (3, 2, 64)] + batched)
        calls.clear()
        with sequences_alone({9: bounds}):
            assert torch.equal(layer(packed), alone)
        assert sorted(calls) == batched  # a second call reads the answers: no check again


def test_a_shape_whose_batched_product_rounds_otherwise_keeps_one_product_per_sequence():
    from memorag.memory import linear

    layer = nn.Linear(64, 40)
    use_memory_linears(layer)
    packed = torch.randn(1, 3, 64)
    alone = torch.cat([F.linear(packed[:, row : row + 1].clone(), layer.weight, layer.bias) for row in range(3)], 1)

    def off_by_rounding(rows, weight, bias):  # a fake backend whose batched product rounds differently
        return torch.baddbmm(bias.expand(rows.shape[0], rows.shape[1], -1), rows, weight.T.expand(3, -1, -1)) + 1e-3

    with torch.no_grad(), patch.object(linear, "_products_together", side_effect=off_by_rounding) as together, \
            patch.dict(linear._ROUNDS_AS_ALONE, clear=True):
        with sequences_alone({3: [0, 1, 2, 3]}):
            assert torch.equal(layer(packed), alone)
        with sequences_alone({3: [0, 1, 2, 3]}):
            assert torch.equal(layer(packed), alone)
        assert list(linear._ROUNDS_AS_ALONE.values()) == [False]
    assert together.call_count == 1  # the check, once; then per sequence
