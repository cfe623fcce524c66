"""One context being memorized, from its text to its `Memory`: what `MemoryModel.memorize` and
`MemoryModel.memorize_batch` share (docs/memory-model.md, "Memorizing").

`MemoryInProgress.start` lays the context out (memorag/prompting/chat_layout.py), chooses its ratio (or takes the
memory's it continues), checks the reach and opens a working cache sized for it; the caller then
feeds its ids window by window (alone, or packed with other contexts' pieces by
`MemoryCore.read_tokens_batch`); `MemoryInProgress.memory` exports the cache as the `Memory`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch

from memorag.prompting.chat_layout import context_ids

from .cache import MemoryCache
from .core import MemoryCore
from .schedule import RatioOf, positions_needed, too_long
from .state import Memory


@dataclass
class MemoryInProgress:
    """A context's ids, the working cache they go into, and what its `Memory` records."""

    ids: list[int]
    input_ids: torch.Tensor  # [1, N] the ids on the model's device, copied there once
    chat: bool  # laid out in the chat template
    ratio: int | None  # the fixed ratio, None under step-random
    ratio_of: RatioOf
    cache: MemoryCache
    previous: Memory | None  # the memory this context continues (never changed)

    @classmethod
    def start(cls, core: MemoryCore, text_or_token_ids, memory: Memory | None = None) -> MemoryInProgress:
        ids, chat = context_ids(core.tokenizer, core.layout, text_or_token_ids,
                                memory.chat if memory is not None else None)
        if not ids:
            raise ValueError("the context is empty; give at least one token")
        total = len(ids) + (memory.num_tokens if memory is not None else 0)
        if memory is None:
            ratio = core.choose_ratio(total)
        else:
            ratio = memory.ratio
            core.check_memory(memory)
        window, smallest = core.config.window, min(core.config.ratios)
        reserve = positions_needed(total, window, ratio or smallest)
        if memory is not None and reserve > core.max_positions:
            raise too_long(core.config, total, ratio or smallest, core.max_positions, core.name)
        cache = core.new_cache(memory, reserve=reserve)
        input_ids = torch.tensor([ids], dtype=torch.long, device=core.device)  # [1, N]
        return cls(ids, input_ids, chat, ratio, core.ratio_function(ratio), cache, memory)

    def memory(self, core: MemoryCore) -> Memory:
        """The memory of everything read (the cache's keys and values, exactly sized copies)."""
        keys, values = self.cache.export()
        previous = self.previous.content_sha256 if self.previous is not None else ""
        return Memory(keys=keys, values=values, state=self.cache.state, identity=core.identity(), ratio=self.ratio,
                      chat=self.chat, content_sha256=chain_hash(previous, self.ids))


def chain_hash(previous: str, ids: list[int]) -> str:
    """Content hash of everything read: chained over calls (`previous` is "" at the start)."""
    return hashlib.sha256((previous + json.dumps(ids)).encode()).hexdigest()
