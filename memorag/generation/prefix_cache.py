"""The key/value cache of a long prompt prefix, computed once and reused by many prompts.

Corpus-in-context puts the same corpus (thousands of tokens) before every query; only
the query at the end changes. `PrefixCache` runs the model once over the prefix tokens
and hands each prompt that starts with them a deep copy of that cache, so a query
costs a forward pass over its own tokens only. A copy (not the cache itself) is given
because generation appends to the cache it is handed.

The cache is keyed by token ids, never by text: a prompt reuses it only when its own
tokens start with exactly the cached ones, so the reply is the one the model gives
without the cache.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from memorag.runtime.cache_argument import cache_kwargs


class PrefixCache:
    """The model's key/value cache over one token prefix (the last one asked for).

    `builds` counts forward passes over a prefix, `reuses` the prompts that got a copy.
    """

    def __init__(self, model):
        self.model = model
        self.token_ids: tuple[int, ...] = ()
        self._cache = None
        self.builds = 0
        self.reuses = 0

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @torch.no_grad()
    def past_for(self, prefix_ids: Sequence[int]):
        """A copy of the cache over `prefix_ids` (built now if it holds another prefix).

        The copy goes to `model.generate` as its cache (`memorag.runtime.cache_argument`) with the whole
        prompt's ids, which then runs the model over the tokens after the prefix only.
        """
        from transformers import DynamicCache

        prefix_ids = tuple(int(token) for token in prefix_ids)
        if not prefix_ids:
            raise ValueError("an empty prefix has nothing to cache")
        if prefix_ids != self.token_ids:
            device = next(self.model.parameters()).device
            cache = DynamicCache(config=self.model.config)
            input_ids = torch.tensor([prefix_ids], device=device)  # [1, P]
            self.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), use_cache=True,
                       **cache_kwargs(cache))
            self.token_ids, self._cache = prefix_ids, cache
            self.builds += 1
        self.reuses += 1
        return copy.deepcopy(self._cache)

    def clear(self) -> None:
        """Release the cached keys and values."""
        self.token_ids, self._cache = (), None


def common_prefix_length(first: Sequence[int], second: Sequence[int]) -> int:
    """How many leading token ids the two sequences share."""
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length
