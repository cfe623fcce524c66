"""The memory KV cache (memory entries and the current window, per layer), and the step contexts that
write a step's rows to it and attend over it.

Per layer, keys and values live in one buffer `[B, H_kv, capacity, d]`: rows
`0 .. num_entries - 1` are memory entries, then the current window's rows (raw and
memory tokens interleaved, in sequence order). Keys are cached already rotated to
their position; when a window is compacted its memory rows move down to the end of
the memory and are re-rotated by their position change, once. Attention reads
`[:, :, :length]`, a view: nothing is concatenated per step.

Two write modes:
- in place (inference): buffers are written in place and get their rows as the cache's
  `Allocation` says: grown by doubling, or allocated once at a fixed capacity;
- functional (whenever autograd records): every write makes a new tensor, so
  gradients flow from later windows through the memory into earlier windows.

Decoding steps (one raw token, in place) read the whole buffers `[B, H_kv, capacity, d]`
instead of the valid rows, with a mask over the rows not yet written (`ensure_capacity`
grows the buffers before such a step, so the mask and every kernel see one shape from
token to token until the next doubling). Buffers are zero-filled when allocated so the
masked rows are finite. Several prompts' caches can be rows of one `CacheBlock`, allocated
once, so that one decoding step reads all of them (memory/decoding.py).

The step contexts (what each layer of one step is given, `StepContext` in memory/attention.py), one per
kind of step: `ValidRowsStep` (a piece of a window over the cache's valid rows), `WholeBufferStep` (a
decoding step over whole buffers with an additive bias, its shapes the same token after token, so that
it compiles whole) and `PackedSequencesStep` (several sequences' steps packed along one row axis, each
attending as alone; `PackedStepRows` packs their rows, `StepRows` holds one sequence's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .attention import KERNELS, ExactProducts, KeysSeen, MemoryAttention, SequenceRows
from .schedule import RawMemoryRows, ScheduleState

# Buffers hold a multiple of this many rows, so nearby lengths (a prompt or an answer a few
# tokens longer) share one capacity and a decoding step's shapes.
CAPACITY_BUCKET = 128

# (keys [B, H_kv, n, d], position offsets [n]) -> keys rotated by those offsets
Rotate = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Allocation:
    """How a cache's buffers get their rows: grown by doubling to a whole number of `CAPACITY_BUCKET`s,
    with `reserve` more rows at the next growth (a known prompt length); or `fixed`, allocated once (the
    rows of a `CacheBlock`), where needing more rows is an error."""

    reserve: int = 0
    fixed: bool = False

    def capacity(self, needed: int, current: int) -> int:
        """The rows to allocate for `needed` rows when `current` are allocated (0: none yet)."""
        if self.fixed:
            raise RuntimeError(f"a cache of a block allocated once needs {needed} rows but holds {current}: "
                               "allocate the block with more rows")
        return bucketed(max(needed + self.reserve, 2 * current))


class MemoryCache:
    def __init__(
        self,
        num_layers: int,
        rotate: Rotate,
        state: ScheduleState | None = None,
        keys: list[torch.Tensor] | None = None,
        values: list[torch.Tensor] | None = None,
        functional: bool = False,
        allocation: Allocation | None = None,
    ) -> None:
        self.num_layers = num_layers
        self.rotate = rotate
        self.state = state or ScheduleState()
        self.keys: list[torch.Tensor | None] = list(keys) if keys is not None else [None] * num_layers
        self.values: list[torch.Tensor | None] = list(values) if values is not None else [None] * num_layers
        self.functional = functional
        self.allocation = allocation or Allocation()

    @classmethod
    def continuing(cls, keys: list[torch.Tensor], values: list[torch.Tensor], state: ScheduleState, rotate: Rotate,
                   device: torch.device, functional: bool = False, reserve: int = 0) -> MemoryCache:
        """A working copy of a memory's keys and values [B, H_kv, M, d] per layer on `device`, with room
        for `reserve` more rows (at least one); the memory itself is never written."""
        copies_k, copies_v = [], []
        for k, v in zip(keys, values, strict=True):
            shape = (*k.shape[:2], continuing_capacity(k.shape[2], reserve), k.shape[3])
            new_k = k.new_zeros(shape, device=device)  # zeros: a decoding step reads the whole buffer
            new_v = v.new_zeros(shape, device=device)
            new_k[:, :, : k.shape[2]] = k
            new_v[:, :, : v.shape[2]] = v
            copies_k.append(new_k)
            copies_v.append(new_v)
        return cls(len(keys), rotate, state=state, keys=copies_k, values=copies_v, functional=functional,
                   allocation=Allocation(reserve))

    @property
    def length(self) -> int:
        return self.state.cache_length

    def _functional_for(self, tensor: torch.Tensor) -> bool:
        return self.functional or (torch.is_grad_enabled() and tensor.requires_grad)

    # -- writing ----------------------------------------------------------------------
    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               cache_kwargs: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The write path, as transformers' `Cache.update`: append a step's `[B, H_kv, n, d]` keys (rotated to
        their positions) and values to layer `layer_idx`, and return the keys and values the step attends
        over, the valid rows `[B, H_kv, length + n, d]`. `cache_kwargs` is transformers' (nothing is read
        from it: keys arrive rotated). A decoding step over whole buffers writes its rows in place
        (`WholeBufferStep`), so that its shapes stay the same token after token."""
        keys, values, layer = key_states, value_states, layer_idx
        start, n = self.length, keys.shape[2]
        old_k, old_v = self.keys[layer], self.values[layer]
        if self._functional_for(keys) or self._functional_for(values):
            new_k = keys if old_k is None or start == 0 else torch.cat([old_k[:, :, :start], keys], dim=2)
            new_v = values if old_v is None or start == 0 else torch.cat([old_v[:, :, :start], values], dim=2)
        else:
            new_k = self._with_capacity(old_k, keys, start + n, start)
            new_v = self._with_capacity(old_v, values, start + n, start)
            new_k[:, :, start : start + n] = keys
            new_v[:, :, start : start + n] = values
        self.keys[layer], self.values[layer] = new_k, new_v
        return new_k[:, :, : start + n], new_v[:, :, : start + n]

    def ensure_capacity(self, needed: int) -> int | None:
        """Grow every layer's buffers (by doubling, never by a row) to hold `needed` rows before a step
        runs; the capacity, or None while nothing is allocated (the first write allocates)."""
        if self.keys[0] is None:
            return None
        for layer in range(self.num_layers):
            self.keys[layer] = self._with_capacity(self.keys[layer], self.keys[layer], needed, self.length)
            self.values[layer] = self._with_capacity(self.values[layer], self.values[layer], needed, self.length)
        return self.keys[0].shape[2]

    def _with_capacity(self, buffer: torch.Tensor | None, like: torch.Tensor, needed: int, keep: int) -> torch.Tensor:
        if buffer is not None and buffer.shape[2] >= needed and buffer.shape[:2] == like.shape[:2]:
            return buffer
        capacity = self.allocation.capacity(needed, buffer.shape[2] if buffer is not None else 0)
        # zeros, not garbage: a decoding step attends over the whole buffer with a mask, and a masked
        # row must still be finite (0 * NaN would leak into the output)
        grown = like.new_zeros(like.shape[0], like.shape[1], capacity, like.shape[3])
        if buffer is not None and keep:
            grown[:, :, :keep] = buffer[:, :, :keep]
        return grown

    # -- window bookkeeping -----------------------------------------------------------------
    def mark_written(self, state: ScheduleState) -> None:
        """Stand at `state` after a piece written to the cache (one that completes no window; `compact`
        ends a window)."""
        self.state = state

    def compact(self, entries: int, memory_rows: torch.Tensor, shift: torch.Tensor, new_state: ScheduleState) -> None:
        """Turn the complete window's memory rows into memory entries, drop its raw rows, and stand at
        `new_state`.

        `entries` is the count of memory entries before the window; `memory_rows[j]` [m] is memory
        token j's row in the window; it becomes entry `entries + j`, its key rotated by `shift[j]`
        [m] (`j - memory_rows[j]`). Both are the schedule's own tables (`compaction_rows`), so a
        window's compaction builds no index on the host; the moved keys of every layer are rotated
        in one call (the same elementwise products as layer by layer).
        """
        count = memory_rows.shape[0]
        source = memory_rows + entries  # [m]
        moved_k = [k.index_select(2, source) for k in self.keys]  # per layer [B, H_kv, m, d]
        moved_v = [v.index_select(2, source) for v in self.values]
        batch = moved_k[0].shape[0]
        moved_k = list(self.rotate(torch.cat(moved_k), shift).split(batch))  # [L * B, H_kv, m, d] rotated
        for layer in range(self.num_layers):
            k, v = self.keys[layer], self.values[layer]
            if self._functional_for(moved_k[layer]) or self._functional_for(moved_v[layer]):
                self.keys[layer] = torch.cat([k[:, :, :entries], moved_k[layer]], dim=2)
                self.values[layer] = torch.cat([v[:, :, :entries], moved_v[layer]], dim=2)
            else:
                k[:, :, entries : entries + count] = moved_k[layer]
                v[:, :, entries : entries + count] = moved_v[layer]
        self.state = new_state

    # -- export -------------------------------------------------------------------------
    def export(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Exactly-sized copies of every layer's keys and values."""
        n = self.length
        keys = [k[:, :, :n].clone() for k in self.keys]
        values = [v[:, :, :n].clone() for v in self.values]
        return keys, values


def continuing_capacity(rows: int, reserve: int) -> int:
    """The rows of a working copy of a memory of `rows` rows with room for `reserve` more (at least one)."""
    return bucketed(rows + max(reserve, 1))


def bucketed(rows: int) -> int:
    """`rows` rounded up to a whole number of `CAPACITY_BUCKET`s."""
    return -(-rows // CAPACITY_BUCKET) * CAPACITY_BUCKET


@dataclass
class CacheBlock:
    """Several prompts' caches as rows of one buffer per layer, `[P, H_kv, C, d]`, allocated once at a
    capacity C the whole decode fits in: each prompt's `MemoryCache` (its own schedule state) is a view
    of one row of every layer's buffer, and never grows (`Allocation(fixed=True)`)."""

    keys: list[torch.Tensor]  # per layer [P, H_kv, C, d]
    values: list[torch.Tensor]
    caches: list[MemoryCache]

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    @classmethod
    def allocate(cls, num_prompts: int, shape: tuple[int, int, int], rotate: Rotate, num_layers: int,
                 dtype: torch.dtype, device: torch.device, state: ScheduleState | None = None,
                 first: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None) -> CacheBlock:
        """Zeroed buffers [P, H_kv, C, d] per layer (`shape` = (H_kv, C, d)), every prompt's row starting with
        `first`'s keys and values (a memory's, [1, H_kv, M, d] per layer, at `state`) where given."""
        keys, values = [], []
        for layer in range(num_layers):
            layer_keys = torch.zeros((num_prompts, *shape), dtype=dtype, device=device)  # zeros: masked rows finite
            layer_values = torch.zeros((num_prompts, *shape), dtype=dtype, device=device)
            if first is not None:
                rows = first[0][layer].shape[2]
                layer_keys[:, :, :rows] = first[0][layer].to(device)
                layer_values[:, :, :rows] = first[1][layer].to(device)
            keys.append(layer_keys)
            values.append(layer_values)
        caches = [MemoryCache(num_layers, rotate, state=state, keys=[k[p : p + 1] for k in keys],
                              values=[v[p : p + 1] for v in values], allocation=Allocation(fixed=True))
                  for p in range(num_prompts)]
        return cls(keys, values, caches)


# -- the step contexts: how a step's rows are written to the cache and attend over it ----------
@dataclass
class ValidRowsStep:
    """A piece of a window over its cache's valid rows: the keys `[memory entries | window so far | these
    rows]`, which of them each row sees as `seen` says (a prefix and a window mask)."""

    cache: MemoryCache
    seen: KeysSeen
    rows: RawMemoryRows | None = None
    implementation: str = "sdpa"
    dtype: torch.dtype | None = None

    # Never compiled: the cache write and the number of keys change from window to window, so compiled
    # layers (memory/compiled.py) break their graph here. The layer's index is read here, not in the
    # compiled code, so that one graph serves every layer; the output leaves contiguous, one layout.
    @torch.compiler.disable
    def attend(self, attention: MemoryAttention, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        keys, values = self.cache.update(key, value, attention.layer_idx)  # [B, H_kv, S, d]
        kernel = KERNELS[self.implementation]
        return kernel(query, keys, values, self.seen, attention.scaling, attention.kv_groups).contiguous()


@dataclass
class WholeBufferStep:
    """A decoding step over whole cache buffers: every field a tensor or a constant of the model, so that
    its shapes stay the same token after token and it compiles whole."""

    keys: list[torch.Tensor]  # per layer [B, H_kv, C, d], written in place
    values: list[torch.Tensor]
    write_rows: torch.Tensor  # [T] the buffer rows of the step's rows; [B, T] each sequence its own
    seen: KeysSeen  # its `bias` [T, C], or [B, T, C] each sequence its own
    rows: RawMemoryRows | None  # which of the T rows is the memory token (None: one raw row)
    dtype: torch.dtype
    implementation: str = "sdpa"

    def attend(self, attention: MemoryAttention, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        keys, values, write_rows = self.keys[attention.layer_idx], self.values[attention.layer_idx], self.write_rows
        if write_rows.dim() == 1:
            keys.index_copy_(2, write_rows, key)
            values.index_copy_(2, write_rows, value)
        else:  # each sequence writes its own rows, by indexing (torch's CPU `scatter_` is ~100x slower in bf16)
            batch = torch.arange(key.shape[0], device=key.device)[:, None]  # [B, 1]
            keys[batch, :, write_rows] = key.transpose(1, 2)  # [B, T, H_kv, d] at (sequence, row)
            values[batch, :, write_rows] = value.transpose(1, 2)
        kernel = KERNELS[self.implementation]
        return kernel(query, keys, values, self.seen, attention.scaling, attention.kv_groups)


@dataclass
class PackedSequencesStep:
    """Several sequences' steps packed into one row axis (batch 1). Sequence `i` owns rows
    `bounds[i]:bounds[i + 1]` and its own context: everything row-wise (norms, projections, MLP) runs once
    over all rows, attention per sequence exactly as it would alone. `rows` marks the memory tokens among
    all packed rows (None: all raw)."""

    steps: list[ValidRowsStep | WholeBufferStep]
    bounds: list[int]
    rows: RawMemoryRows | None = None
    dtype: torch.dtype | None = None

    @torch.compiler.disable  # as `ValidRowsStep.attend`
    def attend(self, attention: MemoryAttention, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor) -> torch.Tensor:
        outputs = []
        for step, start, end in zip(self.steps, self.bounds[:-1], self.bounds[1:], strict=True):
            part = slice(start, end)
            outputs.append(step.attend(attention, query[:, :, part].contiguous(), key[:, :, part].contiguous(),
                                       value[:, :, part]))
        return torch.cat(outputs, dim=1)


@dataclass
class StepRows:
    """A step's rows as the layers take them: raw rows with the piece's memory tokens inserted."""

    hidden: torch.Tensor  # [B, T, D] input states, raw and memory rows in sequence order
    positions: torch.Tensor  # [1, T]
    rows: RawMemoryRows | None  # which rows are memory tokens (None: all raw)
    context: ValidRowsStep | WholeBufferStep

    @property
    def num_rows(self) -> int:
        return self.hidden.shape[1]

    @property
    def num_memory(self) -> int:
        return 0 if self.rows is None else int(self.rows.memory.numel())

    def raw(self, hidden: torch.Tensor) -> torch.Tensor:
        """The raw rows [B, n, ...] of this piece's rows [B, T, ...]."""
        return self.rows.split(hidden)[0] if self.rows is not None else hidden


@dataclass
class PackedStepRows:
    """Several sequences' step rows packed along one row axis (batch 1), ready for the layers.

    Sequences that continue one memory differ in length, so each reaches its memory-token rows and its
    window's end at its own step, at its own positions: instead of padding them to one shape, their rows are
    packed, each layer runs once over all rows, and attention runs per sequence over its own cache
    (`PackedSequencesStep`). Given `sequence_rows` (an exact batch), every linear layer rounds each
    sequence's rows as alone (`project`, memory/attention.py): a reply decoded in a batch then equals the
    one decoded alone token for token. Without it, each matrix product is shared by all rows (faster where
    the per-sequence products are slow), and a reply can differ where two tokens (nearly) tie."""

    parts: list[StepRows]
    bounds: list[int]  # sequence i owns packed rows bounds[i]:bounds[i + 1]
    hidden: torch.Tensor  # [1, sum T_i, D]
    positions: torch.Tensor  # [1, sum T_i]
    position_embeddings: tuple[torch.Tensor, torch.Tensor]  # cos, sin [1, sum T_i, d]
    context: PackedSequencesStep

    @classmethod
    def of(cls, parts: list[StepRows], rotary: nn.Module, dtype: torch.dtype) -> PackedStepRows:
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
        rows = RawMemoryRows.of(raw_rows, memory_rows, device=device) if memory_rows else None
        context = PackedSequencesStep(steps=[part.context for part in parts], bounds=bounds, rows=rows, dtype=dtype)
        return cls(parts, bounds, hidden, positions, (cos, sin), context)

    def sequence_rows(self, products: ExactProducts) -> SequenceRows:
        """How the packed rows split by sequence, for products that round each one as alone (`project`):
        all rows, and the raw rows and the memory rows where they are projected apart."""
        splits = {self.bounds[-1]: self.bounds}
        if self.context.rows is not None:
            splits = _add_split(splits, _bounds([part.num_rows - part.num_memory for part in self.parts]))
            splits = _add_split(splits, _bounds([part.num_memory for part in self.parts]))
        return SequenceRows(splits, products)

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
