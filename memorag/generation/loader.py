"""Choosing a generator from a spec: None (the memory model's base), a model, or an endpoint."""

from __future__ import annotations

from memorag.runtime.placement import Placement

from .base import Generator, GeneratorError
from .local import LocalGenerator
from .openai import OpenAIGenerator
from .reader_adapter import merge_adapter, plain_copy, reader_name, shared_copy, tuned_refusal_margin

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

    - None (the default): over the embedded memory model, the reader ("embedded"); over any other, its base
      model, sharing its weights (as "memory" always is);
    - "memory": the memory model's base model, sharing its weights;
    - "embedded": the embedded LM with the reader adapter trained for it merged
      (memorag/generation/reader_adapter.py); over the embedded memory model it holds the memory
      model's weights but the adapted projections, which are copies;
    - "embedded-base": the embedded LM as it comes (shared when the memory model is the embedded LM);
    - an http(s) URL: an OpenAI-compatible endpoint (`endpoint_model` names the model;
      without it the first model the server lists is used);
    - anything else: a local transformers model (a folder or a hub id). When
      it names the memory model's own base, that model is shared rather than loaded twice.
      `placement` (default: CUDA when present, else CPU, the checkpoint's dtype) says where
      and in what precision it loads; a shared model stays where the memory model is.
    """
    if is_endpoint(spec):
        return OpenAIGenerator(
            str(spec), endpoint_model, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries,
            context_window=context_window, tokenizer=tokenizer,
        )
    from memorag.runtime.embedded import EMBEDDED_LM, is_embedded_base_lm, is_embedded_lm

    name = None if spec is None else str(spec).strip().lower()
    embedded_memory = memory_model is not None and bool(memory_model.name) and is_embedded_lm(memory_model.name)
    if name is None or name in SHARED_NAMES:
        if memory_model is None:
            raise GeneratorError("no memory model to share: name a generator model or endpoint")
        if name is None and embedded_memory:
            return _shared_reader(memory_model, local_kwargs)
        return LocalGenerator.from_memory_model(memory_model, **local_kwargs)
    placement = placement or Placement.resolve()
    if is_embedded_base_lm(name):
        if embedded_memory:
            return LocalGenerator.from_memory_model(memory_model, **local_kwargs)
        return _load(EMBEDDED_LM, placement, local_kwargs)
    if is_embedded_lm(name):
        if embedded_memory:
            return _shared_reader(memory_model, local_kwargs)
        return _own_reader(_load(EMBEDDED_LM, placement, local_kwargs), placement, local_kwargs)
    if memory_model is not None and str(spec) == memory_model.name:
        return LocalGenerator.from_memory_model(memory_model, **local_kwargs)
    return _load(str(spec), placement, local_kwargs)


def _load(spec: str, placement: Placement, local_kwargs: dict) -> LocalGenerator:
    return LocalGenerator.from_pretrained(spec, device=placement.device, dtype=placement.dtype,
                                          quantize=placement.quantize, **local_kwargs)


_QUANTIZED = ("the embedded reader adapter merges into full-precision weights, and {what} is quantized; drop the "
              "quantization, or use --generator embedded-base (the LM as it comes)")


def _shared_reader(memory_model, local_kwargs: dict) -> LocalGenerator:
    """The reader over the embedded memory model's base: its tensors but the adapted projections."""
    from memorag.runtime.embedded import SHIPPED_READER_DIR

    if getattr(memory_model.base_model.config, "quantization_config", None) is not None:
        raise GeneratorError(_QUANTIZED.format(what="the memory model"))
    writer = LocalGenerator.from_memory_model(memory_model, **_without_margin(local_kwargs))
    return _reader(merge_adapter(shared_copy(memory_model), SHIPPED_READER_DIR), memory_model.tokenizer,
                   local_kwargs, writer, shared=True)


def _own_reader(generator: LocalGenerator, placement: Placement, local_kwargs: dict) -> LocalGenerator:
    """The reader over an embedded LM loaded for the generator alone (the memory model is another)."""
    from memorag.runtime.embedded import SHIPPED_READER_DIR

    if placement.quantize:
        raise GeneratorError(_QUANTIZED.format(what="the generator"))
    writer = LocalGenerator(generator.model, generator.tokenizer, generator.name, **_without_margin(local_kwargs))
    return _reader(merge_adapter(plain_copy(generator.model), SHIPPED_READER_DIR), generator.tokenizer, local_kwargs,
                   writer)


def _without_margin(local_kwargs: dict) -> dict:
    """A reader's settings for its base (the memory writer): the refusal margin is the adapter's alone."""
    return {key: value for key, value in local_kwargs.items() if key != "refusal_margin"}


def _reader(model, tokenizer, local_kwargs: dict, writer: LocalGenerator, shared: bool = False) -> LocalGenerator:
    """The shipped reader over `model` (its adapter merged), with the adapter's tuned refusal margin unless
    `local_kwargs` names one; its name says the adapter (its hash) and the margin, so records of two never mix."""
    from memorag.runtime.embedded import EMBEDDED_READER, SHIPPED_READER_DIR

    margin = local_kwargs.get("refusal_margin")
    margin = tuned_refusal_margin(SHIPPED_READER_DIR) if margin is None else margin
    name = reader_name(EMBEDDED_READER, SHIPPED_READER_DIR) + (f"-margin{margin:g}" if margin else "")
    return LocalGenerator(model, tokenizer, name=name, shared=shared, writer=writer,
                          **{**local_kwargs, "refusal_margin": margin})
