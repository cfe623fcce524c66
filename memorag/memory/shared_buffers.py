"""Several prompts' caches as rows of one buffer per layer (docs/memory-model.md, "Decoding").

`stacked_caches`: for an eager batch (memory/batch.py), each prompt's cache exactly as alone, its
rows of the buffers stacked so that a round's attention runs in one call (`StackedStep`,
memory/buffer_step.py). `SharedBuffers`, the rest of this module: several prompts decoded over one
memory as one batch through the compiled step.

Prompts over one memory differ in length, so each reaches its memory-token rows and its
window's end at its own token: their caches cannot share one schedule. Here each prompt keeps
its own `MemoryCache` (its own schedule state, compacted when its own window completes), but
the caches' buffers are rows of one buffer per layer, `[P, H_kv, C, d]`, allocated once at a
capacity the whole decode fits in (it never grows, so no cache ever leaves it). A decoding
round is then one step over all P prompts, each with its own positions, buffer rows and bias
(`BufferStep` with per-sequence `write_rows` [P, T] and `bias` [P, T, C]):

- T is 2 when any prompt brings a memory token this round, else 1. A prompt whose piece has
  one row fewer (or that reads nothing this round: it has finished) fills the round with
  placeholder rows: written past its cache's length (never committed, overwritten by its next
  real row), each seeing what its raw row sees and itself (so every row's softmax has a key),
  its output ignored. Row 1, when T is 2, is always projected as a memory row.
- every shape is the same round after round (P, T in {1, 2}, C), so the step compiles into two
  graphs and, on CUDA with `mode="reduce-overhead"`, replays as CUDA graphs, for the batch as
  for one prompt.

Each linear layer sees the P prompts' rows together (shared matrix products, as
`exact=False` in memory/batch.py): a greedy reply can differ from the prompt's reply alone
where two tokens (nearly) tie. `MemoryModel.generate_ids_batch(..., exact=False)` on a model
whose decoding is compiled decodes this way; with `exact=True` the prompts go through the
compiled step one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import torch

from .attention import RowSplit, bucket_bias
from .buffer_step import BufferStep
from .cache import MemoryCache, bucketed, continuing_capacity
from .schedule import ScheduleState

if TYPE_CHECKING:
    from .model import MemoryModel
    from .state import Memory
    from .step import StepInput


class SharedBuffers:
    """The P prompts' caches, each a view of one row of every layer's shared buffers."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], caches: list[MemoryCache]):
        self.keys = keys  # per layer [P, H_kv, C, d]
        self.values = values
        self.caches = caches
        for cache in caches:
            cache.shared = self

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    @classmethod
    def allocate(cls, model: MemoryModel, memory: Memory | None, num_prompts: int, new_tokens: int) -> SharedBuffers:
        """Caches for `num_prompts` prompts continuing `memory` (or from nothing), with room for `new_tokens`
        raw tokens each (its prompt and its reply) and the memory tokens among them."""
        if memory is not None:
            model.check_memory(memory)
            state, first = memory.state, (memory.keys, memory.values)
            kv_heads, head_dim, dtype = memory.keys[0].shape[1], memory.keys[0].shape[3], memory.keys[0].dtype
        else:
            attention = next(model.memory_attentions())
            config = model.base_model.config
            state, first = ScheduleState(), None
            kv_heads = getattr(config, "num_key_value_heads", config.num_attention_heads)
            head_dim, dtype = attention.head_dim, model.base_dtype
        # every raw token may bring a memory token (ratio 1), and a round writes two rows past the last one
        capacity = bucketed(state.cache_length + 2 * new_tokens + 2)
        keys, values = _stacked_buffers(model, first, num_prompts, (kv_heads, capacity, head_dim), dtype)
        caches = [MemoryCache(len(keys), model.rotate, state=state, keys=[k[p : p + 1] for k in keys],
                              values=[v[p : p + 1] for v in values]) for p in range(num_prompts)]
        return cls(keys, values, caches)

    def serves(self, inputs: Sequence[StepInput]) -> bool:
        """Whether `inputs` are one decoding round of these prompts: one raw token each, in place."""
        return (not torch.is_grad_enabled() and len({id(item.cache) for item in inputs}) == len(inputs)
                and all(item.cache.shared is self and item.piece.num_raw == 1 and item.input_ids.shape[0] == 1
                        for item in inputs))

    def round(self, model: MemoryModel, inputs: Sequence[StepInput], grouped: bool
              ) -> tuple[torch.Tensor, torch.Tensor, BufferStep, list[int]]:
        """One decoding round's rows (see the module's docstring): the input states [P, T, D], positions [P, T],
        the step's context and, per input, its prompt's row of the batch (whose row 0 is its raw row's output).
        `grouped`: the base has fewer key/value heads than query heads. `MemoryModel.step` runs the layers over
        them and commits each input's piece."""
        first = self.keys[0]
        for index, cache in enumerate(self.caches):
            if cache.keys[0].data_ptr() != first[index].data_ptr():
                raise RuntimeError("a shared decoding cache left its buffers (it grew): allocate more rows")
        member = {id(item.cache): item for item in inputs}
        rows = 2 if any(item.piece.num_memory for item in inputs) else 1
        device, dtype, capacity = model.device, model.base_dtype, self.capacity
        ids, written, biases = [], [], []
        for cache in self.caches:
            item = member.get(id(cache))
            length = cache.length
            if length + 2 > capacity:
                raise RuntimeError("a shared decoding cache is full: allocate more rows")
            own = [length + t for t in range(rows)]  # buffer rows, which are also positions (rotated keys)
            if item is None:  # nothing read this round: placeholder rows, each seeing itself alone
                bias = torch.full((rows, capacity), float("-inf"), dtype=dtype, device=device)
                bias[torch.arange(rows, device=device), torch.tensor(own, device=device)] = 0
                ids.append(0)
            else:
                piece = item.piece
                bias = bucket_bias(model.config.attention, piece.ratio, piece.num_entries, piece.rows_before,
                                   piece.num_rows, capacity, device, dtype)  # [T_i, C]
                if piece.num_rows < rows:  # a raw row alone: a placeholder row that sees what it sees, and itself
                    placeholder = bias[:1].clone()
                    placeholder[0, length + 1] = 0
                    bias = torch.cat([bias, placeholder])
                ids.append(item.input_ids[0, 0])
            written.append(own)
            biases.append(bias)
        input_ids = torch.stack([torch.as_tensor(token, device=device) for token in ids])[:, None]  # [P, 1]
        hidden = model.embed_tokens(input_ids)  # [P, 1, D]
        split = None
        if rows == 2:
            split = _raw_then_memory(torch.device(device))
            memory_rows = model.memory_embedding.to(hidden.dtype).expand(hidden.shape[0], 1, -1)
            hidden = split.merge(hidden, memory_rows)  # [P, 2, D]
        positions = torch.tensor(written, device=device)  # [P, T]
        context = BufferStep(self.keys, self.values, positions, torch.stack(biases), split, dtype, grouped)
        index = {id(cache): row for row, cache in enumerate(self.caches)}
        return hidden, positions, context, [index[id(item.cache)] for item in inputs]


def stacked_caches(model: MemoryModel, memory: Memory | None, reserves: Sequence[int]) -> list[MemoryCache] | None:
    """Working caches over `memory` for a batch of prompts decoded eagerly (memory/batch.py), each of the
    capacity it gets alone (`MemoryModel.new_cache` with its `reserves[i]`), as rows of one buffer per layer,
    so that a round in which every prompt brings as many rows attends in one call over all of them
    (`StackedStep`, memory/buffer_step.py), each prompt exactly as alone. None (separate caches) where the
    capacities differ, without a memory, for one prompt, or off the CPU (where a batched attention
    kernel may round otherwise than a lone one)."""
    if memory is None or len(reserves) < 2 or model.device.type != "cpu":
        return None
    rows = memory.keys[0].shape[2]
    capacities = {continuing_capacity(rows, reserve) for reserve in reserves}  # each as alone
    if len(capacities) != 1:
        return None
    model.check_memory(memory)
    first = memory.keys[0]
    keys, values = _stacked_buffers(model, (memory.keys, memory.values), len(reserves),
                                    (first.shape[1], capacities.pop(), first.shape[3]), first.dtype)
    return [MemoryCache(len(keys), model.rotate, state=memory.state, keys=[k[p : p + 1] for k in keys],
                        values=[v[p : p + 1] for v in values], reserve=reserve) for p, reserve in enumerate(reserves)]


def _stacked_buffers(model: MemoryModel, first: tuple[list[torch.Tensor], list[torch.Tensor]] | None,
                     num_prompts: int, shape: tuple[int, int, int], dtype: torch.dtype
                     ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per layer, zeroed key and value buffers [P, H_kv, C, d] (`shape` = (H_kv, C, d)), every prompt's row
    starting with `first`'s keys and values (a memory's, [1, H_kv, M, d] per layer) where given."""
    keys, values = [], []
    for layer in range(len(model.layers)):
        layer_keys = torch.zeros((num_prompts, *shape), dtype=dtype, device=model.device)  # zeros: masked rows stay finite
        layer_values = torch.zeros((num_prompts, *shape), dtype=dtype, device=model.device)
        if first is not None:
            rows = first[0][layer].shape[2]
            layer_keys[:, :, :rows] = first[0][layer].to(model.device)
            layer_values[:, :, :rows] = first[1][layer].to(model.device)
        keys.append(layer_keys)
        values.append(layer_values)
    return keys, values


@lru_cache(maxsize=4)
def _raw_then_memory(device: torch.device) -> RowSplit:
    """The row split of a round that brings memory rows: row 0 raw, row 1 memory (built once per device)."""
    with torch.inference_mode(False), torch.no_grad():
        return RowSplit.of([0], [1], device=device)

