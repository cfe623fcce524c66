"""Memory weights on disk: the memory parameters only, plus the settings that go with them; and which
weights to load, found by name, folder or hub id.

A directory with `memory_weights.safetensors` (the memory embedding and each layer's
memory projections, nothing of the frozen base) and `memory_config.json` (format
version, the layout the weights were trained for, the `MemoryConfig`, the base model's
identity and a hash of the weights). Weights trained under one layout give wrong output
under another, so a checkpoint of another layout is refused.

`memory_weights_for(base, weights)` turns the `memory_weights=` argument of `MemoRAG`,
`MemoryCore.from_pretrained`, training and the command line into a local folder (or None:
untrained copies of the base model's projections). The names (`auto`, `embedded`, `untrained`)
are declared in `memorag.runtime.embedded`; a hub id is downloaded into huggingface_hub's cache; every
folder that is not the caller's own is verified as loading verifies it (both files, the manifest,
the sha256 of the weights).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from memorag.runtime.embedded import (
    AUTO_MEMORY,
    SHIPPED_MEMORY,
    SHIPPED_MEMORY_DIR,
    UNTRAINED_MEMORY,
    is_embedded_lm,
    is_memory_weights_id,
)
from memorag.storage.io import atomic_directory, is_saved, read_json_manifest, sha256_file

from .config import MemoryConfig
from .core import MemoryCore
from .lowrank import describe_projections, match_projections
from .schedule import LAYOUT

logger = logging.getLogger(__name__)

FORMAT = "memorag-memory-weights"
FORMAT_VERSION = 2  # 2: the interleave layout, recorded as "layout"; 1: memory tokens in a pass after the window
WEIGHTS = "memory_weights.safetensors"
CONFIG = "memory_config.json"


class MemoryWeightsError(ValueError):
    """Memory weights that are missing, corrupt, or made for another base model."""


def _base_identity(model: MemoryCore) -> dict:
    identity = model.identity()
    return {key: identity[key] for key in ("base_model", "model_type", "num_layers", "hidden_size",
                                            "num_key_value_heads", "head_dim")}


def save_memory_weights(model: MemoryCore, directory: str | Path, inference_ratio: int | None = None) -> Path:
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


def load_memory_weights(model: MemoryCore, directory: str | Path) -> None:
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


class MemoryWeightsUnavailableError(RuntimeError):
    """Memory weights named by a hub id that could not be downloaded (offline, or no such repository)."""


def shipped_memory_weights() -> Path:
    """The folder of the memory weights trained for the embedded LM (README "The shipped memory")."""
    verify_memory_weights(SHIPPED_MEMORY_DIR, where="the memory weights shipped with memorag")
    return SHIPPED_MEMORY_DIR


def memory_weights_for(base: str | os.PathLike[str] | None,
                       weights: str | os.PathLike[str] | None) -> Path | None:
    """The folder of memory weights to load onto `base`, or None for untrained copies of its projections.

    `weights` is a folder, a hub id, or a name: "auto" (the default) gives the shipped trained weights
    when `base` is the embedded SmolLM2 and untrained copies for any other base (no weights exist for
    it here); "embedded" the shipped weights (an error on another base); "untrained" or None the copies.
    """
    if weights is None:
        return None
    name = os.fspath(weights).strip().lower()
    if name == UNTRAINED_MEMORY:
        return None
    if name == AUTO_MEMORY:
        if is_embedded_lm(base):
            return shipped_memory_weights()
        logger.info("no trained memory weights are known for %s: its memory projections are untrained copies of "
                    "the base model's (pass memory_weights= a folder or hub id of trained ones)", base)
        return None
    if name == SHIPPED_MEMORY:
        if not is_embedded_lm(base):
            raise ValueError(f"memory_weights={SHIPPED_MEMORY!r} are trained for the embedded SmolLM2-135M-Instruct, "
                             f"not for {base!r}; pass that base's own memory weights, or {UNTRAINED_MEMORY!r}")
        return shipped_memory_weights()
    return resolve_memory_weights(weights)


def resolve_memory_weights(path_or_id: str | os.PathLike[str]) -> Path:
    """The local folder of memory weights: a folder as given, or a hub id downloaded into the hub's cache.

    A local folder is returned as is (`~` expanded); it is verified when the weights are
    loaded. A hub id (`owner/name`, or `owner/name@revision`) is fetched with
    `huggingface_hub.snapshot_download` (the memory weight files only; later calls read the
    cache, also offline) and then verified as a saved folder is: its manifest's format and
    version, and the sha256 of the weights. A hub that cannot be reached, and a repository
    that does not exist, are errors that say so.
    """
    text = os.fspath(path_or_id)
    local = Path(os.path.expanduser(text))
    if local.exists():
        if not local.is_dir():
            raise NotADirectoryError(f"memory weights {text!r} must be a folder (written by save_memory_weights "
                                     "or a training run), not a file")
        return local
    if not is_memory_weights_id(text):
        raise FileNotFoundError(f"memory weights {text!r} are neither an existing folder nor a hub id of the form "
                                "'owner/name' (optionally '@revision')")
    repo_id, _, revision = text.partition("@")
    folder = _download_memory_weights(repo_id, revision or None)
    verify_memory_weights(folder, where=f"the hub repository {text!r}")
    return folder


def verify_memory_weights(folder: str | os.PathLike[str], where: str | None = None) -> None:
    """Check a memory weights folder as loading does: both files, the manifest, the weights' sha256."""
    root = Path(folder)
    source = where or str(root)
    if not (root / CONFIG).is_file() or not (root / WEIGHTS).is_file():
        raise MemoryWeightsError(f"{source} holds no memory weights (expected {CONFIG} and {WEIGHTS} in {root})")
    read_memory_weights_config(root)  # the manifest's format, version and settings, checked as loading does
    manifest = json.loads((root / CONFIG).read_text(encoding="utf-8"))
    if sha256_file(root / WEIGHTS) != manifest.get("weights_sha256"):
        raise MemoryWeightsError(f"{root / WEIGHTS} from {source} is truncated or corrupt (its sha256 does not "
                                 "match the manifest); delete it from the cache and download it again")


def _download_memory_weights(repo_id: str, revision: str | None) -> Path:
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        path = huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=[CONFIG, WEIGHTS])
    except LocalEntryNotFoundError as error:
        raise MemoryWeightsUnavailableError(
            f"memory weights {repo_id!r} are not in the local hub cache and the hub cannot be reached ({error}). "
            f"On a machine with access run `hf download {repo_id} --local-dir DIR`, copy DIR here and pass it "
            "as the memory weights folder"
        ) from error
    except (RepositoryNotFoundError, RevisionNotFoundError) as error:
        raise MemoryWeightsUnavailableError(
            f"the hub has no repository {repo_id!r}" + (f" at revision {revision!r}" if revision else "")
            + " (or it is private: log in with `hf auth login`)"
        ) from error
    return Path(path)
