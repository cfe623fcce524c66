"""The memory model's linear layers (docs/memory-model.md, "Linear layers in decoding").

`MemoryLinear` is `nn.Linear` with two additions, both for decoding and both leaving every
result as plain `F.linear` rounds it:

- **Each sequence alone inside a packed batch.** Several prompts decoded as one exact batch
  (memory/batch.py) run the layers over their rows packed along one row axis. A matrix
  product's rounding depends on how many rows it is given (one row takes a matrix-vector
  kernel, several a matrix-matrix one that sums in another order), so inside
  `sequences_alone(splits)` a linear layer given N packed rows computes each sequence's rows
  (`splits[N]` are their bounds) as a product of their own and concatenates the results: each
  sequence's rows round exactly as when it is fed alone. The splits belong to the thread that
  entered (a server's requests, a LangChain `batch` in threads each have their own).
- **A few rows on every CPU core.** A decoding step multiplies every weight matrix by one row
  (two when it brings a memory token): a matrix-vector product bound by how fast the weights
  stream from memory, which `F.linear` hands to one BLAS call that runs on one core. On a
  2-core AMD EPYC the embedded model's float32 weights streamed at 9.7 GB/s that way and at
  13.4 GB/s split on both cores (`benchmarks/row_linear.py`; raw output in
  benchmarks/results/row-parallel-2026-11-26/). So at most `MAX_ROWS` rows of float32 on
  the CPU are multiplied as one product per block of output features, all blocks in one
  batched call (`torch.bmm`, `torch.baddbmm` with a bias) that runs them on all of torch's
  threads; a block holds at least `MIN_BLOCK_ELEMENTS` weights (smaller matrices stay whole).
  Each output feature is still the same row times the same weight row by the same kind of
  kernel; on the CPU measured the result is `F.linear`'s bit for bit (the benchmark prints
  whether it is on yours; the tests hold it to float32 rounding). More rows, other dtypes
  (which ran slower split there), the GPU, autograd and code being compiled by
  `torch.compile` (which picks its own kernels) take plain `F.linear`.

`use_memory_linears(module)` turns every plain `nn.Linear` inside a module into a
`MemoryLinear` by changing its class only: weights, state dicts, checkpoints and
`isinstance(module, nn.Linear)` stay as they were. The memory model does so when it is built
(base and memory projections, MLP, LM head) and when low-rank factors are added
(memory/lowrank.py), and a local generator when it loads its model (for the split).
Quantized layers (bitsandbytes' subclasses) are left alone: they see a packed batch's rows
at once, and their replies may then differ from one-by-one decoding.
`plain_linears()` switches the CPU split off for the whole process while inside (to measure
without it, or to count operators as a GPU runs them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

# At most this many rows go through the split product: up to 4 rows it was faster and bit-equal
# on the CPU measured; from 6 rows the BLAS kernel changes and the two differ in rounding.
MAX_ROWS = 4
# Each block holds at least this many weights (512 KiB of float32): on the CPU measured, a 192 x 576
# projection (two blocks of 216 KiB) gained nothing split (1.03x), a 576 x 576 one 1.16x, the larger
# ones 1.23-1.41x (`benchmarks/row_linear.py --per-matrix`, benchmarks/results/row-parallel-2026-11-26/).
MIN_BLOCK_ELEMENTS = 2**17
# Weights per block of `rows_alone`: 8 MiB of float32, which stays in a CPU's last-level cache while
# a few rows pass (the 2-core AMD EPYC measured has 32 MiB).
_CACHED_BLOCK_ELEMENTS = 2**21

_local = threading.local()  # .splits: this thread's sequence bounds by packed row count, or None


class MemoryLinear(nn.Linear):
    """`nn.Linear` whose rows round as each sequence's alone in a packed batch, and whose few-row
    products run on every CPU core (see the module's docstring)."""

    split_on_cpu: ClassVar[bool] = True  # False inside `plain_linears()`

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        splits = getattr(_local, "splits", None)
        bounds = splits.get(inputs.shape[-2]) if splits is not None and inputs.dim() >= 2 else None
        if bounds is None or len(bounds) <= 2:
            return linear(inputs, self.weight, self.bias)
        # each sequence's rows with the strides a lone sequence's rows have: a view into the packed rows keeps
        # the packed strides, which send `F.linear` to another kernel (a batched product); a view of the
        # view with its own shape takes the plain strides without a copy, as the rows are contiguous
        sizes = [end - start for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
        return torch.cat([linear(rows.contiguous().view(rows.shape), self.weight, self.bias)
                          for rows in inputs.split(sizes, dim=-2) if rows.shape[-2]], dim=-2)


@contextmanager
def sequences_alone(splits: dict[int, list[int]]) -> Iterator[None]:
    """Inside (this thread only): a `MemoryLinear` given N rows with N in `splits` computes the rows of
    each sequence (bounds `splits[N]`, [0, ..., N]) as a product of their own."""
    if getattr(_local, "splits", None) is not None:
        raise RuntimeError("a packed forward inside another one on the same thread")
    _local.splits = splits
    try:
        yield
    finally:
        _local.splits = None


def linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
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


@lru_cache(maxsize=256)
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
    if (not MemoryLinear.split_on_cpu or weight.dtype != torch.float32 or inputs.dtype != torch.float32
            or not inputs.is_cpu or inputs.dim() < 2 or inputs.numel() > MAX_ROWS * inputs.shape[-1]):
        return 1
    if torch.is_grad_enabled() and (inputs.requires_grad or weight.requires_grad):
        return 1
    if torch.compiler.is_compiling() or not weight.is_contiguous():
        return 1
    return blocks_for(weight.shape[0], weight.shape[1], torch.get_num_threads())


def rows_alone(module: nn.Module, rows: list[torch.Tensor]) -> list[torch.Tensor]:
    """`[module(row) for row in rows]`, each row [..., in] alone; for a `MemoryLinear` over float32 rows on
    the CPU, its weight is read once in blocks of output features that stay in the CPU's caches while
    every row passes (a large layer such as the LM head is otherwise read from memory once per row).
    Each row's result is its product alone, since blocks of output features do not change rounding."""
    if type(module) is not MemoryLinear or len(rows) < 2 or _blocks(rows[0], module.weight) == 1:
        return [module(row) for row in rows]
    weight, bias = module.weight, module.bias
    out_features = weight.shape[0]
    step = max(1, _CACHED_BLOCK_ELEMENTS // weight.shape[1])
    pieces: list[list[torch.Tensor]] = [[] for _ in rows]
    for start in range(0, out_features, step):
        block = weight[start : start + step]
        block_bias = None if bias is None else bias[start : start + step]
        for index, row in enumerate(rows):
            pieces[index].append(linear(row, block, block_bias))
    return [torch.cat(parts, dim=-1) for parts in pieces]



@contextmanager
def plain_linears() -> Iterator[None]:
    """Inside: every `MemoryLinear` computes plain `F.linear` on the CPU (in every thread of the process);
    sequences in a packed batch still round alone."""
    before = MemoryLinear.split_on_cpu
    MemoryLinear.split_on_cpu = False
    try:
        yield
    finally:
        MemoryLinear.split_on_cpu = before


def use_memory_linears(module: nn.Module) -> int:
    """Turn every plain `nn.Linear` inside `module` into a `MemoryLinear` (its class only: the same
    weights); subclasses (quantized layers) are left as they are. Returns how many were turned."""
    turned = 0
    for child in module.modules():
        if type(child) is nn.Linear:
            child.__class__ = MemoryLinear
            turned += 1
    return turned


def is_plain_linear(module: nn.Module) -> bool:
    """A plain linear layer: `nn.Linear` itself or a `MemoryLinear` (not a quantized subclass)."""
    return type(module) in (nn.Linear, MemoryLinear)
