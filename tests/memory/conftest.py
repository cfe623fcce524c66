"""Tiny random decoders of each supported family, built in-process (no downloads)."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from memorag.memory import MemoryConfig, MemoryModel

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
VOCAB = 96

_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=1024,
    bos_token_id=0,
    eos_token_id=1,
    initializer_range=0.2,
    tie_word_embeddings=False,
)


def tiny_base(family: str = "llama", seed: int = 0, **overrides):
    """A randomly initialised causal LM of `family` (fp32, eval mode)."""
    torch.manual_seed(seed)
    settings = {**_COMMON, **overrides}
    if family == "llama":
        model = LlamaForCausalLM(LlamaConfig(**settings))
    elif family == "mistral":
        model = MistralForCausalLM(MistralConfig(sliding_window=None, **settings))
    elif family == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(use_sliding_window=False, **settings))
    elif family == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(use_sliding_window=False, head_dim=16, **settings))
    else:
        raise ValueError(family)
    return model.eval()


def tiny_memory_model(family: str = "llama", seed: int = 0, base_overrides: dict | None = None, **config) -> MemoryModel:
    settings = {"window": 16, "ratios": [4]}
    settings.update(config)
    model = MemoryModel(tiny_base(family, seed, **(base_overrides or {})), MemoryConfig(**settings))
    perturb_memory_parameters(model, seed)
    return model.eval()


def perturb_memory_parameters(model: MemoryModel, seed: int = 0, scale: float = 0.05) -> None:
    """Make the memory projections differ from the base ones, as training would."""
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for param in model.memory_parameters().values():
            param.add_(torch.randn(param.shape, generator=generator) * scale)


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches and counters empty before and after the test (the compiled-step tests count graphs)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


def decode_tokens(model: MemoryModel, ids: torch.Tensor, cache) -> list[torch.Tensor]:
    """Read `ids` [B, n] into `cache` one token at a time as decoding steps (as `generate` reads a reply);
    each token's raw row's last hidden state [B, 1, D]."""
    from memorag.memory.core import plan_steps

    ratio_of = model.ratio_function(model.config.ratios[0])
    hidden = []
    for index in range(ids.shape[1]):
        for item in plan_steps(ids[:, index : index + 1], cache, model.config.window, ratio_of):
            hidden += model.step([item], kind="decode")
    return hidden


def random_ids(length: int, batch: int = 1, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(2, VOCAB, (batch, length), generator=generator)


@pytest.fixture(params=FAMILIES)
def family(request) -> str:
    return request.param


class CountOps(TorchDispatchMode):
    """Counts the aten operators dispatched while entered, by operator name ("aten.mm", ...)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))
