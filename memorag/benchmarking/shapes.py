"""Random-weight decoders of real models' shapes, by name, built from a config (no weights downloaded).

Speed depends on the shape, not on the weights, so the GPU benchmarks need no model hub:
`random_base("qwen2-7b", "cuda", "bfloat16")` builds Qwen2-7B's architecture with random
weights directly on the device. `tiny` is for tests (seconds on a CPU).
"""

from __future__ import annotations

from typing import Any

# name -> (model_type, config fields); dimensions as the models' published configs give them
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "tiny": ("llama", dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
                           tie_word_embeddings=False)),
    "smollm2-135m": ("llama", dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0,
                                   rms_norm_eps=1e-5, tie_word_embeddings=True)),
    "qwen2-7b": ("qwen2", dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                               num_attention_heads=28, num_key_value_heads=4, rope_theta=1000000.0,
                               rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False)),
}


def shape_config(name: str, max_positions: int = 65536):
    """The transformers config of shape `name` (SDPA attention; ids 0 and 1 are BOS and EOS)."""
    from transformers import AutoConfig

    if name not in SHAPES:
        raise ValueError(f"shape={name!r}; known shapes: {', '.join(SHAPES)}")
    model_type, fields = SHAPES[name]
    return AutoConfig.for_model(model_type, **fields, max_position_embeddings=max_positions, bos_token_id=0,
                                eos_token_id=1, attn_implementation="sdpa")


def random_base(name: str, device: str = "cpu", dtype: str = "float32", max_positions: int = 65536, seed: int = 0):
    """A causal LM of shape `name` with random weights, created on `device` in `dtype` (eval mode)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(shape_config(name, max_positions), dtype=getattr(torch, dtype))
    return model.eval()
