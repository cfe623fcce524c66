"""A decoding step over whole cache buffers, and its compiled form (docs/memory-model.md, "Decoding").

A decoding step reads one raw token (and the memory token that follows every r-th raw token
of a window) into a cache already grown for it (`MemoryCache.ensure_capacity`). Its
context, `BufferStep`, holds only tensors and constants: the whole key/value buffers
`[B, H_kv, C, d]` per layer, the buffer rows the step's rows are written to, and the
additive bias `[T, C]` (`bucket_bias`) that says which rows each new row sees. Nothing in
it is a Python number that changes from token to token, so

- every kernel sees the same shapes step after step (C changes only when the buffers grow,
  by doubling), and a CUDA backend reuses its execution plans;
- the layers' forward over it compiles whole (`torch.compile(fullgraph=True)`): one graph for
  a step of one raw row and one for a step that also brings a memory row, reused token after
  token (`CompiledDecoding`); on CUDA with `mode="reduce-overhead"` each is replayed as a CUDA
  graph, the buffers marked as static addresses so that the in-place writes stay in place.

The schedule arithmetic (where the rows go, the bias, positions) runs before the step, on the
host, from the cache's `ScheduleState`; compaction when a window completes runs after it, once
per window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .attention import RowSplit, attend_bucket


@dataclass
class BufferStep:
    """What one decoding step's layers need; every field a tensor or a constant of the model."""

    keys: list[torch.Tensor]  # per layer [B, H_kv, C, d], written in place
    values: list[torch.Tensor]
    write_rows: torch.Tensor  # [T] the buffer rows of the step's rows; [B, T] each sequence its own
    bias: torch.Tensor  # [T, C] 0 where a row may attend, -inf elsewhere; [B, T, C] each sequence its own
    rows: RowSplit | None  # which of the T rows is the memory token (None: one raw row)
    dtype: torch.dtype  # the cache's dtype (the base model's), so all rows agree
    grouped: bool  # grouped-query attention (fewer key/value heads than query heads): a constant,
    # since a head count compared inside a graph compiled with dynamic shapes is a SymBool SDPA refuses

    rotated_keys = True  # buffers hold keys rotated to their positions
    compiles_whole = True  # traced with the layers around it (`CompiledDecoding`)

    def attend(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               scale: float) -> torch.Tensor:
        """Write the step's `key`/`value` [B, H_kv, T, d] into `layer`'s buffers and attend `query`
        [B, H, T, d] over the whole buffers; [B, T, H, d]."""
        keys, values = self.keys[layer], self.values[layer]
        if self.write_rows.dim() == 1:
            keys.index_copy_(2, self.write_rows, key)
            values.index_copy_(2, self.write_rows, value)
        else:  # each sequence writes its own rows (memory/shared_buffers.py)
            rows = self.write_rows[:, None, :, None].expand(-1, key.shape[1], -1, key.shape[3])  # [B, H_kv, T, d]
            keys.scatter_(2, rows, key)
            values.scatter_(2, rows, value)
        return attend_bucket(query, keys, values, self.bias, scale, self.grouped)


# (hidden [B, T, D], positions [1, T], context) -> hidden [B, T, D]: the layers' forward
RunLayers = Callable[[torch.Tensor, torch.Tensor, BufferStep], torch.Tensor]


class CompiledDecoding:
    """The layers' forward over a `BufferStep`, compiled whole.

    `mode` and `backend` are `torch.compile`'s ("default" and "inductor" unless told; "reduce-overhead"
    on CUDA replays CUDA graphs). The buffers' capacity C is marked dynamic, everything else is static:
    one graph for a step of one raw row and one for a step that also brings a memory row serve every
    capacity (a CUDA graph is still recorded per capacity, as buffers grow by doubling: a few per run).
    """

    def __init__(self, run_layers: RunLayers, mode: str | None = None, backend: str = "inductor") -> None:
        self.mode = mode
        self.backend = backend
        self.uses_cuda_graphs = mode in ("reduce-overhead", "max-autotune")
        self._compiled = torch.compile(run_layers, fullgraph=True, mode=mode, backend=backend)

    def __call__(self, hidden: torch.Tensor, positions: torch.Tensor, context: BufferStep) -> torch.Tensor:
        for buffer in (*context.keys, *context.values):
            torch._dynamo.mark_dynamic(buffer, 2)  # the capacity: one graph for every size the buffers grow to
            if self.uses_cuda_graphs:  # written in place inside a CUDA graph: the address must not change
                torch._dynamo.mark_static_address(buffer)
        torch._dynamo.mark_dynamic(context.bias, context.bias.dim() - 1)
        if not self.uses_cuda_graphs:
            return self._compiled(hidden, positions, context)
        # a CUDA graph's output lives in memory its next replay overwrites: the caller may keep it
        # (feed's keep_hidden), so it leaves as a copy ([B, T, D], a few KB)
        torch.compiler.cudagraph_mark_step_begin()
        return self._compiled(hidden, positions, context).clone()
