"""The released memory models' checkpoint format ("beacon" checkpoints), read and written as they are.

The released MemoRAG and Activation Beacon memory models are whole model folders: a
`config.json` of the base family with extra `beacon_*` keys, and weights holding the
base model plus `<model>.beacon_embed_tokens.weight` [1, D] and, per layer,
`<attention>.beacon_{q,k,v[,o]}_proj.{weight,bias}`. This module maps those settings
to a `MemoryConfig` (refusing the ones our layout does not implement) and those
tensors to the memory parameters, and writes our memory weights back in that format.
docs/memory-model.md describes the layout both share.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from .config import MemoryConfig
from .core import MemoryCore
from .families import Family

PROJECTIONS = ("q", "k", "v", "o")
# the settings of the released configs that our layout implements, and the values it needs
REQUIRED = {
    "beacon_pos": "interleave",
    "beacon_sink_size": 0,
    "beacon_parallel_window": 1,
}
# settings that only matter for training the public code, or that it ignores at inference
IGNORED = {"beacon_stride_mix", "beacon_accum", "beacon_avg_init", "beacon_avg", "beacon_self_occurrence",
           "enable_beacon", "beacon_stride"}


class ReleasedCheckpointError(ValueError):
    """A released memory-model checkpoint with a setting this implementation does not support."""


def is_released_config(config: Any) -> bool:
    """True when a transformers config (or its dict) carries the released memory settings."""
    keys = config.keys() if isinstance(config, dict) else vars(config).keys()
    return any(str(key).startswith("beacon_") for key in keys)


def released_settings(config: Any) -> dict[str, Any]:
    """The `beacon_*` settings of a transformers config or config dict."""
    items = config.items() if isinstance(config, dict) else vars(config).items()
    return {key: value for key, value in items if str(key).startswith("beacon_")}


def memory_config_from_released(settings: dict[str, Any], ratio: int | None = None) -> MemoryConfig:
    """A `MemoryConfig` for released `beacon_*` settings; a clear error for what we do not support.

    At inference the ratio is fixed, as the public pipeline uses the released models:
    `ratio` if given, else the single trained ratio, else 4 when it was among the
    trained ones (the public MemoRAG pipeline's default), else the smallest.
    """
    def refuse(key: str, value: Any, why: str) -> ReleasedCheckpointError:
        return ReleasedCheckpointError(
            f"the released checkpoint sets {key}={value!r}: {why}. Supported: beacon_pos='interleave', "
            "beacon_window == beacon_stride, beacon_sink_size=0, beacon_parallel_window=1, "
            "beacon_param among q/k/v/o, beacon_attend_prev=True for full-coverage"
        )

    for key, needed in REQUIRED.items():
        if key in settings and settings[key] != needed:
            raise refuse(key, settings[key], f"this implementation needs {needed!r}")
    window = int(settings.get("beacon_window", 1024))
    stride = int(settings.get("beacon_stride", window))
    if stride != window:
        raise refuse("beacon_stride", stride, f"a stride other than the window ({window}) is not supported")
    attention = settings.get("beacon_attn", "full-coverage")
    if attention == "full-coverage" and not settings.get("beacon_attend_prev", True):
        raise refuse("beacon_attend_prev", False, "full-coverage attention sees earlier memory tokens")
    params = list(settings.get("beacon_param", ["q", "k", "v"]))
    if params == ["q", "k", "v"]:
        memory_params = "qkv"
    elif params == ["q", "k", "v", "o"]:
        memory_params = "qkvo"
    else:
        raise refuse("beacon_param", params, "the memory tokens must own exactly q, k, v (and optionally o)")
    trained = [int(r) for r in settings.get("beacon_ratio", [4])]
    if any(r <= 0 for r in trained):
        raise refuse("beacon_ratio", trained, "ratio 0 (raw activations kept as memory) is not supported")
    if ratio is None:
        ratio = trained[0] if len(trained) == 1 else (4 if 4 in trained else min(trained))
    unknown = sorted(set(settings) - set(REQUIRED) - IGNORED - {
        "beacon_window", "beacon_attn", "beacon_attend_prev", "beacon_param", "beacon_ratio",
        "beacon_ratio_mix", "beacon_embed_init"})
    if unknown:
        raise ReleasedCheckpointError(
            f"the released checkpoint has settings this implementation does not know: {unknown}; "
            "load it with the public code, or open an issue with its config.json"
        )
    return MemoryConfig(
        window=window,
        ratios=[int(ratio)],
        ratio_mix="fixed",
        attention=attention,
        memory_params=memory_params,
        embed_init=settings.get("beacon_embed_init", "eos"),
    )


def released_tensor_names(family: Family, num_layers: int, memory_params: str) -> dict[str, str]:
    """Our memory parameter name -> the released checkpoint's tensor name, without biases."""
    model_prefix = family.embed_tokens.rpartition(".")[0]
    names = {"embedding": f"{model_prefix}.beacon_embed_tokens.weight" if model_prefix else "beacon_embed_tokens.weight"}
    for layer in range(num_layers):
        for short in PROJECTIONS[: len(memory_params)]:
            names[f"layers.{layer}.{short}.weight"] = (
                f"{family.layers}.{layer}.{family.attention}.beacon_{short}_proj.weight")
    return names


def _name_map(model: MemoryCore) -> dict[str, str]:
    """Every memory parameter of `model` (biases too) -> its released tensor name."""
    names = released_tensor_names(model.family, len(model.layers), model.config.memory_params)
    for ours in list(model.memory_parameters()):
        if ours.endswith(".bias"):
            names[ours] = names[ours[: -len("bias")] + "weight"][: -len("weight")] + "bias"
    return names


def _weight_files(folder: Path) -> list[Path]:
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = folder / index_name
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            return [folder / shard for shard in shards]
    for single in ("model.safetensors", "pytorch_model.bin"):
        if (folder / single).is_file():
            return [folder / single]
    raise ReleasedCheckpointError(f"{folder} holds no model weights (model.safetensors or pytorch_model.bin)")


def _read_tensors(folder: Path, wanted: set[str]) -> dict[str, torch.Tensor]:
    found: dict[str, torch.Tensor] = {}
    for path in _weight_files(folder):
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="pt") as handle:
                for name in wanted & set(handle.keys()):
                    found[name] = handle.get_tensor(name)
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
            found.update({name: state[name] for name in wanted & set(state)})
    return found


def load_released_memory_weights(model: MemoryCore, folder: str | Path) -> None:
    """Copy the `beacon_*` tensors of a released checkpoint folder into `model`'s memory parameters."""
    folder = Path(folder)
    names = _name_map(model)
    tensors = _read_tensors(folder, set(names.values()))
    missing = sorted(name for name in names.values() if name not in tensors)
    if missing:
        raise ReleasedCheckpointError(
            f"{folder} has beacon_* settings but lacks memory tensors {missing[:4]}"
            f"{' ...' if len(missing) > 4 else ''}: it is not a complete released memory-model checkpoint"
        )
    params = model.memory_parameters()
    with torch.no_grad():
        for ours, theirs in names.items():
            tensor = tensors[theirs]
            if ours == "embedding":
                tensor = tensor.reshape(-1)  # [1, D] -> [D]
            if tensor.shape != params[ours].shape:
                raise ReleasedCheckpointError(
                    f"{theirs} in {folder} has shape {tuple(tensor.shape)}, the model expects "
                    f"{tuple(params[ours].shape)}")
            params[ours].copy_(tensor.to(params[ours].dtype))


def _add_tensors(folder: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Add `tensors` to a saved model folder: into its one safetensors file, or as a new indexed shard."""
    from safetensors.torch import load_file, save_file

    index_path = folder / "model.safetensors.index.json"
    if index_path.is_file():
        shard = "model-memory.safetensors"
        save_file(tensors, str(folder / shard), metadata={"format": "pt"})
        index = json.loads(index_path.read_text())
        index["weight_map"].update({name: shard for name in tensors})
        index_path.write_text(json.dumps(index, indent=2, sort_keys=True))
        return
    single = folder / "model.safetensors"
    if not single.is_file():
        raise ReleasedCheckpointError(f"{folder} has no model.safetensors to add the memory tensors to")
    merged = load_file(str(single))
    merged.update(tensors)
    save_file(merged, str(single), metadata={"format": "pt"})


def released_config_entries(config: MemoryConfig) -> dict[str, Any]:
    """The `beacon_*` keys that describe `config` in a released checkpoint's config.json."""
    return {
        "beacon_window": config.window,
        "beacon_stride": config.window,
        "beacon_attn": config.attention,
        "beacon_attend_prev": True,
        "beacon_ratio": list(config.ratios),
        "beacon_ratio_mix": "step-random",
        "beacon_param": list(PROJECTIONS[: len(config.memory_params)]),
        "beacon_embed_init": config.embed_init,
        "beacon_sink_size": 0,
        "beacon_pos": "interleave",
        "beacon_parallel_window": 1,
    }


def export_released(model: MemoryCore, directory: str | Path) -> Path:
    """Write `model` (base and memory weights) as a released-format checkpoint folder.

    The folder is a plain transformers model folder (config, safetensors weights,
    tokenizer when the model has one) whose config carries the `beacon_*` settings and
    whose weights carry the `beacon_*` tensors, as the public code reads them.
    Only the interleave layout with full-coverage, step-expansion or segmentation
    attention can be exported; the public code implements segmentation only in
    another layout, so such a checkpoint loads there but does not compute the same.
    """
    from memorag.storage.io import atomic_directory

    names = _name_map(model)
    params = model.memory_parameters()
    with atomic_directory(directory, replaceable=lambda d: (d / "config.json").is_file()) as staging:
        model.base_model.save_pretrained(staging, state_dict=model.base_state_dict())
        if model.tokenizer is not None:
            model.tokenizer.save_pretrained(staging)
        config_path = staging / "config.json"
        document = json.loads(config_path.read_text())
        document.update(released_config_entries(model.config))
        config_path.write_text(json.dumps(document, indent=2, sort_keys=True))
        memory_tensors = {}
        for ours, theirs in names.items():
            tensor = params[ours].detach().to("cpu", model.base_dtype).contiguous()
            memory_tensors[theirs] = tensor[None] if ours == "embedding" else tensor  # embedding: [D] -> [1, D]
        _add_tensors(staging, memory_tensors)
    return Path(directory)
