"""Choosing a generator from a spec: None (the memory model's base), a model, or an endpoint."""

from __future__ import annotations

from memorag.runtime.placement import Placement

from .base import Generator, GeneratorError
from .local import LocalGenerator
from .openai import OpenAIGenerator

# Names meaning "the memory model's own base model".
SHARED_NAMES = frozenset({"memory", "memory-model", "shared"})


def is_endpoint(spec: str | None) -> bool:
    return spec is not None and str(spec).startswith(("http://", "https://"))


def load_generator(
    spec: str | None = None,
    *,
    memory_model=None,
    endpoint_model: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 120.0,
    max_retries: int = 3,
    context_window: int | None = None,
    tokenizer=None,
    placement: Placement | None = None,
    **local_kwargs,
) -> Generator:
    """The generator named by `spec`.

    - None or "memory": the memory model's base model, sharing its weights;
    - an http(s) URL: an OpenAI-compatible endpoint (`endpoint_model` names the model;
      without it the first model the server lists is used);
    - anything else: a local transformers model (a folder, a hub id or "embedded"). When
      it names the memory model's own base, that model is shared rather than loaded twice.
      `placement` (default: CUDA when present, else CPU, the checkpoint's dtype) says where
      and in what precision it loads; a shared model stays where the memory model is.
    """
    if is_endpoint(spec):
        return OpenAIGenerator(
            str(spec), endpoint_model, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries,
            context_window=context_window, tokenizer=tokenizer,
        )
    if spec is None or str(spec).strip().lower() in SHARED_NAMES or _same_model(spec, memory_model):
        if memory_model is None:
            raise GeneratorError("no memory model to share: name a generator model or endpoint")
        return LocalGenerator.from_memory_model(memory_model, **local_kwargs)
    placement = placement or Placement.resolve()
    return LocalGenerator.from_pretrained(spec, device=placement.device, dtype=placement.dtype,
                                          quantize=placement.quantize, **local_kwargs)


def _same_model(spec: str, memory_model) -> bool:
    if memory_model is None:
        return False
    from memorag.generation.models import EMBEDDED_LM, is_embedded_lm

    if is_embedded_lm(spec):
        return memory_model.name == EMBEDDED_LM
    return str(spec) == memory_model.name
