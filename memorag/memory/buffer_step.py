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

from .attention import PackedStep, RowSplit, attend_bucket


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
        return write_and_attend(self.keys[layer], self.values[layer], self.write_rows, self.bias, query, key, value,
                                scale, self.grouped)


def write_and_attend(keys: torch.Tensor, values: torch.Tensor, write_rows: torch.Tensor, bias: torch.Tensor,
                     query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float, grouped: bool
                     ) -> torch.Tensor:
    """Write `key`/`value` [B, H_kv, T, d] into the buffers `keys`/`values` [B, H_kv, C, d] at `write_rows`
    ([T], or [B, T] each sequence its own) and attend `query` [B, H, T, d] over the whole buffers with
    `bias`; [B, T, H, d]."""
    if write_rows.dim() == 1:
        keys.index_copy_(2, write_rows, key)
        values.index_copy_(2, write_rows, value)
    else:  # each sequence writes its own rows (memory/shared_buffers.py)
        rows = write_rows[:, None, :, None].expand(-1, key.shape[1], -1, key.shape[3])  # [B, H_kv, T, d]
        keys.scatter_(2, rows, key)
        values.scatter_(2, rows, value)
    return attend_bucket(query, keys, values, bias, scale, grouped)


def stacked(buffers: list[torch.Tensor]) -> torch.Tensor | None:
    """Buffers [1, ...] that are consecutive rows of one buffer, in order -> those rows as one view [n, ...];
    None when they are not (separately allocated, out of order, or of other shapes)."""
    first = buffers[0]
    if first.shape[0] != 1 or not first.is_contiguous():
        return None
    storage, row_bytes = first.untyped_storage().data_ptr(), first.stride(0) * first.element_size()
    for index, buffer in enumerate(buffers):
        if (buffer.shape != first.shape or buffer.stride() != first.stride()
                or buffer.untyped_storage().data_ptr() != storage
                or buffer.data_ptr() != first.data_ptr() + index * row_bytes):
            return None
    return first.as_strided((len(buffers), *first.shape[1:]), first.stride())


@dataclass
class StackedStep:
    """A packed round of several sequences' decoding steps (memory/batch.py) whose caches are consecutive
    rows of one buffer per layer (`stacked_caches`, memory/shared_buffers.py) and which bring as many rows
    each: every layer's attention runs over all of them in one call, instead of one per sequence.

    Each sequence still writes its own buffer rows and sees only its own bias, and on the CPU a batched
    matrix product computes each batch entry as a lone one does, so every sequence's attention equals
    its `BufferStep.attend` alone (tests/memory/test_stacked_step.py checks it bit for bit). A layer whose
    buffers no longer stack (a cache that grew out of the shared buffer) attends per sequence (`packed`).
    """

    packed: PackedStep  # the same round, attended per sequence
    write_rows: torch.Tensor  # [n, T]
    bias: torch.Tensor  # [n, T, C]
    grouped: bool

    rotated_keys = True
    compiles_whole = False  # an eager packed round (attention through `attend_eager`)

    @classmethod
    def of(cls, packed: PackedStep) -> StackedStep | None:
        """The stacked form of `packed` where it applies: CPU decoding steps of one shape whose layer-0
        buffers stack; None otherwise."""
        steps = packed.steps
        if len(steps) < 2 or not all(isinstance(step, BufferStep) and step.write_rows.dim() == 1 for step in steps):
            return None
        first = steps[0]
        if not first.bias.is_cpu or any(step.bias.shape != first.bias.shape for step in steps):
            return None
        if stacked([step.keys[0] for step in steps]) is None:
            return None
        return cls(packed, torch.stack([step.write_rows for step in steps]), torch.stack([step.bias for step in steps]),
                   first.grouped)

    @property
    def rows(self) -> RowSplit | None:
        return self.packed.rows

    @property
    def dtype(self) -> torch.dtype | None:
        return self.packed.dtype

    def attend(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               scale: float) -> torch.Tensor:
        """As `PackedStep.attend`: the packed rows' `query` [1, H, n * T, d], `key`/`value` [1, H_kv, n * T, d]
        -> [1, n * T, H, d]."""
        steps = self.packed.steps
        keys = stacked([step.keys[layer] for step in steps])
        values = stacked([step.values[layer] for step in steps])
        if keys is None or values is None:
            return self.packed.attend(layer, query, key, value, scale)
        count, rows = self.write_rows.shape

        def per_sequence(packed_rows: torch.Tensor) -> torch.Tensor:  # [1, heads, n * T, d] -> [n, heads, T, d]
            return packed_rows[0].reshape(packed_rows.shape[1], count, rows, packed_rows.shape[3]).transpose(0, 1)

        out = write_and_attend(keys, values, self.write_rows, self.bias, per_sequence(query), per_sequence(key),
                               per_sequence(value), scale, self.grouped)  # [n, T, H, d]
        return out.reshape(1, count * rows, *out.shape[2:])


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
