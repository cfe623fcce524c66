"""Generators: the model that writes the final answer from retrieved passages.

- `LocalGenerator`: a transformers causal LM on this machine; by default the memory
  model's own base model (`LocalGenerator.from_memory_model`: the same weights, no
  second copy in memory), or any local folder / hub id.
- `OpenAIGenerator`: any OpenAI-compatible chat endpoint (`--generator http://host:port/v1`).

`load_generator` picks one from a command-line style spec.
"""

from .base import Generator, GeneratorError, PromptTokens
from .loader import is_endpoint, load_generator
from .local import LocalGenerator
from .openai import OpenAIGenerator
from .streaming import TextStream

__all__ = [
    "Generator",
    "GeneratorError",
    "LocalGenerator",
    "OpenAIGenerator",
    "PromptTokens",
    "TextStream",
    "is_endpoint",
    "load_generator",
]
