"""Generators: the model that writes the final answer from retrieved passages.

- `LocalGenerator`: a transformers causal LM on this machine; by default the memory
  model's own base model (`LocalGenerator.from_memory_model`: the same weights, no
  second copy in memory), or any local folder / hub id.
- `OpenAIGenerator`: any OpenAI-compatible chat endpoint (`--generator http://host:port/v1`).

`load_generator` picks one from a command-line style spec.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Generator, GeneratorError, PromptTokens
    from .loader import is_endpoint, load_generator
    from .local import LocalGenerator
    from .openai import OpenAIGenerator
    from .streaming import TextStream

# Each name's module, imported on first use: `memorag.generation.models` (the models by name, which the
# command line reads before any model is loaded) must not load torch through this package.
_HOMES = {"Generator": "base", "GeneratorError": "base", "PromptTokens": "base", "is_endpoint": "loader",
          "load_generator": "loader", "LocalGenerator": "local", "OpenAIGenerator": "openai", "TextStream": "streaming"}

__all__ = ["Generator", "GeneratorError", "LocalGenerator", "OpenAIGenerator", "PromptTokens", "TextStream",
           "is_endpoint", "load_generator"]


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(f"memorag.generation.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'memorag.generation' has no attribute {name!r}")
