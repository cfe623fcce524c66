"""Models by name, in one import: the embedded default models and the memory weights to load.

Two modules do the work, one on each side of the memory model:

- `memorag.runtime.embedded`: the embedded base models (SmolLM2-135M-Instruct, all-MiniLM-L6-v2) found
  offline in pip packages (`resolve_lm`, `resolve_embedder`, `EMBEDDED_LM`, `cache_dir`, ...), and
  the names memory weights go by (`AUTO_MEMORY`, `SHIPPED_MEMORY_DIR`, ...). It imports nothing
  of `memorag`: the memory model, the command line and the configs all read it.
- `memorag.memory.checkpoint`: the memory weights a name, a folder or a hub id stands for, found
  and verified (`memory_weights_for`, `resolve_memory_weights`, `verify_memory_weights`, ...);
  it needs the memory model's file format, so it lives in `memorag.memory`.

This module re-exports both, so `from memorag.generation.models import resolve_lm, memory_weights_for`
keeps working; the second kind is imported on first use (as `memorag` does with the pipeline),
so `import memorag.generation.models` stays light.
"""

from __future__ import annotations

from memorag.runtime.embedded import (
    AUTO_MEMORY,
    CONVERSION_FORMAT,
    EMBEDDED_EMBEDDER,
    EMBEDDED_LM,
    MEMORY_WEIGHT_NAMES,
    SHIPPED_MEMORY,
    SHIPPED_MEMORY_DIR,
    UNTRAINED_MEMORY,
    MissingModelError,
    cache_dir,
    convert_gguf_to_hf,
    describe_memory_weights,
    embedded_smollm2_dir,
    is_embedded_embedder,
    is_embedded_lm,
    is_memory_weights_id,
    is_memory_weights_name,
    memory_weights_are_untrained,
    resolve_embedder,
    resolve_lm,
    smollm2_gguf_path,
)

# Names of `memorag.memory.checkpoint`, imported on first use (they load torch).
_MEMORY_WEIGHTS_NAMES = ("MemoryWeightsUnavailableError", "memory_weights_for", "resolve_memory_weights",
                         "shipped_memory_weights", "verify_memory_weights")

__all__ = [
    "AUTO_MEMORY",
    "CONVERSION_FORMAT",
    "EMBEDDED_EMBEDDER",
    "EMBEDDED_LM",
    "MEMORY_WEIGHT_NAMES",
    "SHIPPED_MEMORY",
    "SHIPPED_MEMORY_DIR",
    "UNTRAINED_MEMORY",
    "MissingModelError",
    "cache_dir",
    "convert_gguf_to_hf",
    "describe_memory_weights",
    "embedded_smollm2_dir",
    "is_embedded_embedder",
    "is_embedded_lm",
    "is_memory_weights_id",
    "is_memory_weights_name",
    "memory_weights_are_untrained",
    "resolve_embedder",
    "resolve_lm",
    "smollm2_gguf_path",
    *_MEMORY_WEIGHTS_NAMES,
]


def __getattr__(name: str):
    if name in _MEMORY_WEIGHTS_NAMES:
        from memorag.memory import checkpoint

        return getattr(checkpoint, name)
    raise AttributeError(f"module 'memorag.generation.models' has no attribute {name!r}")
