"""`Memory`: the memory of one context, as a value that can be saved and reloaded, and who made it.

On disk a memory is a directory with `memory.safetensors` (per layer, the keys and
values of the memory entries and of the current window's raw rows) and
`manifest.json` (format version, the identity of the model and settings that made
it, the scheduler state, a hash of the content read and a hash of the tensor file).
Loading checks all of it; using it with another model or other settings is refused
(`identity_of` says what a model is, `check_identity` refuses a memory another one made).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from memorag.storage.io import atomic_directory, is_saved, read_json_manifest, sha256_file

from .config import MemoryConfig
from .schedule import LAYOUT, ScheduleState

FORMAT = "memorag-memory"
FORMAT_VERSION = 1
TENSORS = "memory.safetensors"
MANIFEST = "manifest.json"


class MemoryMismatchError(ValueError):
    """A memory was made by another model or other settings."""


class MemoryFileError(ValueError):
    """A saved memory is missing, truncated, corrupt or not a memory at all."""


@dataclass
class Memory:
    keys: list[torch.Tensor]  # per layer [B, H_kv, M + window raw rows, d], rotated
    values: list[torch.Tensor]
    state: ScheduleState
    identity: dict = field(default_factory=dict)  # MemoryModel.identity() of the model that made it
    ratio: int | None = None  # the fixed ratio used (None: ratio drawn per window)
    chat: bool = False  # the context was laid out as the start of a chat user turn
    content_sha256: str = ""  # of the token ids read

    @property
    def num_tokens(self) -> int:
        """Raw tokens read."""
        return self.state.num_tokens

    @property
    def num_entries(self) -> int:
        """Memory entries per layer (compacted windows)."""
        return self.state.num_entries

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def manifest(self) -> dict:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "identity": self.identity,
            "state": self.state.to_dict(),
            "ratio": self.ratio,
            "chat": self.chat,
            "content_sha256": self.content_sha256,
            "num_layers": len(self.keys),
            "dtype": str(self.keys[0].dtype).removeprefix("torch.") if self.keys else None,
        }

    def save(self, path: str | Path) -> Path:
        """Write the memory as a directory, atomically (a crash never leaves half a memory)."""
        tensors = {}
        for index, (k, v) in enumerate(zip(self.keys, self.values, strict=True)):
            tensors[f"keys.{index}"] = k.detach().to("cpu").contiguous()
            tensors[f"values.{index}"] = v.detach().to("cpu").contiguous()
        with atomic_directory(path, replaceable=lambda d: is_saved(d, MANIFEST, FORMAT)) as staging:
            save_file(tensors, str(staging / TENSORS))
            manifest = self.manifest()
            manifest["tensors_sha256"] = sha256_file(staging / TENSORS)
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        return Path(path)

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> Memory:
        """Read a memory saved by `save`, verifying its format and integrity."""
        root = Path(path)
        manifest_path, tensors_path = root / MANIFEST, root / TENSORS
        if not root.is_dir() or not manifest_path.is_file() or not tensors_path.is_file():
            raise MemoryFileError(
                f"{root} is not a saved memory (expected a directory with {MANIFEST} and {TENSORS}); "
                "write one with Memory.save or `memorag memorize`"
            )
        manifest = read_json_manifest(manifest_path, FORMAT, FORMAT_VERSION, MemoryFileError)
        missing = {"identity", "state", "ratio", "chat", "content_sha256", "num_layers", "tensors_sha256"} - set(manifest)
        if missing:
            raise MemoryFileError(f"{manifest_path} lacks {sorted(missing)}; the memory is corrupt: memorize the "
                                  "context again")
        actual = sha256_file(tensors_path)
        if actual != manifest.get("tensors_sha256"):
            raise MemoryFileError(
                f"{tensors_path} is truncated or corrupt (sha256 {actual[:12]}..., the manifest expects "
                f"{str(manifest.get('tensors_sha256'))[:12]}...); memorize the context again"
            )
        tensors = load_file(str(tensors_path), device=str(device))
        layers = int(manifest["num_layers"])
        try:
            keys = [tensors[f"keys.{i}"] for i in range(layers)]
            values = [tensors[f"values.{i}"] for i in range(layers)]
        except KeyError as error:
            raise MemoryFileError(f"{tensors_path} lacks tensor {error}; the memory is corrupt") from error
        try:
            state = ScheduleState.from_dict(manifest["state"])
        except (TypeError, KeyError, ValueError) as error:
            raise MemoryFileError(f"{manifest_path} has an unreadable state ({error}); the memory is corrupt: "
                                  "memorize the context again") from error
        if any(k.shape[2] != state.cache_length for k in keys):
            raise MemoryFileError(f"{tensors_path} does not match its manifest's length {state.cache_length}")
        return cls(
            keys=keys,
            values=values,
            state=state,
            identity=manifest["identity"],
            ratio=manifest["ratio"],
            chat=bool(manifest["chat"]),
            content_sha256=manifest["content_sha256"],
        )


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


def identity_of(name: str, base_config, num_layers: int, head_dim: int, weights_sha256: str,
                config: MemoryConfig) -> dict:
    """What a `Memory` must have been made by to be used with a model: its base (`name`, the transformers
    `base_config`, its layer count and head size), its memory weights' hash and its settings."""
    return {
        "base_model": name,
        "model_type": base_config.model_type,
        "num_layers": num_layers,
        "hidden_size": base_config.hidden_size,
        "num_key_value_heads": base_config.num_key_value_heads,
        "head_dim": head_dim,
        "memory_weights_sha256": weights_sha256,
        "memory_config": asdict(config),
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
