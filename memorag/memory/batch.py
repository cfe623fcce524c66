"""Feeding several sequences at once, each into its own working cache, exactly as alone.

Sequences that continue one memory differ in length, so each reaches its memory-token
rows and its window's end at its own step, at its own positions. Instead of padding
them to one shape, their rows are packed along one row axis (batch 1): each layer runs
once over all rows, with attention per sequence over its own cache, its own positions,
memory rows and mask (`PackedStep`; in one call where the caches are stacked rows of one
buffer and every sequence brings as many rows: `StackedStep`, memory/buffer_step.py). `feed_batch` plans each sequence's pieces and hands
each round to `MemoryModel.step`, which packs them with `PackedRows`.

Bit for bit as alone (`exact=True`, the default): a matrix product's rounding depends
on its shape (a lone decoding row takes a matrix-vector kernel, more rows a matrix-matrix
one that sums in another order, in bf16 and fp32 alike on CPU), and greedy decoding of a
small model meets exact ties in its bf16 logits often enough that one rounding step
changes a reply. So inside `sequences_alone` (memory/linear.py) every linear layer (base,
memory and low-rank projections, MLP) rounds each sequence's rows as alone: on the CPU in
float32, where a product of at most four rows always takes one fixed shape and so gives
each row its own result, the sequences' decoding rows share one product per layer (each
weight read once per step); elsewhere each sequence's rows are a product of their own.
Norms, activations, rotary embeddings, attention bookkeeping and the layer loop run once
over all rows. `exact=False` shares each matrix product among all rows (faster where the
per-sequence products are slow), and then a reply can differ from the one-by-one reply
where two tokens (nearly) tie. Linear layers that are not plain `nn.Linear` (bitsandbytes'
quantized ones) always see all rows at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

from .attention import PackedStep, RowSplit
from .buffer_step import StackedStep
from .cache import MemoryCache
from .linear import sequences_alone
from .step import PieceRows, plan_steps

if TYPE_CHECKING:
    from .model import MemoryModel


def feed_batch(
    model: MemoryModel,
    token_ids: Sequence[torch.Tensor],
    caches: Sequence[MemoryCache],
    ratio_of: Sequence[Callable[[int], int]],
    exact: bool = True,
) -> list[torch.Tensor | None]:
    """Feed `token_ids[i]` ([1, n_i] raw tokens, n_i may be 0) into `caches[i]` (new windows' ratios from
    `ratio_of[i]`), all sequences in one `MemoryModel.step` per round of window pieces; returns each
    sequence's last raw row's hidden state [1, D] (before the final norm), None where nothing was fed.

    A sequence whose tokens span several windows brings one piece to each round, so a window
    completed by one sequence is compacted in its cache alone, at the step it completes.
    """
    if not len(token_ids) == len(caches) == len(ratio_of):
        raise ValueError(f"{len(token_ids)} token sequences, {len(caches)} caches and {len(ratio_of)} ratio "
                         "functions; give one cache and one ratio function per sequence")
    if len({cache.rotated_keys for cache in caches}) > 1:
        raise ValueError("the caches of one batch must all store rotated keys, or all unrotated ones")
    window = model.config.window
    plans = [plan_steps(ids, cache, window, ratio) for ids, cache, ratio in zip(token_ids, caches, ratio_of,
                                                                               strict=True)]
    last: list[torch.Tensor | None] = [None] * len(caches)
    for round_index in range(max((len(steps) for steps in plans), default=0)):
        members = [i for i, steps in enumerate(plans) if round_index < len(steps)]
        outputs = model.step([plans[i][round_index] for i in members], exact=exact)
        for i, raw in zip(members, outputs, strict=True):
            last[i] = raw[:, -1]
    return last


@dataclass
class PackedRows:
    """Several sequences' step rows packed along one row axis (batch 1), ready for the layers."""

    parts: list[PieceRows]
    bounds: list[int]  # sequence i owns packed rows bounds[i]:bounds[i + 1]
    hidden: torch.Tensor  # [1, sum T_i, D]
    positions: torch.Tensor  # [1, sum T_i]
    position_embeddings: tuple[torch.Tensor, torch.Tensor]  # cos, sin [1, sum T_i, d]
    context: PackedStep | StackedStep

    @classmethod
    def of(cls, parts: list[PieceRows], rotary: nn.Module, dtype: torch.dtype) -> PackedRows:
        bounds, raw_rows, memory_rows = [0], [], []
        for part in parts:
            start, count = bounds[-1], part.num_rows
            if part.rows is None:
                raw_rows.extend(range(start, start + count))
            else:
                raw_rows.extend(start + row for row in part.rows.raw_rows)
                memory_rows.extend(start + row for row in part.rows.memory_rows)
            bounds.append(start + count)
        device = parts[0].hidden.device
        hidden = torch.cat([part.hidden for part in parts], dim=1)  # [1, sum T_i, D]
        positions = torch.cat([part.positions for part in parts], dim=1)  # [1, sum T_i]
        # each sequence's rotary embedding computed as it would be alone, then packed
        embeddings = [rotary(part.hidden, part.positions) for part in parts]
        cos = torch.cat([pair[0] for pair in embeddings], dim=1)
        sin = torch.cat([pair[1] for pair in embeddings], dim=1)
        rows = RowSplit.of(raw_rows, memory_rows, device=device) if memory_rows else None
        context = PackedStep(steps=[part.context for part in parts], bounds=bounds, rows=rows, dtype=dtype)
        context = StackedStep.of(context) or context  # decoding steps over stacked caches: attention in one call
        return cls(parts, bounds, hidden, positions, (cos, sin), context)

    def linears(self, exact: bool):
        """Where the packed rows run through the layers: with `exact`, each plain linear layer per sequence."""
        if not exact:
            return nullcontext()
        splits = {self.bounds[-1]: self.bounds}  # all rows; the raw rows and the memory rows when projected apart
        if self.context.rows is not None:
            splits = _add_split(splits, _bounds([part.num_rows - part.num_memory for part in self.parts]))
            splits = _add_split(splits, _bounds([part.num_memory for part in self.parts]))
        return sequences_alone(splits)

    def unpack(self, out: torch.Tensor) -> list[torch.Tensor]:
        """The layers' output over the packed rows -> each sequence's raw rows [1, n_i, D]."""
        return [part.raw(out[:, start:end])
                for part, start, end in zip(self.parts, self.bounds[:-1], self.bounds[1:], strict=True)]


def _bounds(counts: list[int]) -> list[int]:
    bounds = [0]
    for count in counts:
        bounds.append(bounds[-1] + count)
    return bounds


def _add_split(splits: dict[int, list[int]], bounds: list[int]) -> dict[int, list[int]]:
    total = bounds[-1]
    if total and total in splits and splits[total] != bounds:
        raise RuntimeError(f"two ways to split {total} packed rows by sequence ({splits[total]} and {bounds}); "
                           "decode these prompts one by one")
    return {**splits, total: bounds} if total else splits
