"""Linear layers over a few rows on the CPU, on every core (docs/memory-model.md, "Decoding on the CPU").

A decoding step multiplies every weight matrix of the model by one row (two when the step
brings a memory token): a matrix-vector product, bound by how fast the weights stream from
memory. On the CPU, `F.linear` hands such a product to one BLAS call that runs it on one
core: on a 2-core AMD EPYC it streams the embedded model's float32 weights at 10-12 GB/s,
where two cores reach about 20 (`benchmarks/row_linear.py`).

`RowParallelLinear` is `nn.Linear` with one change: given at most `MAX_ROWS` rows on the CPU
in float32, it splits the output features into as many equal blocks as torch has threads
(each of 512 KiB of weights or more: smaller matrices stay whole) and multiplies all blocks
in one batched product (`torch.bmm`, `torch.baddbmm` with a
bias), which runs the blocks on all cores. Each output feature is still the dot product of
the same row with the same weight row, taken by the same kind of kernel; on the machines
measured the result is bit for bit `F.linear`'s (the benchmark prints whether it is on
yours; the tests hold it to float32 rounding). Everything else (more rows, other dtypes,
which were slower split on the CPU measured, the GPU, autograd, code being compiled by
`torch.compile`, which picks its own kernels) is plain `F.linear`.

The memory model turns every plain `nn.Linear` of its base and memory projections into one
(`use_row_parallel`) when it is built: the base's projections and MLP, the memory
projections and the LM head. The class only swaps `forward`, so weights, state dicts,
checkpoints and `isinstance(module, nn.Linear)` are unchanged. `plain_linears()` switches it
off for the whole process while inside (to measure without it, or to count operators as a
GPU runs them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

# At most this many rows go through the split product: up to 4 rows it was faster and bit-equal
# on the CPU measured; from 6 rows the BLAS kernel changes and the two differ in rounding.
MAX_ROWS = 4
# Each block holds at least this many weights (512 KiB of float32): on the CPU measured, a 576 x 192
# projection (two blocks of 216 KiB) ran slower split than whole, a 576 x 576 one faster.
MIN_BLOCK_ELEMENTS = 2**17


def row_parallel_linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`F.linear(inputs, weight, bias)`; over at most `MAX_ROWS` rows of float32 on the CPU, as one
    matrix product per block of output features, the blocks on all of torch's threads."""
    blocks = _blocks(inputs, weight)
    if blocks == 1:
        return F.linear(inputs, weight, bias)
    return split_product(inputs, weight, bias, blocks)


def split_product(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, blocks: int) -> torch.Tensor:
    """`F.linear(inputs, weight, bias)` as `blocks` products of the rows with equal blocks of the output
    features, in one batched call (`blocks` must divide the output features; the weight contiguous)."""
    out_features, in_features = weight.shape
    rows = inputs.reshape(1, -1, in_features)
    rows = rows.expand(blocks, rows.shape[1], in_features)
    weights = weight.view(blocks, out_features // blocks, in_features).transpose(1, 2)  # [S, in, out / S]
    if bias is None:
        out = torch.bmm(rows, weights)
    else:
        out = torch.baddbmm(bias.view(blocks, 1, out_features // blocks), rows, weights)  # [S, rows, out / S]
    return out.transpose(0, 1).reshape(*inputs.shape[:-1], out_features)


def blocks_for(out_features: int, in_features: int, threads: int) -> int:
    """The most blocks, at most one per thread and each of `MIN_BLOCK_ELEMENTS` weights or more, that
    split `out_features` evenly (1: no split)."""
    most = min(threads, out_features * in_features // MIN_BLOCK_ELEMENTS, out_features)
    for blocks in range(most, 1, -1):
        if out_features % blocks == 0:
            return blocks
    return 1


def _blocks(inputs: torch.Tensor, weight: torch.Tensor) -> int:
    """How many blocks of output features to split into: 1 (plain `F.linear`) unless the split applies."""
    if not RowParallelLinear.enabled or inputs.device.type != "cpu" or weight.dtype != torch.float32:
        return 1
    if inputs.dtype != torch.float32 or inputs.dim() < 2 or inputs.numel() > MAX_ROWS * inputs.shape[-1]:
        return 1
    if torch.compiler.is_compiling() or not weight.is_contiguous():
        return 1
    if torch.is_grad_enabled() and (inputs.requires_grad or weight.requires_grad):
        return 1
    return blocks_for(weight.shape[0], weight.shape[1], torch.get_num_threads())


class RowParallelLinear(nn.Linear):
    """`nn.Linear` whose forward is `row_parallel_linear` (see the module's docstring)."""

    enabled: ClassVar[bool] = True

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return row_parallel_linear(inputs, self.weight, self.bias)


def use_row_parallel(module: nn.Module) -> int:
    """Turn every plain `nn.Linear` inside `module` into a `RowParallelLinear` (its class only: the same
    weights); subclasses (quantized layers) are left as they are. Returns how many were turned."""
    turned = 0
    for child in module.modules():
        if type(child) is nn.Linear:
            child.__class__ = RowParallelLinear
            turned += 1
    return turned


@contextmanager
def plain_linears() -> Iterator[None]:
    """Inside: every `RowParallelLinear` computes plain `F.linear` (in every thread of the process)."""
    before = RowParallelLinear.enabled
    RowParallelLinear.enabled = False
    try:
        yield
    finally:
        RowParallelLinear.enabled = before


def is_plain_linear(module: nn.Module) -> bool:
    """A plain linear layer: `nn.Linear` itself or a `RowParallelLinear` (not a quantized subclass)."""
    return type(module) in (nn.Linear, RowParallelLinear)
