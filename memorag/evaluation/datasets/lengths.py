"""Lengths of text in tokens.

:class:`LengthCounter` measures text either exactly, with a tokenizer object
(anything with ``encode``: a Hugging Face tokenizer, a tiktoken encoding; or a
callable returning token ids or a count), or approximately, as whitespace words
times ``tokens_per_word`` (default 1.3, about right for English prose under a
Llama/GPT BPE; random hashes, uuids and numbers take several times more real
tokens per word, so use a tokenizer when the length must be exact).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

TOKENS_PER_WORD = 1.3
"""Default words-to-tokens factor of the approximate length (English prose, BPE tokenizers)."""

def count_words(text: str) -> int:
    """Whitespace words."""
    return len(text.split())


def approx_tokens(text: str, tokens_per_word: float = TOKENS_PER_WORD) -> int:
    """Approximate tokens: ``round(whitespace words * tokens_per_word)``."""
    return round(count_words(text) * tokens_per_word)


def count_tokens(tokenizer: Any, text: str) -> int:
    """Exact token count with ``tokenizer`` (no special tokens where the tokenizer allows saying so).

    Accepts an object with ``encode`` (Hugging Face tokenizers, tiktoken
    encodings) or a callable returning a list of ids or an int.
    """
    if hasattr(tokenizer, "encode"):
        for kwargs in ({"add_special_tokens": False, "verbose": False}, {"add_special_tokens": False}, {}):
            try:
                return len(tokenizer.encode(text, **kwargs))
            except TypeError:
                continue
        raise TypeError(f"{type(tokenizer).__name__}.encode(text) failed for every call signature tried")
    if callable(tokenizer):
        result = tokenizer(text)
        if isinstance(result, int):
            return result
        if isinstance(result, dict) and "input_ids" in result:
            return len(result["input_ids"])
        return len(result)
    raise TypeError(f"a tokenizer needs an encode method or must be callable, got {type(tokenizer).__name__}")


_APPROX_PREFIX_CACHE: dict[tuple[int, float], tuple[Sequence[str], list[float]]] = {}


class LengthCounter:
    """Measures text in tokens: exactly with a tokenizer, else approximately from whitespace words.

    ``cost(text)`` is additive over whitespace-joined pieces in approximate mode
    (words times the factor, as a float), so builders can plan lengths piece by
    piece; ``counter(text)`` is the length recorded in an example's ``meta``.
    """

    def __init__(self, tokenizer: Any = None, tokens_per_word: float = TOKENS_PER_WORD) -> None:
        if not tokens_per_word > 0:
            raise ValueError(f"tokens_per_word must be > 0, got {tokens_per_word}")
        self.tokenizer = tokenizer
        self.tokens_per_word = float(tokens_per_word)
        self._prefix_cache: dict[tuple[int, float], tuple[Sequence[str], list[float]]] = {}

    @property
    def exact(self) -> bool:
        return self.tokenizer is not None

    @property
    def unit(self) -> str:
        return "tokens" if self.exact else "approx_tokens"

    def cost(self, text: str) -> float:
        if self.exact:
            return float(count_tokens(self.tokenizer, text))
        return count_words(text) * self.tokens_per_word

    def __call__(self, text: str) -> int:
        if self.exact:
            return count_tokens(self.tokenizer, text)
        return approx_tokens(text, self.tokens_per_word)

    def unit_prefix(self, units: Sequence[str]) -> list[float]:
        """Prefix sums of per-unit costs (``[0, c0, c0 + c1, ...]``) of a long-lived sequence such as
        a filler; cached by identity (approximate costs are shared by all counters with the same factor)."""
        cache = _APPROX_PREFIX_CACHE if not self.exact else self._prefix_cache
        key = (id(units), self.tokens_per_word)
        cached = cache.get(key)
        if cached is not None and cached[0] is units:
            return cached[1]
        prefix = list(itertools.accumulate((self.cost(unit) for unit in units), initial=0.0))
        cache[key] = (units, prefix)
        return prefix

    def describe(self) -> dict[str, Any]:
        """Length settings for an example's ``meta``."""
        if self.exact:
            name = getattr(self.tokenizer, "name_or_path", None) or getattr(self.tokenizer, "name", None)
            return {"length_unit": "tokens", "tokenizer": str(name or type(self.tokenizer).__name__)}
        return {"length_unit": "approx_tokens", "tokens_per_word": self.tokens_per_word}
