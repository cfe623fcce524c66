"""The memory model's products over packed rows (docs/memory-model.md, "Linear layers in decoding").

An exact batch (`PackedStepRows`, memory/attention.py) decodes each sequence bit for bit as one-by-one
decoding does, so each linear layer must round a sequence's rows as it rounds them alone. A matrix
product's rounding depends on its shape: `F.linear` over one row takes a matrix-vector kernel, over
several a matrix-matrix one that sums in another order, and a small model's logits tie often enough
that one rounding step changes a greedy reply. `project(layer, rows, sequences)` is `layer(rows)`; with
`sequences` (a `SequenceRows`: the sequences' bounds for each row count the step projects), it computes
each sequence's rows as a product of their own, with the strides a lone sequence's rows have, and
concatenates them. The bounds are an argument, handed down by the step that packs the rows: nothing is
read from the thread or the module.

Sequences with the same number of rows (in a decoding round: one raw row each, or two with a memory
token) may be multiplied together, in one of three ways: `together`, one `F.linear` over all their rows
(on a CPU whose kernel sums each row alike whatever the rows beside it, bf16 on AMX among them, the same
bits as alone at the cost of one shared product); `batched`, one `torch.bmm` against the weight (torch on
the CPU computes it as one product per sequence with its own shape; on other kernels it copies the
weight at each call); or `each`, one `F.linear` per sequence, always as alone. Which ones round as alone,
and which of those is fastest, depends on the device, the dtype and the kernels, so it is measured, not
assumed: the first time a shape (rows per sequence, sequences, features, dtypes, device, threads) is met,
`together` and `batched` are computed on random rows and compared bit for bit with `each`, and the
fastest of the ways that match is kept for that shape. The answers are a table the model owns
(`ExactProducts`, one per memory model) and hands down with the bounds; torch's thread count is part of
a shape's key, as it decides how the CPU kernel splits a product.

A layer that is not a plain `nn.Linear` (peft's low-rank layers, bitsandbytes' quantized ones) is called
as a module on each sequence's rows: what it computes for a lone sequence, whatever it is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

TOGETHER, BATCHED, EACH = "together", "batched", "each"  # the ways to multiply sequences of equal size
# (the way, a call computing it) -> seconds the call takes: how `ExactProducts` times the ways
Timer = Callable[[str, Callable[[], object]], float]


def best_seconds(way: str, call: Callable[[], object], rounds: int = 3) -> float:
    """The fastest of `rounds` runs of `call`, after one untimed run."""
    call()
    best = math.inf
    for _ in range(rounds):
        started = time.perf_counter()
        out = call()
        if isinstance(out, torch.Tensor) and out.is_cuda:
            torch.cuda.synchronize(out.device)
        best = min(best, time.perf_counter() - started)
    return best


class ExactProducts:
    """Per shape, the fastest way to multiply sequences of equal size that rounds each as alone; the first
    question for a shape checks and times the ways on random rows (`timer`), later ones read the answer."""

    def __init__(self, timer: Timer = best_seconds) -> None:
        self.timer = timer
        self.known: dict[tuple, str] = {}

    def way(self, layer: nn.Linear, size: int, count: int, like: torch.Tensor) -> str:
        key = (layer.in_features, layer.out_features, layer.bias is not None, size, count, like.dtype, like.device,
               layer.weight.dtype, torch.get_num_threads())
        known = self.known.get(key)
        if known is None:
            known = self.known[key] = self._fastest(layer, size, count, like)
        return known

    def _fastest(self, layer: nn.Linear, size: int, count: int, like: torch.Tensor) -> str:
        generator = torch.Generator(device=like.device).manual_seed(0)
        rows = torch.randn(count, size, layer.in_features, generator=generator, device=like.device).to(like.dtype)
        with torch.no_grad():
            alone = multiply(EACH, rows, layer)
            exact = [way for way in (TOGETHER, BATCHED) if torch.equal(multiply(way, rows, layer), alone)]
            return min([*exact, EACH], key=lambda way: self.timer(way, lambda: multiply(way, rows, layer)))


def multiply(way: str, rows: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """`rows` [P, n, in] (P sequences of n rows, contiguous) through `layer` the way `way` says: [P, n, out]."""
    if way == TOGETHER:
        return F.linear(rows.reshape(-1, rows.shape[-1]), layer.weight, layer.bias).view(*rows.shape[:2], -1)
    if way == BATCHED:
        return products_together(rows, layer.weight, layer.bias)
    return torch.cat([F.linear(rows[index : index + 1], layer.weight, layer.bias) for index in range(rows.shape[0])])


@dataclass(frozen=True)
class SequenceRows:
    """Which packed rows belong to which sequence: `bounds[N]` ([0, ..., N]) splits a tensor of N rows (all
    of a step's rows, or its raw rows, or its memory rows, projected apart); `products` is the model's table."""

    bounds: dict[int, list[int]]
    products: ExactProducts = field(compare=False)

    @classmethod
    def one_each(cls, count: int, products: ExactProducts) -> SequenceRows:
        """`count` rows, each a sequence of its own."""
        return cls({count: list(range(count + 1))}, products)


def project(layer: nn.Module, inputs: torch.Tensor, sequences: SequenceRows | None = None) -> torch.Tensor:
    """`layer(inputs)` ([..., N, in]); with `sequences`, each sequence's rows as when it is alone."""
    bounds = sequences.bounds.get(inputs.shape[-2]) if sequences is not None and inputs.dim() >= 2 else None
    if bounds is None or len(bounds) <= 2:
        return layer(inputs)
    sizes = [end - start for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
    # each sequence's rows with the strides a lone sequence's rows have: a view into the packed rows keeps
    # the packed strides, which send `F.linear` to another kernel (a batched product); a view of the view
    # with its own shape takes the plain strides without a copy, as the rows are contiguous
    parts = [rows.contiguous().view(rows.shape) for rows in inputs.split(sizes, dim=-2)]
    if not is_plain_linear(layer):
        return torch.cat([layer(part) for part in parts if part.shape[-2]], dim=-2)
    outputs: list[torch.Tensor | None] = [None] * len(parts)
    for size, members in _by_size(sizes).items():
        way = sequences.products.way(layer, size, len(members), inputs) if len(members) > 1 else EACH
        if way == EACH:
            for index in members:
                outputs[index] = F.linear(parts[index], layer.weight, layer.bias)
            continue
        stacked = torch.stack([parts[index].reshape(size, -1) for index in members])  # [P, size, in]
        together = multiply(way, stacked, layer)  # [P, size, out]
        for row, index in enumerate(members):
            outputs[index] = together[row].view(*parts[index].shape[:-1], -1)
    return torch.cat([out for out in outputs if out is not None], dim=-2)


def _by_size(sizes: list[int]) -> dict[int, list[int]]:
    """Sequence indices by their number of rows, in order; sequences without rows left out."""
    groups: dict[int, list[int]] = {}
    for index, size in enumerate(sizes):
        if size:
            groups.setdefault(size, []).append(index)
    return groups


def products_together(rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """`rows` [P, n, in] times the weight [out, in] as P products of one sequence each: [P, n, out]."""
    shared = weight.T.expand(rows.shape[0], -1, -1)  # [P, in, out], no copy
    if bias is None:
        return torch.bmm(rows, shared)
    return torch.baddbmm(bias.expand(rows.shape[0], rows.shape[1], -1), rows, shared)


def is_plain_linear(module: nn.Module) -> bool:
    """A plain linear layer: `nn.Linear` itself (not a quantized or low-rank subclass or wrapper)."""
    return type(module) is nn.Linear
