"""Low-rank memory projections: LoRA (through peft) on the memory q/k/v[/o] copies.

The memory projections start as copies of the base projections (docs/memory-model.md).
Trained in full they are as large as the base attention (about 66 MB in fp32 for the
embedded SmolLM2-135M); trained as `copy + B A` with rank `r`, only `A` [r, in] and `B`
[out, r] per projection are trained and saved (about 0.32 MB per unit of rank for
SmolLM2-135M with q/k/v), plus the memory embedding.

`apply_lowrank(model, rank)` wraps each layer's `MemoryAttention.memory` projections with
peft's LoRA layers (`peft.inject_adapter_in_model`). The frozen copies become buffers,
so `MemoryModel.memory_parameters()` is, by construction, the LoRA factors and the
embedding: what the optimizer trains and what `save_memory_weights` writes. `B` starts
at zero, so an untrained low-rank memory computes exactly what the untrained copies do.
The saved `memory_config.json` records the projections (`describe_projections`), and
loading re-applies the same parameterisation (`match_projections`), so low-rank weights
load through `MemoryModel.from_pretrained(..., memory_weights=...)` like full ones.
`merge_lowrank` folds the factors back into full projections (e.g. before exporting to
the released format).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .core import MemoryCore

ADAPTER = "default"
FULL = {"kind": "full"}


def _lora_layers(model: MemoryCore) -> list[tuple[nn.ModuleDict, str, nn.Module]]:
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # without peft no memory projection can be low-rank
        return []

    return [(attention.memory, short, module) for attention in model.memory_attentions()
            for short, module in attention.memory.items() if isinstance(module, LoraLayer)]


def describe_projections(model: MemoryCore) -> dict[str, Any]:
    """`{"kind": "full"}` or `{"kind": "lowrank", "rank", "alpha", "targets", "library"}`: what the weights are."""
    layers = _lora_layers(model)
    if not layers:
        return dict(FULL)
    _, _, first = layers[0]
    targets = sorted({short for _, short, _ in layers})
    return {"kind": "lowrank", "rank": int(first.r[ADAPTER]), "alpha": float(first.lora_alpha[ADAPTER]),
            "targets": targets, "library": "peft"}


def apply_lowrank(model: MemoryCore, rank: int, alpha: float | None = None) -> MemoryCore:
    """Train the memory projections as frozen copies of the base plus LoRA of `rank` (scale alpha / rank).

    `alpha` defaults to `rank` (scale 1). Refused on a model whose memory projections
    already differ from the base ones (trained full weights): low-rank updates start
    from the copies.
    """
    from peft import LoraConfig, inject_adapter_in_model

    if rank < 1:
        raise ValueError(f"rank={rank}: a low-rank memory needs rank >= 1 (rank 0 means the full projections)")
    if _lora_layers(model):
        raise ValueError(f"the memory projections are already low-rank ({describe_projections(model)})")
    for attention in model.memory_attentions():
        for short, copy in attention.memory.items():
            base = getattr(attention.base_layer, attention.projection_names["qkvo".index(short)])
            same = all(p.is_meta or torch.equal(getattr(copy, name).detach().to(p.dtype), p)  # meta: no values
                       for name, p in base.named_parameters())
            if not same:
                raise ValueError(
                    "the memory projections differ from the base projections (full memory weights were loaded or "
                    "trained); low-rank memory projections start from untrained copies: apply them before loading "
                    "weights, or keep the full projections (rank 0)"
                )
        targets = list(attention.memory.keys())
        config = LoraConfig(r=rank, lora_alpha=alpha if alpha is not None else rank, lora_dropout=0.0,
                            target_modules=targets, bias="none")
        inject_adapter_in_model(config, attention.memory, adapter_name=ADAPTER)
        for short in targets:
            _freeze_as_buffers(attention.memory[short].base_layer)
            attention.memory[short].to(model.memory_embedding.device)
    model.memory_parameters_changed()
    return model


def _freeze_as_buffers(layer: nn.Module) -> None:
    """Turn the frozen copy's parameters into buffers: not trained, not saved as memory weights."""
    for name, param in list(layer.named_parameters(recurse=False)):
        delattr(layer, name)
        layer.register_buffer(name, param.detach().requires_grad_(False))


def match_projections(model: MemoryCore, saved: dict[str, Any] | None, where: str = "the memory weights") -> None:
    """Give `model` the projections `saved` describes (a `describe_projections` record; None = full)."""
    saved = saved or dict(FULL)
    mine = describe_projections(model)
    if mine == saved:
        return
    if mine["kind"] == "full" and saved.get("kind") == "lowrank":
        apply_lowrank(model, int(saved["rank"]), float(saved["alpha"]))
        if describe_projections(model)["targets"] != saved.get("targets"):
            raise ValueError(f"{where} hold low-rank updates of {saved.get('targets')}, this model has "
                             f"{describe_projections(model)['targets']} memory projections")
        return
    raise ValueError(f"{where} hold {saved} memory projections but this model has {mine}; build the model with "
                     "the same projections (memory rank) or load weights of its kind")


@torch.no_grad()
def merge_lowrank(model: MemoryCore) -> MemoryCore:
    """Fold every LoRA update into a full copy (`copy + B A * scale`): full projections again."""
    for memory, short, layer in _lora_layers(model):
        base = layer.base_layer
        merged = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                           device=base.weight.device, dtype=base.weight.dtype)
        merged.weight.copy_(base.weight + layer.get_delta_weight(ADAPTER).to(base.weight.dtype))
        if base.bias is not None:
            merged.bias.copy_(base.bias)
        memory[short] = merged.requires_grad_(True)
    model.memory_parameters_changed()
    return model
