"""The embedded reader: the embedded LM with its reader adapter merged, holding every other weight once.

The reader adapter (`SHIPPED_READER_DIR`, peft's format, made by `train/reader.py`; docs/training.md,
"The reader") is a LoRA adapter on a few projections of the embedded SmolLM2. A generator over it
is a second causal LM whose parameters are the memory model's base parameters, the same
`nn.Parameter` objects, except the projections the adapter changes: those are copies with the
adapter merged in. So the memory model and its clues read the base as before, answers are written
by the reader, a decoded token costs what it costs the base (the shapes are the base's), and only
the adapted projections are held twice.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch
from torch import nn

from .base import GeneratorError

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
# How the adapter's replies are decoded, tuned with it (its card says on what): {"refusal_margin": float}
DECODING_CONFIG = "reader_decoding.json"


def check_adapter_folder(folder: str | os.PathLike[str]) -> Path:
    """`folder` as a Path, if it holds a peft adapter; else a `GeneratorError` naming what is missing."""
    path = Path(folder)
    missing = [name for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS) if not (path / name).is_file()]
    if missing:
        raise GeneratorError(f"the reader adapter folder {path} lacks {', '.join(missing)}; reinstall memorag "
                             "(the embedded reader ships in the package), or use --generator embedded-base")
    return path


def tuned_refusal_margin(folder: str | os.PathLike[str]) -> float:
    """The refusal margin tuned for the adapter in `folder` (`DECODING_CONFIG`), 0 where none was tuned."""
    import json

    path = Path(folder) / DECODING_CONFIG
    if not path.is_file():
        return 0.0
    try:
        margin = float(json.loads(path.read_text(encoding="utf-8"))["refusal_margin"])
    except (ValueError, KeyError, TypeError) as error:
        raise GeneratorError(f"{path} is not a reader decoding config ({error}); reinstall memorag") from error
    if not 0 <= margin < float("inf"):
        raise GeneratorError(f"{path}: refusal_margin={margin} must be a finite number, 0 or above; reinstall memorag")
    return margin


def reader_name(base_name: str, folder: str | os.PathLike[str]) -> str:
    """What a generator with the adapter in `folder` goes by in records: `base_name`, then the first 12 hex digits
    of the adapter weights' sha256, so records of two adapters under one name never pass for each other."""
    from memorag.storage.io import sha256_file

    return f"{base_name}-{sha256_file(Path(folder) / ADAPTER_WEIGHTS)[:12]}"


def shared_copy(memory_model) -> nn.Module:
    """A plain causal LM of the memory model's base config whose parameters and buffers are the base's own
    tensors (`MemoryCore.base_tensors`): built on the meta device, so nothing is allocated or copied."""
    return _over_tensors(memory_model.base_model, memory_model.base_tensors(), memory_model.base_dtype,
                         memory_model.name)


def plain_copy(model: nn.Module) -> nn.Module:
    """A second causal LM holding `model`'s own tensors (nothing copied), so that merging an adapter into it
    leaves `model` as it is."""
    tensors = dict([*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)])
    return _over_tensors(model, tensors, next(model.parameters()).dtype, type(model).__name__)


def _over_tensors(base: nn.Module, tensors: dict[str, torch.Tensor], dtype: torch.dtype, what: str) -> nn.Module:
    """A causal LM of `base`'s config built on the meta device, its parameters and buffers `tensors`."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(base.config, dtype=dtype)
    expected = {name for name, _ in (*model.named_parameters(remove_duplicate=False),
                                     *model.named_buffers(remove_duplicate=False))}
    if expected != set(tensors):
        raise GeneratorError(f"the base of {what} does not match its config's model "
                             f"({sorted(expected ^ set(tensors))[:3]}); name a generator model instead")
    for name, tensor in tensors.items():
        owner, _, leaf = name.rpartition(".")
        module = model.get_submodule(owner)
        if leaf in module._parameters:
            module._parameters[leaf] = tensor
        else:
            module._buffers[leaf] = tensor
    model.generation_config = base.generation_config
    return model.eval()


def merge_adapter(model: nn.Module, folder: str | os.PathLike[str]) -> nn.Module:
    """`model` with the LoRA adapter in `folder` merged into copies of the projections it adapts (every other
    parameter stays `model`'s own). Refuses an adapter whose tensors do not all find their module."""
    from peft import PeftModel, get_peft_model_state_dict
    from peft.tuners.lora import LoraLayer
    from safetensors import safe_open

    path = check_adapter_folder(folder)
    with warnings.catch_warnings():  # peft asks transformers a deprecated question while wrapping
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        wrapped = PeftModel.from_pretrained(model, str(path), is_trainable=False)
    with safe_open(str(path / ADAPTER_WEIGHTS), framework="pt") as handle:
        saved = set(handle.keys())
    loaded = set(get_peft_model_state_dict(wrapped))
    if saved != loaded:
        raise GeneratorError(f"the reader adapter in {path} does not fit {type(model).__name__}: "
                             f"{sorted(saved ^ loaded)[:3]} (trained for another base?)")
    for module in wrapped.modules():
        if isinstance(module, LoraLayer):
            projection = module.get_base_layer()
            projection.weight = nn.Parameter(projection.weight.detach().clone(), requires_grad=False)
    return wrapped.merge_and_unload().eval()
