"""Memory weights on disk: the memory parameters only, plus the settings that go with them.

A directory with `memory_weights.safetensors` (the memory embedding and each layer's
memory projections, nothing of the frozen base) and `memory_config.json` (format
version, the layout the weights were trained for, the `MemoryConfig`, the base model's
identity and a hash of the weights). Weights trained under one layout give wrong output
under another, so a checkpoint of another layout is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import load_file, save_file

from memorag.io import atomic_directory, is_saved, read_json_manifest, sha256_file

from .config import MemoryConfig
from .lowrank import describe_projections, match_projections
from .schedule import LAYOUT

if TYPE_CHECKING:
    from .model import MemoryModel

FORMAT = "memorag-memory-weights"
FORMAT_VERSION = 2  # 2: the interleave layout, recorded as "layout"; 1: memory tokens in a pass after the window
WEIGHTS = "memory_weights.safetensors"
CONFIG = "memory_config.json"


class MemoryWeightsError(ValueError):
    """Memory weights that are missing, corrupt, or made for another base model."""


def _base_identity(model: MemoryModel) -> dict:
    identity = model.identity()
    return {key: identity[key] for key in ("base_model", "model_type", "num_layers", "hidden_size",
                                            "num_key_value_heads", "head_dim")}


def save_memory_weights(model: MemoryModel, directory: str | Path, inference_ratio: int | None = None) -> Path:
    """Write the memory parameters and their settings; the settings recorded are the ones to memorize with
    (`MemoryConfig.for_inference`: one stated ratio), and those trained with when they differ."""
    inference = model.config.for_inference(inference_ratio)
    tensors = {name: p.detach().to("cpu").contiguous() for name, p in model.memory_parameters().items()}
    with atomic_directory(directory, replaceable=lambda d: is_saved(d, CONFIG, FORMAT)) as staging:
        save_file(tensors, str(staging / WEIGHTS))
        document = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "layout": LAYOUT,
            "memory_config": inference.to_dict(),
            "projections": describe_projections(model),  # full, or low-rank (memorag/memory/lowrank.py)
            "base": _base_identity(model),
            "weights_sha256": sha256_file(staging / WEIGHTS),
        }
        if inference != model.config:
            document["trained_memory_config"] = model.config.to_dict()
        (staging / CONFIG).write_text(json.dumps(document, indent=2, sort_keys=True))
    return Path(directory)


def read_document(directory: str | Path) -> dict:
    """The checked `memory_config.json` of a memory-weights directory."""
    root = Path(directory)
    path = root / CONFIG
    if not path.is_file() or not (root / WEIGHTS).is_file():
        raise MemoryWeightsError(
            f"{root} holds no memory weights (expected {CONFIG} and {WEIGHTS}); write them with "
            "MemoryModel.save_memory_weights or a training run"
        )
    try:
        version = json.loads(path.read_text(encoding="utf-8")).get("format_version")
    except (OSError, ValueError, AttributeError):
        version = None
    if version == 1:
        raise MemoryWeightsError(
            f"the memory weights in {root} were trained for the earlier layout (memory tokens computed in a "
            f"pass after each window, which raw tokens never see); this version computes the {LAYOUT!r} layout "
            "of the released memory models, and weights trained under one layout give wrong output under the "
            "other: train them again with this version"
        )
    document = read_json_manifest(path, FORMAT, FORMAT_VERSION, MemoryWeightsError)
    if document.get("layout") != LAYOUT:
        raise MemoryWeightsError(
            f"the memory weights in {root} were trained for the {document.get('layout')!r} layout; this model "
            f"computes the {LAYOUT!r} layout and weights trained under one layout give wrong output under another"
        )
    return document


def read_memory_weights_config(directory: str | Path) -> MemoryConfig:
    return MemoryConfig.from_dict(read_document(directory)["memory_config"])


def load_memory_weights(model: MemoryModel, directory: str | Path) -> None:
    """Copy saved memory parameters into `model`, checking the file and the base model."""
    root = Path(directory)
    document = read_document(root)
    if sha256_file(root / WEIGHTS) != document.get("weights_sha256"):
        raise MemoryWeightsError(f"{root / WEIGHTS} is truncated or corrupt (its sha256 does not match)")
    mine = _base_identity(model)
    saved = document["base"]
    shape_keys = ("model_type", "num_layers", "hidden_size", "num_key_value_heads", "head_dim")
    if any(mine[key] != saved.get(key) for key in shape_keys):
        raise MemoryWeightsError(
            f"memory weights in {root} were trained for {saved}, not for this base model {mine}"
        )
    tensors = load_file(str(root / WEIGHTS))
    match_projections(model, document.get("projections"), where=f"the memory weights in {root}")
    params = model.memory_parameters()
    if set(tensors) != set(params):
        missing, extra = sorted(set(params) - set(tensors)), sorted(set(tensors) - set(params))
        raise MemoryWeightsError(f"memory weights in {root} do not fit: missing {missing[:5]}, unexpected {extra[:5]}")
    with torch.no_grad():
        for name, param in params.items():
            if tensors[name].shape != param.shape:
                raise MemoryWeightsError(f"{name}: saved shape {tuple(tensors[name].shape)} != {tuple(param.shape)}")
            param.copy_(tensors[name].to(param.dtype))
