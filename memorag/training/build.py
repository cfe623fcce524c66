"""Build the model and tokenizer a `TrainConfig` names.

`model.base` is the embedded SmolLM2 (`embedded`), a hub id, a local folder, or
`random:FAMILY`: a randomly initialised model of that family built in process from
`model.architecture` (tiny dimensions for tests and the debug config), with the
built-in byte-level tokenizer by default. `build_model(..., device="meta")` builds
any configured model without weights (and without a download) from its
`architecture`, which is how the 7B configs are checked on a CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from memorag.memory import MemoryConfig, MemoryModel

from .config import ModelSection

_TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def base_dtype(model: ModelSection, bf16: bool) -> torch.dtype:
    """The frozen base weights' dtype: `model.dtype`, or bf16 under bf16 precision and fp32 otherwise."""
    if model.dtype == "auto":
        return torch.bfloat16 if bf16 else torch.float32
    return _TORCH_DTYPES[model.dtype]


def byte_tokenizer():
    """A byte-level tokenizer (256 byte tokens after <s>=0 and </s>=1) that needs no files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<s>": 0, "</s>": 1, **{char: index + 2 for index, char in enumerate(alphabet)}}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="</s>")


def load_tokenizer(name: str):
    if name == "byte":
        return byte_tokenizer()
    from transformers import AutoTokenizer

    from memorag.runtime.embedded import resolve_lm

    return AutoTokenizer.from_pretrained(resolve_lm(name))


def hf_config(model: ModelSection, tokenizer=None):
    """The Hugging Face config of a random model, or one built from `architecture` alone."""
    from transformers import AutoConfig

    settings: dict[str, Any] = dict(model.architecture)
    model_type = model.random_family if model.is_random else settings.get("model_type")
    if not model_type:
        raise ValueError(f"model.architecture needs a model_type to build {model.base!r} without loading it")
    settings.pop("model_type", None)
    if tokenizer is not None:
        settings.setdefault("vocab_size", len(tokenizer))
        for which in ("bos", "eos", "pad"):
            token_id = getattr(tokenizer, f"{which}_token_id", None)
            if token_id is not None:
                settings.setdefault(f"{which}_token_id", token_id)
    return AutoConfig.for_model(model_type, **settings)


def build_model(
    model: ModelSection,
    memory: MemoryConfig,
    bf16: bool = False,
    device: str | torch.device | None = None,
) -> MemoryModel:
    """The `MemoryModel` of a config; memory parameters in float32, the base frozen and in eval mode."""
    from transformers import AutoModelForCausalLM

    dtype = base_dtype(model, bf16)
    if model.is_random or str(device) == "meta":
        tokenizer = load_tokenizer(model.tokenizer or "byte") if model.is_random else None
        config = hf_config(model, tokenizer)
        torch.manual_seed(model.init_seed)
        with torch.device(device or "cpu"):
            base = AutoModelForCausalLM.from_config(config, dtype=dtype)
        built = MemoryModel(base.eval(), memory, tokenizer=tokenizer, name=model.base)
    else:
        if model.tokenizer is not None:
            raise ValueError("model.tokenizer applies to random bases only; a pretrained base uses its own tokenizer")
        built = MemoryModel.from_pretrained(model.base, memory_weights=None, config=memory, dtype=dtype)
        check_architecture(model, built.base_model.config)
        if device is not None:
            built.to(device)
    if model.memory_rank:
        from memorag.memory.lowrank import apply_lowrank

        apply_lowrank(built, model.memory_rank, model.memory_alpha)
    if model.memory_weights is not None and str(device) != "meta":
        from memorag.memory.checkpoint import load_memory_weights, memory_weights_for

        folder = memory_weights_for(model.base, model.memory_weights)  # also "embedded": the shipped weights
        if folder is not None:
            load_memory_weights(built, folder)
    for parameter in built.memory_parameters().values():
        parameter.data = parameter.data.float()
    return built.eval()


def check_architecture(model: ModelSection, config) -> None:
    """Refuse a loaded base whose config differs from the dimensions the training config declares."""
    differences = []
    for key, expected in model.architecture.items():
        if key == "rope_theta":
            actual = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", getattr(config, key, None))
        else:
            actual = getattr(config, key, None)
        if actual != expected and not (isinstance(actual, float | int) and isinstance(expected, float | int)
                                        and float(actual) == float(expected)):
            differences.append(f"{key}: config says {expected!r}, the model has {actual!r}")
    if differences:
        raise ValueError(f"model.base={model.base!r} does not match model.architecture: " + "; ".join(differences))
