"""One context being memorized, from its text to its `Memory`: what `MemoryModel.memorize` and
`MemoryModel.memorize_batch` share (docs/memory-model.md, "Memorizing").

`Reading.start` lays the context out (memory/chat.py), chooses its ratio (or takes the memory's it
continues), checks the reach and opens a working cache sized for it; the caller then feeds its ids
window by window (alone, or packed with other contexts' pieces by memory/batch.py's `feed_batch`);
`Reading.memory` exports the cache as the `Memory`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .cache import MemoryCache
from .chat import context_ids
from .ratios import RatioOf, too_long
from .schedule import positions_needed
from .state import Memory

if TYPE_CHECKING:
    from .model import MemoryModel


@dataclass
class Reading:
    """A context's ids, the working cache they go into, and what its `Memory` records."""

    ids: list[int]
    input_ids: torch.Tensor  # [1, N] the ids on the model's device, copied there once
    chat: bool  # laid out in the chat template
    ratio: int | None  # the fixed ratio, None under step-random
    ratio_of: RatioOf
    cache: MemoryCache
    previous: Memory | None  # the memory this context continues (never changed)

    @classmethod
    def start(cls, model: MemoryModel, text_or_token_ids, memory: Memory | None = None) -> Reading:
        ids, chat = context_ids(model.tokenizer, model.layout, text_or_token_ids, memory)
        if not ids:
            raise ValueError("the context is empty; give at least one token")
        total = len(ids) + (memory.num_tokens if memory is not None else 0)
        if memory is None:
            ratio = model.choose_ratio(total)
        else:
            ratio = memory.ratio
            model.check_memory(memory)
        window, smallest = model.config.window, min(model.config.ratios)
        reserve = positions_needed(total, window, ratio or smallest)
        if memory is not None and reserve > model.max_positions:
            raise too_long(model.config, total, ratio or smallest, model.max_positions, model.name)
        cache = model.new_cache(memory, reserve=reserve)
        input_ids = torch.tensor([ids], dtype=torch.long, device=model.device)  # [1, N]
        return cls(ids, input_ids, chat, ratio, model.ratio_function(ratio), cache, memory)

    def memory(self, model: MemoryModel) -> Memory:
        """The memory of everything read (the cache's keys and values, exactly sized copies)."""
        keys, values = self.cache.export()
        previous = self.previous.content_sha256 if self.previous is not None else ""
        return Memory(keys=keys, values=values, state=self.cache.state, identity=model.identity(), ratio=self.ratio,
                      chat=self.chat, content_sha256=chain_hash(previous, self.ids))


def chain_hash(previous: str, ids: list[int]) -> str:
    """Content hash of everything read: chained over calls (`previous` is "" at the start)."""
    return hashlib.sha256((previous + json.dumps(ids)).encode()).hexdigest()
