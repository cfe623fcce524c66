"""The memory model's linear layers (docs/memory-model.md, "Linear layers in decoding").

`MemoryLinear` is `nn.Linear` whose rows, in a packed batch, round per sequence as alone, so that
an exact batch (`PackedStepRows`, memory/attention.py) decodes each sequence bit for bit as one-by-one
decoding does. A matrix product's rounding depends on its shape: `F.linear` over one row takes a
matrix-vector kernel, over several a matrix-matrix one that sums in another order, and a small
model's logits tie often enough that one rounding step changes a greedy reply. So inside
`sequences_alone(splits)` (an exact batch's step, for its own thread only) a layer given N packed
rows, `splits[N]` the sequences' bounds, computes each sequence's rows as a product of their own,
with the strides a lone sequence's rows have, and concatenates them; outside it, it is `F.linear`.

Sequences with the same number of rows (in a decoding round: one raw row each, or two with a
memory token) are multiplied in one batched product (`torch.bmm` against the weight, the
sequences spread over torch's threads), which torch on the CPU computes as one product per
sequence with that sequence's own shape: the same rounding as alone, at a fraction of the cost of
one `F.linear` call per sequence. That it rounds so on the device at hand is checked, not
assumed: the first time a shape (rows per sequence, sequences, features, dtype, device, threads)
is met, both ways are computed on random rows and compared bit for bit (`rounds_as_alone`), and a
shape where they differ keeps one product per sequence.

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
        parts = [rows.contiguous().view(rows.shape) for rows in inputs.split(sizes, dim=-2)]
        outputs: list[torch.Tensor | None] = [None] * len(parts)
        for size, members in _by_size(sizes).items():
            if len(members) > 1 and rounds_as_alone(self, size, len(members), inputs):
                stacked = torch.stack([parts[index].reshape(size, -1) for index in members])  # [P, size, in]
                together = _products_together(stacked, self.weight, self.bias)  # [P, size, out]
                for row, index in enumerate(members):
                    outputs[index] = together[row].view(*parts[index].shape[:-1], -1)
            else:
                for index in members:
                    outputs[index] = F.linear(parts[index], self.weight, self.bias)
        return torch.cat([out for out in outputs if out is not None], dim=-2)


def _by_size(sizes: list[int]) -> dict[int, list[int]]:
    """Sequence indices by their number of rows, in order; sequences without rows left out."""
    groups: dict[int, list[int]] = {}
    for index, size in enumerate(sizes):
        if size:
            groups.setdefault(size, []).append(index)
    return groups


def _products_together(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`rows` [P, n, in] times the weight [out, in] as P products of one sequence each: [P, n, out]."""
    shared = weight.T.expand(rows.shape[0], -1, -1)  # [P, in, out], no copy
    if bias is None:
        return torch.bmm(rows, shared)
    return torch.baddbmm(bias.expand(rows.shape[0], rows.shape[1], -1), rows, shared)


_ROUNDS_AS_ALONE: dict[tuple, bool] = {}  # the shapes checked so far, and the answer


def rounds_as_alone(layer: nn.Linear, size: int, count: int, like: torch.Tensor) -> bool:
    """Whether `count` sequences of `size` rows each, multiplied together by `_products_together`, get
    the bits each gets from `F.linear` alone, for `layer` with rows of `like`'s dtype and device; the
    first call for a shape computes both ways on random rows, later calls read the answer."""
    key = (layer.in_features, layer.out_features, layer.bias is not None, size, count, like.dtype, like.device,
           layer.weight.dtype, torch.get_num_threads())
    known = _ROUNDS_AS_ALONE.get(key)
    if known is None:
        generator = torch.Generator(device=like.device).manual_seed(0)
        rows = torch.randn(count, size, layer.in_features, generator=generator, device=like.device).to(like.dtype)
        with torch.no_grad():
            together = _products_together(rows, layer.weight, layer.bias)
            alone = torch.stack([F.linear(rows[index : index + 1], layer.weight, layer.bias)[0]
                                 for index in range(count)])
        known = _ROUNDS_AS_ALONE[key] = bool(torch.equal(together, alone))
    return known


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
