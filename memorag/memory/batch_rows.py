"""The memory model's rows for `memorag.generation.batched.DecodeBatch`: prompts over different memories decoded together.

Each row is a prompt continuing its own memory (or none) in a working cache of its own
(`MemoryCore.new_cache`), so prompts over different corpora share a batch. A row joins by
reading its prompt alone as a window step (as `MemoryModel.generate_ids` reads it, its first
token from its own logits); every later step is one `read_tokens_batch` of one token per row,
with the rows' linear products shared (`exact=False`: a token can differ from the lone
decoding only where two tokens tie within the rounding of that product).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .cache import MemoryCache
from .core import MemoryCore, RatioOf
from .state import Memory


class MemoryRows:
    """Rows of (prompt token ids, memory or None) for the memory model `model`."""

    def __init__(self, model: MemoryCore):
        self.model = model
        self.caches: list[MemoryCache] = []
        self.ratios: list[RatioOf] = []

    def prompt_ids(self, prompt: tuple[Sequence[int], Memory | None]) -> Sequence[int]:
        return prompt[0]

    @torch.inference_mode()
    def add(self, prompt: tuple[Sequence[int], Memory | None], max_new_tokens: int) -> torch.Tensor:
        ids, memory = prompt
        if not ids:
            raise ValueError("the prompt is empty")
        model = self.model
        ratio = model.ratio_function(memory.ratio if memory is not None else model.choose_ratio(len(ids)))
        cache = model.new_cache(memory, reserve=len(ids) + max_new_tokens)
        tokens = torch.tensor([list(ids)], dtype=torch.long, device=model.device)
        last = model.read_tokens_batch([tokens], [cache], [ratio], "window")[0]
        assert last is not None
        self.caches.append(cache)
        self.ratios.append(ratio)
        return model.logits_alone([last])[0][0]

    def remove(self, index: int) -> None:
        self.caches.pop(index)
        self.ratios.pop(index)

    @torch.inference_mode()
    def advance(self, tokens: list[int]) -> torch.Tensor:
        model = self.model
        ids = [torch.tensor([[token]], dtype=torch.long, device=model.device) for token in tokens]
        last = model.read_tokens_batch(ids, self.caches, self.ratios, "decode", exact=len(tokens) == 1)
        hidden = torch.cat([states for states in last if states is not None], dim=0)  # [n, D]
        if len(tokens) == 1:
            return model.logits_alone([hidden])[0]
        return model.logits(hidden)
