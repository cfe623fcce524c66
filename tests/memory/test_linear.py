"""The memory model's linear layers (memory/linear.py; docs/memory-model.md, "Linear layers in decoding"):
where the fixed-shape product applies, that it computes the linear layer, that each row's result is its
own whatever rows are beside it (what lets an exact batch read each weight once per step), that the
memory model's linear layers are `MemoryLinear`s, that a batch decodes as one by one with fewer
products, and that the LM head's rows computed together equal each alone."""

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
    ROWS,
    MemoryLinear,
    fixed_rows_apply,
    fixed_rows_product,
    is_plain_linear,
    linear,
    plain_linears,
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


class FixedProducts(TorchDispatchMode):
    """Counts the products of a weight with `ROWS` rows as columns (the fixed-shape product), per weight."""

    def __init__(self) -> None:
        super().__init__()
        self.by_weight: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = func.overloadpacket
        if packet in (torch.ops.aten.mm, torch.ops.aten.addmm):
            weight, columns = args[-2], args[-1]
            if columns.dim() == 2 and columns.shape[1] == ROWS and weight.shape[0] != ROWS:
                self.by_weight[weight.data_ptr()] = self.by_weight.get(weight.data_ptr(), 0) + 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.by_weight.values())


@pytest.mark.parametrize("rows", [1, 2, 3, ROWS, ROWS + 1, 2 * ROWS + 1])
@pytest.mark.parametrize("bias", [False, True])
def test_the_fixed_rows_product_computes_the_linear_layer(rows, bias):
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(768, 512, generator=generator) * 512**-0.5  # outputs of about unit size
    shift = torch.randn(768, generator=generator) if bias else None
    inputs = torch.randn(1, rows, 512, generator=generator)
    with CountOps() as seen:
        got = fixed_rows_product(inputs, weight, shift)
    groups = -(-rows // ROWS)
    assert seen.counts["aten.addmm" if bias else "aten.mm"] == groups  # one product per group of ROWS rows
    assert got.shape == (1, rows, 768) and got.is_contiguous()
    torch.testing.assert_close(got, F.linear(inputs, weight, shift), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(576, 576), (192, 576), (1536, 576), (576, 1536), (4096, 576)])
@pytest.mark.parametrize("bias", [False, True])
def test_each_rows_result_is_its_own_whatever_rows_are_beside_it(shape, bias):
    # the property an exact batch rests on, on this machine's BLAS: a row alone and the same row at any place
    # among other rows (or beside zero rows) round alike; shapes of the embedded model's layers among them
    generator = torch.Generator().manual_seed(shape[0])
    weight = torch.randn(*shape, generator=generator) * shape[1] ** -0.5
    shift = torch.randn(shape[0], generator=generator) if bias else None
    row = torch.randn(1, shape[1], generator=generator)
    alone = fixed_rows_product(row, weight, shift)
    for count in range(2, 2 * ROWS + 2):
        for place in range(count):
            rows = torch.randn(count, shape[1], generator=generator)
            rows[place] = row[0]
            assert torch.equal(fixed_rows_product(rows, weight, shift)[place], alone[0]), (count, place)


def test_where_the_fixed_rows_product_applies():
    weight = torch.randn(64, 8)
    assert fixed_rows_apply(torch.randn(1, 1, 8), weight)
    assert not fixed_rows_apply(torch.randn(1, 1, 8, dtype=torch.bfloat16), weight.bfloat16())  # slower on CPU
    assert not fixed_rows_apply(torch.randn(1, 1, 8, device="meta"), weight.to("meta"))  # not the CPU
    assert not fixed_rows_apply(torch.randn(1, 1, 8, requires_grad=True), weight)  # autograd
    with torch.no_grad():
        assert fixed_rows_apply(torch.randn(1, 1, 8, requires_grad=True), weight)
    with plain_linears():
        assert not fixed_rows_apply(torch.randn(1, 1, 8), weight)
    with patch.object(linear_module, "fixed_rows_product", wraps=fixed_rows_product) as fixed:
        linear(torch.randn(1, ROWS, 8), weight, None)
        assert fixed.call_count == 1
        linear(torch.randn(1, ROWS + 1, 8), weight, None)  # more rows: plain, a matrix-matrix product
        linear(torch.randn(1, 0, 8), weight, None)
        with plain_linears():
            linear(torch.randn(1, 1, 8), weight, None)
        assert fixed.call_count == 1


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


def test_a_batch_decodes_as_one_by_one_with_each_weight_read_once_per_step():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    memory = model.memorize(random_ids(16 * 5 + 3)[0].tolist(), show_progress=False)
    prompts = [random_ids(length, seed=length)[0].tolist() for length in (5, 9, 2)]
    tokens = dict(max_new_tokens=24, min_new_tokens=24)
    with threads(2):
        with FixedProducts() as batch_products:
            batch = model.generate_ids_batch(prompts, memory=memory, **tokens)
        with FixedProducts() as alone_products:
            alone = [model.generate_ids(prompt, memory=memory, **tokens) for prompt in prompts]
        with plain_linears(), FixedProducts() as plain_products:
            plain_batch = model.generate_ids_batch(prompts, memory=memory, **tokens)
            plain_alone = [model.generate_ids(prompt, memory=memory, **tokens) for prompt in prompts]
    assert batch == alone and plain_batch == plain_alone
    # the three sequences' decoding rows share each layer's product: about a third of one by one's products
    assert 0 < batch_products.total < 0.5 * alone_products.total and plain_products.total == 0
    hidden = torch.randn(1, 1, model.base_model.config.hidden_size)
    with torch.no_grad():
        torch.testing.assert_close(model.logits(hidden), F.linear(model.final_norm(hidden), model.lm_head.weight),
                                   rtol=1e-5, atol=1e-5)


def test_the_lm_heads_rows_computed_together_equal_each_alone():
    model = tiny_memory_model("llama", window=16, ratios=[4])
    size = model.base_model.config.hidden_size
    rows = [torch.randn(1, size, generator=torch.Generator().manual_seed(seed)) for seed in range(ROWS + 2)]
    with torch.no_grad():
        with FixedProducts() as seen:
            together = model.logits_alone(rows)
        alone = [model.logits(row) for row in rows]
        with plain_linears():
            plain_together = model.logits_alone(rows)
            plain_alone = [model.logits(row) for row in rows]
    assert seen.by_weight == {model.lm_head.weight.data_ptr(): 2}  # six rows: two groups of four
    assert all(torch.equal(a, b) for a, b in zip(together, alone, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(plain_together, plain_alone, strict=True))

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
        for bounds in ([0, 1, 3, 7], [0, 1, 7]):  # sequences of at most ROWS rows, and one of more
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
        # bfloat16: no fixed-shape product, each sequence by its own `F.linear`
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
