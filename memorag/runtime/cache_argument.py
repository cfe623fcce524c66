"""The name under which transformers passes a KV cache to `generate` and a model's `forward`.

transformers 5.24 renamed the argument from `past_key_values` to `cache` (in `generate`,
`forward`, `prepare_inputs_for_generation` and the model outputs), keeping the old name as a
deprecated alias that `generate` no longer forwards to a custom model's own `forward`. The
installed version is read from its public output class, whose fields name the argument, so
every call site here passes the cache under the name that version documents. Imports
nothing of memorag.
"""

from __future__ import annotations

import dataclasses

from transformers.modeling_outputs import CausalLMOutputWithPast

_FIELDS = {field.name for field in dataclasses.fields(CausalLMOutputWithPast)}

#: the keyword that carries a cache in this transformers (`cache` from 5.24, `past_key_values` before)
CACHE_ARGUMENT = "cache" if "cache" in _FIELDS else "past_key_values"

#: every name a cache may arrive under (a caller may use either; only one is ever given)
CACHE_NAMES = ("cache", "past_key_values")


def cache_kwargs(cache) -> dict:
    """`{CACHE_ARGUMENT: cache}`, or nothing when there is no cache: splat into `generate` or `forward`."""
    return {} if cache is None else {CACHE_ARGUMENT: cache}


def pop_cache(kwargs: dict):
    """Remove and return the cache from `kwargs`, whichever name carries it (None if none does)."""
    found = [kwargs.pop(name) for name in CACHE_NAMES if name in kwargs]
    found = [cache for cache in found if cache is not None]
    if len(found) > 1:
        raise ValueError("a cache was given twice, as both `cache` and `past_key_values`; give one")
    return found[0] if found else None
