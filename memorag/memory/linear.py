"""The memory model's linear layers (docs/memory-model.md, "Linear layers in decoding").

`MemoryLinear` is `nn.Linear` whose few-row products on the CPU give every row a result of
its own, whatever other rows it is computed with, so that an exact batch (memory/attention.py, `PackedRows`)
reads each weight once per step and still rounds every sequence as alone:

- **A matrix product's rounding depends on its shape.** `F.linear` over one row takes a
  matrix-vector kernel, over several a matrix-matrix one that sums in another order; a reply
  decoded alone and the same reply decoded in a batch would then differ where two tokens
  (nearly) tie. A product of a fixed shape, though, rounds each row the same way whichever
  rows are beside it and at whichever position: its kernel depends on the shape only.
- **So few rows are always computed as `ROWS` rows.** At most `ROWS` rows of float32 on the
  CPU (a decoding step brings one row per sequence, two with a memory token) are padded with
  zero rows to exactly `ROWS` and multiplied with the weight as the left operand
  (`torch.mm(weight, rows.T)`, `torch.addmm` with a bias: the output features are the long
  side, which the BLAS splits over all of torch's threads). A sequence decoded alone and the
  same sequence packed with others in one product get the same bits; more packed rows than
  `ROWS` go in groups of `ROWS`. On a 2-core AMD EPYC, over the embedded model's layers, one
  to four rows took about the same time this way, where one `F.linear` per row took 1.15x as
  long for one row and 2.2x for three (`benchmarks/row_linear.py`; raw output in
  benchmarks/results/fixed-rows-2026-11-26/).
- **Each sequence alone where the kernel does not apply.** Inside `sequences_alone(splits)`
  (an exact batch's step, for its own thread only) a layer given N packed rows, `splits[N]`
  the sequences' bounds, computes the rows of all sequences together when each has at most
  `ROWS` rows and the fixed-shape product applies; otherwise each sequence's rows as a
  product of their own, concatenated: bfloat16 and other dtypes (whose few-row products are
  compute-bound on a CPU without bf16 instructions, and slower padded), the GPU and autograd
  take plain `F.linear`, per sequence in a packed batch.

`use_memory_linears(module)` turns every plain `nn.Linear` inside a module into a
`MemoryLinear` by changing its class only: weights, state dicts, checkpoints and
`isinstance(module, nn.Linear)` stay as they were. The memory model does so when it is built
(base and memory projections, MLP, LM head) and when low-rank factors are added
(memory/lowrank.py), and a local generator when it loads its model (for the fast kernel).
Quantized layers (bitsandbytes' subclasses) are left alone: they see a packed batch's rows
at once, and their replies may then differ from one-by-one decoding.
`plain_linears()` switches the fixed-shape product off for the whole process while inside (to
measure without it, or to count operators as a GPU runs them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

# Products of at most this many rows are computed over exactly this many (zero rows below the real
# ones): the three clue kinds of a default exact batch fit in one, and one row padded to four cost no
# more than one row through `F.linear` on the CPU measured (`benchmarks/row_linear.py`).
ROWS = 4

_local = threading.local()  # .splits: this thread's sequence bounds by packed row count, or None


class MemoryLinear(nn.Linear):
    """`nn.Linear` whose few-row products on the CPU round each row as alone, and whose packed batch's
    sequences round as alone (see the module's docstring)."""

    fixed_rows_on_cpu: ClassVar[bool] = True  # False inside `plain_linears()`

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        splits = getattr(_local, "splits", None)
        bounds = splits.get(inputs.shape[-2]) if splits is not None and inputs.dim() >= 2 else None
        if bounds is None or len(bounds) <= 2:
            return linear(inputs, self.weight, self.bias)
        sizes = [end - start for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
        if max(sizes) <= ROWS and fixed_rows_apply(inputs, self.weight):
            return fixed_rows_product(inputs, self.weight, self.bias)  # every row rounds as alone
        # each sequence's rows with the strides a lone sequence's rows have: a view into the packed rows keeps
        # the packed strides, which send `F.linear` to another kernel (a batched product); a view of the
        # view with its own shape takes the plain strides without a copy, as the rows are contiguous
        return torch.cat([linear(rows.contiguous().view(rows.shape), self.weight, self.bias)
                          for rows in inputs.split(sizes, dim=-2) if rows.shape[-2]], dim=-2)


@contextmanager
def sequences_alone(splits: dict[int, list[int]]) -> Iterator[None]:
    """Inside (this thread only): a `MemoryLinear` given N rows with N in `splits` computes the rows of
    each sequence (bounds `splits[N]`, [0, ..., N]) as when that sequence is fed alone."""
    if getattr(_local, "splits", None) is not None:
        raise RuntimeError("a packed forward inside another one on the same thread")
    _local.splits = splits
    try:
        yield
    finally:
        _local.splits = None


def linear(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`F.linear(inputs, weight, bias)`; over 1 to `ROWS` rows where `fixed_rows_apply`, computed as
    `ROWS` rows (`fixed_rows_product`)."""
    rows = inputs.numel() // max(inputs.shape[-1], 1) if inputs.dim() else 0
    if 0 < rows <= ROWS and fixed_rows_apply(inputs, weight):
        return fixed_rows_product(inputs, weight, bias)
    return F.linear(inputs, weight, bias)


def fixed_rows_apply(inputs: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether few rows of `inputs` go through `fixed_rows_product`: float32 on the CPU, no autograd, not
    inside `plain_linears()`. Code compiled by `torch.compile` traces it like the eager step (so a
    compiled step rounds as the eager one where the backend keeps the operators)."""
    if (not MemoryLinear.fixed_rows_on_cpu or weight.dtype != torch.float32 or inputs.dtype != torch.float32
            or not inputs.is_cpu or not weight.is_cpu or inputs.dim() < 2):
        return False
    return not (torch.is_grad_enabled() and (inputs.requires_grad or weight.requires_grad))


def fixed_rows_product(inputs: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`F.linear(inputs, weight, bias)` with every group of `ROWS` rows (the last padded with zero rows)
    computed as one product of the weight [out, in] with the group's rows as columns [in, ROWS]: each
    row's result depends on that row only, not on the rows beside it or its place among them."""
    in_features, out_features = weight.shape[1], weight.shape[0]
    rows = inputs.reshape(-1, in_features)
    results = []
    for start in range(0, rows.shape[0], ROWS):
        group = rows[start : start + ROWS]
        count = group.shape[0]
        # always a fresh contiguous [ROWS, in] block (a copy even when full), so that every group reaches the
        # BLAS with the same layout and alignment, wherever its rows lay
        group = F.pad(group, (0, 0, 0, ROWS - count))
        product = torch.mm(weight, group.T) if bias is None else torch.addmm(bias[:, None], weight, group.T)
        results.append(product.T[:count])  # [count, out]
    out = results[0] if len(results) == 1 else torch.cat(results)
    return out.contiguous().view(*inputs.shape[:-1], out_features)


@contextmanager
def plain_linears() -> Iterator[None]:
    """Inside: every `MemoryLinear` computes plain `F.linear` (in every thread of the process); sequences
    in a packed batch then round alone by a product per sequence."""
    before = MemoryLinear.fixed_rows_on_cpu
    MemoryLinear.fixed_rows_on_cpu = False
    try:
        yield
    finally:
        MemoryLinear.fixed_rows_on_cpu = before


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
