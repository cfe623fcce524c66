"""The one stop-token rule of every local decoding: the memory model's and the local generator's (a
module that imports nothing of memorag, so both packages can use it).

A reply ends at the first end-of-sequence id of the tokenizer, the model's generation
config or the model's config (models disagree on where they declare it; SmolLM2-Instruct
declares its end of turn, `<|im_end|>`, in all three). No other end-of-turn token is
added: neither decoder did before the rule was shared.
"""

from __future__ import annotations

from collections.abc import Iterable


def stop_token_ids(tokenizer, model) -> list[int]:
    """The end-of-sequence ids of `tokenizer`, `model.generation_config` and `model.config`, in that
    order, without repeats (either may be None or lack any of them)."""
    sources = (tokenizer, getattr(model, "generation_config", None), getattr(model, "config", None))
    stops: list[int] = []
    for source in sources:
        for token_id in _as_ids(getattr(source, "eos_token_id", None) if source is not None else None):
            if token_id not in stops:
                stops.append(token_id)
    return stops


def _as_ids(value) -> Iterable[int]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return (int(item) for item in value if item is not None)
    return (int(value),)
