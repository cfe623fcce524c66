"""The memory model's linear layers (memory/linear.py; docs/memory-model.md, "Linear layers in decoding"):
where the CPU's split product applies, that it computes `F.linear`'s result, that the memory model's
linear layers are `MemoryLinear`s, that decoding is the same with the split and without, and that the
LM head's rows computed together equal each alone."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from unittest.mock import patch

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from memorag.memory import MemoryConfig, MemoryModel
from memorag.memory import linear as linear_module
from memorag.memory.linear import (
    MAX_ROWS,
    MIN_BLOCK_ELEMENTS,
    MemoryLinear,
    _blocks,
    is_plain_linear,
    linear,
    plain_linears,
    rows_alone,
    sequences_alone,
    use_memory_linears,
)
from tests.memory import decoding_cases as cases

from .conftest import CountOps, random_ids, tiny_base, tiny_memory_model


@contextmanager
def threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class BlockedProducts(TorchDispatchMode):
    """Counts the batched products of rows with two blocks of a weight [2, in, out / 2] (the CPU split)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocked = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in (torch.ops.aten.bmm, torch.ops.aten.baddbmm):
            weights = args[-1]
            self.blocked += weights.shape[0] == 2 and weights.stride(0) == weights.shape[1] * weights.shape[2]
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("rows", [1, 2, 3, MAX_ROWS])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("count", [2, 3])
def test_the_split_product_computes_the_linear_layer(rows, bias, count):
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(768, 512, generator=generator)  # 3 blocks of 2**17 weights or more
    shift = torch.randn(768, generator=generator) if bias else None
    inputs = torch.randn(1, rows, 512, generator=generator)
    with threads(count):
        assert _blocks(inputs, weight) == count
        with CountOps() as seen:
            got = linear(inputs, weight, shift)
    assert seen.counts["aten.baddbmm" if bias else "aten.bmm"] == 1 and not seen.counts["aten.mm"] + seen.counts["aten.addmm"]
    assert got.shape == (1, rows, 768)
    torch.testing.assert_close(got, F.linear(inputs, weight, shift), rtol=1e-6, atol=1e-6)


def test_the_blocks_are_the_most_that_divide_the_features_evenly_and_are_not_too_small():
    inputs = torch.randn(1, 1, 8)
    block = MIN_BLOCK_ELEMENTS // 8  # output features per block of the smallest size, at 8 inputs
    with threads(4):
        assert _blocks(inputs, torch.empty(4 * block, 8)) == 4
        assert _blocks(inputs, torch.empty(3 * block, 8)) == 3
        assert _blocks(inputs, torch.empty(4 * block + 2, 8)) == 3  # 4 blocks would not divide it evenly
        assert _blocks(inputs, torch.empty(3 * block - 2, 8)) == 2  # 3 blocks would each be a little too small
        assert _blocks(inputs, torch.empty(2 * block - 2, 8)) == 1  # too small to split at all
        assert _blocks(inputs, torch.empty(4 * block + 1, 8)) == 1  # a prime number of features
    with threads(1):
        assert _blocks(inputs, torch.empty(4 * block, 8)) == 1


def test_everything_else_is_plain_linear():
    weight = torch.randn(2 * MIN_BLOCK_ELEMENTS // 8, 8)
    with threads(2):
        assert _blocks(torch.randn(1, MAX_ROWS + 1, 8), weight) == 1  # more rows: a matrix-matrix product
        assert _blocks(torch.randn(1, 1, 8, dtype=torch.bfloat16), weight.bfloat16()) == 1  # slower split on CPU
        assert _blocks(torch.randn(1, 1, 8, device="meta"), weight.to("meta")) == 1  # not the CPU
        assert _blocks(torch.randn(1, 1, 8), weight.t().contiguous().t()) == 1  # a strided weight
        assert _blocks(torch.randn(1, 1, 8, requires_grad=True), weight) == 1  # autograd
        with torch.no_grad():
            assert _blocks(torch.randn(1, 1, 8, requires_grad=True), weight) == 2
        with plain_linears():
            assert _blocks(torch.randn(1, 1, 8), weight) == 1
        with CountOps() as seen:
            linear(torch.randn(1, MAX_ROWS + 1, 8), weight, None)
        assert not seen.counts["aten.bmm"] and seen.counts["aten.mm"] == 1


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


def test_decoding_is_the_same_with_the_split_product_and_without():
    # wide enough that the attention's query and output projections and the MLP split in two blocks
    model = tiny_memory_model("llama", window=16, ratios=[4], base_overrides={
        "hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 4})
    memory = model.memorize(random_ids(16 * 5 + 3)[0].tolist(), show_progress=False)
    prompts = [random_ids(length, seed=length)[0].tolist() for length in (5, 9, 2)]
    with threads(2):
        with BlockedProducts() as split_ops:
            split = model.generate_ids_batch(prompts, memory=memory, max_new_tokens=24, min_new_tokens=24)
        alone = [model.generate_ids(prompt, memory=memory, max_new_tokens=24, min_new_tokens=24)
                 for prompt in prompts]
        with plain_linears(), BlockedProducts() as plain_ops:
            plain = model.generate_ids_batch(prompts, memory=memory, max_new_tokens=24, min_new_tokens=24)
    assert split == plain == alone
    # the decoding steps' query, output and MLP products ran as two blocks of output features each
    assert split_ops.blocked > 4 * 24 and plain_ops.blocked == 0
    hidden = torch.randn(1, 1, model.base_model.config.hidden_size)
    with torch.no_grad(), threads(2):
        torch.testing.assert_close(model.logits(hidden), F.linear(model.final_norm(hidden), model.lm_head.weight),
                                   rtol=1e-6, atol=1e-5)


def test_the_lm_heads_rows_computed_together_equal_each_alone():
    head = nn.Linear(512, 6000, bias=False)  # split on the CPU, and read in two blocks of rows
    use_memory_linears(head)
    rows = [torch.randn(1, 512, generator=torch.Generator().manual_seed(seed)) for seed in range(3)]
    with torch.no_grad(), threads(2), patch.object(linear_module, "_CACHED_BLOCK_ELEMENTS", 4096 * 512):
        with CountOps() as seen:
            together = rows_alone(head, rows)
        alone = [head(row) for row in rows]
    assert seen.counts["aten.bmm"] == 2 * len(rows)  # two blocks of the weight, every row through each
    assert all(torch.equal(a, b) for a, b in zip(together, alone, strict=True))
    torch.testing.assert_close(torch.cat(together), F.linear(torch.cat(rows), head.weight), rtol=1e-6, atol=1e-5)


def test_inside_sequences_alone_each_sequence_rounds_as_alone_and_only_in_its_thread():
    layer = nn.Linear(64, 32)
    use_memory_linears(layer)
    packed = torch.randn(1, 7, 64)
    bounds = [0, 1, 3, 7]
    with torch.no_grad():
        alone = torch.cat([layer(packed[:, start:end].clone()) for start, end in zip(bounds[:-1], bounds[1:])], 1)
        with sequences_alone({7: bounds}):
            assert torch.equal(layer(packed), alone)
            assert torch.equal(layer(packed[:, :5]), F.linear(packed[:, :5], layer.weight, layer.bias))  # no split of 5
            with ThreadPoolExecutor(1) as pool:  # another thread: plain rows
                assert torch.equal(pool.submit(layer, packed).result(), F.linear(packed, layer.weight, layer.bias))
            with pytest.raises(RuntimeError, match="inside another"), sequences_alone({7: bounds}):
                pass
        assert torch.equal(layer(packed), F.linear(packed, layer.weight, layer.bias))


def test_low_rank_factors_are_memory_linears_too():
    pytest.importorskip("peft")
    from memorag.memory.lowrank import apply_lowrank, merge_lowrank

    model = MemoryModel(tiny_base("llama"), MemoryConfig(window=16, ratios=[4]))  # untrained copies
    apply_lowrank(model, rank=2)
    assert all(type(module) is not nn.Linear for module in model.modules())
    merge_lowrank(model)
    assert all(type(projection) is MemoryLinear for attention in model.memory_attentions()
               for projection in attention.memory.values())
