"""Who made a `Memory`: the identity of a memory model and its settings, and the check that a memory
is used only with the model that made it (docs/memory-model.md, "Memory state")."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import torch
from torch import nn

from .schedule import LAYOUT
from .state import MemoryMismatchError

if TYPE_CHECKING:
    from .model import MemoryModel
    from .state import Memory


class WeightsHash:
    """sha256 of named parameters, recomputed only after one of them changes (in place or replaced)."""

    def __init__(self) -> None:
        self._cached: tuple[tuple, str] | None = None

    def forget(self) -> None:
        self._cached = None

    def of(self, params: dict[str, nn.Parameter]) -> str:
        versions = tuple(p._version for p in params.values()) + tuple(p.data_ptr() for p in params.values())
        if self._cached is None or self._cached[0] != versions:
            digest = hashlib.sha256()
            for name in sorted(params):
                digest.update(name.encode())
                digest.update(params[name].detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
            self._cached = (versions, digest.hexdigest())
        return self._cached[1]


def identity_of(model: MemoryModel) -> dict:
    """What a `Memory` must have been made by to be used with `model`."""
    config = model.base_model.config
    return {
        "base_model": model.name,
        "model_type": config.model_type,
        "num_layers": len(model.layers),
        "hidden_size": config.hidden_size,
        "num_key_value_heads": config.num_key_value_heads,
        "head_dim": next(iter(model.memory_attentions())).head_dim,
        "memory_weights_sha256": model.memory_weights_hash(),
        "memory_config": model.config.to_dict(),
        "layout": LAYOUT,
    }


def check_identity(mine: dict, memory: Memory) -> None:
    """Refuse `memory` unless it was made by a model of identity `mine`, naming every difference."""
    differences = [key for key in sorted(set(mine) | set(memory.identity)) if mine.get(key) != memory.identity.get(key)]
    if differences:
        detail = "; ".join(f"{key}: memory has {memory.identity.get(key)!r}, model has {mine.get(key)!r}"
                           for key in differences)
        raise MemoryMismatchError(
            f"this memory was made by another model or other settings ({detail}); memorize the context "
            "again with this model"
        )
