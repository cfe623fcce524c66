"""The memory model's linear layers (docs/memory-model.md, "Linear layers in decoding").

`MemoryLinear` is `nn.Linear` whose rows, in a packed batch, round per sequence as alone, so that
an exact batch (`PackedStepRows`, memory/attention.py) decodes each sequence bit for bit as one-by-one
decoding does. A matrix product's rounding depends on its shape: `F.linear` over one row takes a
matrix-vector kernel, over several a matrix-matrix one that sums in another order, and a small
model's logits tie often enough that one rounding step changes a greedy reply. So inside
`sequences_alone(splits)` (an exact batch's step, for its own thread only) a layer given N packed
rows, `splits[N]` the sequences' bounds, computes each sequence's rows as a product of their own,
with the strides a lone sequence's rows have, and concatenates them; outside it, it is `F.linear`.

`use_memory_linears(module)` turns every plain `nn.Linear` inside a module into a `MemoryLinear`
by changing its class only: weights, state dicts, checkpoints and `isinstance(module, nn.Linear)`
stay as they were. The memory model does so when it is built (base and memory projections, MLP,
LM head) and when low-rank factors are added (memory/lowrank.py). Quantized layers
(bitsandbytes' subclasses) are left alone: they see a packed batch's rows at once, and their
replies may then differ from one-by-one decoding.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as F

_local = threading.local()  # .splits: this thread's sequence bounds by packed row count, or None


class MemoryLinear(nn.Linear):
    """`nn.Linear` whose packed batch's sequences round as alone (see the module's docstring)."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        splits = getattr(_local, "splits", None)
        bounds = splits.get(inputs.shape[-2]) if splits is not None and inputs.dim() >= 2 else None
        if bounds is None or len(bounds) <= 2:
            return F.linear(inputs, self.weight, self.bias)
        sizes = [end - start for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
        # each sequence's rows with the strides a lone sequence's rows have: a view into the packed rows keeps
        # the packed strides, which send `F.linear` to another kernel (a batched product); a view of the
        # view with its own shape takes the plain strides without a copy, as the rows are contiguous
        return torch.cat([F.linear(rows.contiguous().view(rows.shape), self.weight, self.bias)
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
