"""Registry of decoder families: where each one keeps the parts the memory model uses.

One implementation serves every family; what differs between them is data here
(module paths, per-head q/k norms, how a sliding window is switched on), never a
copy of modeling code. Biases need no entry: memory projections are copies of the
base projections, biases included.
The layer's forward for all of them is one decoder block (`attention.decoder_block`), which reads the
norms and the MLP where the family keeps them (`norms`, `mlp`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    layers: str = "model.layers"
    attention: str = "self_attn"
    embed_tokens: str = "model.embed_tokens"
    final_norm: str = "model.norm"
    rotary: str = "model.rotary_emb"
    lm_head: str = "lm_head"
    projections: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj")
    qk_norms: tuple[str, str] | None = None  # per-head norms applied after projection, before RoPE
    norms: tuple[str, str] = ("input_layernorm", "post_attention_layernorm")  # before attention, before the MLP
    mlp: tuple[str, str, str, str] = ("mlp", "gate_proj", "up_proj", "down_proj")  # down(act(gate(x)) * up(x))
    sliding_window_switch: str | None = None  # config flag that turns `sliding_window` on, if any


FAMILIES: dict[str, Family] = {
    "llama": Family("llama"),  # also SmolLM / SmolLM2
    "mistral": Family("mistral", sliding_window_switch=""),  # on whenever `sliding_window` is set
    "qwen2": Family("qwen2", sliding_window_switch="use_sliding_window"),
    "qwen3": Family("qwen3", qk_norms=("q_norm", "k_norm"), sliding_window_switch="use_sliding_window"),
}


class UnsupportedModelError(ValueError):
    pass


def family_of(config) -> Family:
    model_type = getattr(config, "model_type", None)
    if model_type not in FAMILIES:
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported by the memory model; supported: "
            f"{', '.join(sorted(FAMILIES))}. Adding a Llama-style family is one entry in "
            "memorag/memory/families.py."
        )
    family = FAMILIES[model_type]
    window = getattr(config, "sliding_window", None)
    switch = family.sliding_window_switch
    active = window is not None and (switch == "" or (switch and getattr(config, switch, False)))
    if active and window < getattr(config, "max_position_embeddings", 0):
        raise UnsupportedModelError(
            f"{model_type} model uses sliding-window attention (sliding_window={window}); the memory model "
            "attends over the whole memory. Load it with sliding_window=None (or use_sliding_window=False)."
        )
    return family


