"""The inputs of `MemoryModel.step`, the one step of the memory model (docs/memory-model.md, "The step").

A step reads one *piece*: raw tokens that lie inside one window, for one working cache
(`[B, n]` ids, `B` sequences sharing the cache's batch axis). Everything a step needs is
decided before it runs, by the pure arithmetic of `schedule.plan`: where the piece
starts, its ratio, which of its rows are memory tokens, and the schedule state once it
is written (after compaction when it completes its window). `plan_steps` splits any run
of tokens into such pieces; `MemoryModel.feed`, `memorize`, `forward`, the training
objectives and batched decoding are all loops over them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attention import RowSplit, StepContext
from .buffer_step import BufferStep
from .cache import MemoryCache
from .ratios import RatioOf
from .schedule import Piece, ScheduleState, plan


@dataclass(frozen=True)
class StepInput:
    """One piece of one window for one working cache."""

    input_ids: torch.Tensor  # [B, n] the piece's raw tokens, n >= 1
    cache: MemoryCache  # written in place (or functionally under autograd), then advanced to `after`
    piece: Piece  # where the tokens go: ratio, window offset, memory entries before, completes the window
    after: ScheduleState  # the cache's schedule state once the piece is written


def plan_steps(input_ids: torch.Tensor, cache: MemoryCache, window: int, ratio_of: RatioOf) -> list[StepInput]:
    """Raw tokens [B, N] continuing `cache` -> the steps that read them, one per window piece, in order."""
    return [StepInput(input_ids[:, piece.raw_start : piece.raw_end], cache, piece, after)
            for piece, after in plan(cache.state, input_ids.shape[1], window, ratio_of)]


@dataclass
class PieceRows:
    """A step's rows as the layers take them: raw rows with the piece's memory tokens inserted."""

    hidden: torch.Tensor  # [B, T, D] input states, raw and memory rows in sequence order
    positions: torch.Tensor  # [1, T]
    rows: RowSplit | None  # which rows are memory tokens (None: all raw)
    context: StepContext | BufferStep  # the cache, the prefix every row sees, the mask of the window's rows

    @property
    def num_rows(self) -> int:
        return self.hidden.shape[1]

    @property
    def num_memory(self) -> int:
        return 0 if self.rows is None else int(self.rows.memory.numel())

    def raw(self, hidden: torch.Tensor) -> torch.Tensor:
        """The raw rows [B, n, ...] of this piece's rows [B, T, ...]."""
        return self.rows.split(hidden)[0] if self.rows is not None else hidden
