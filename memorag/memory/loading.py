"""Loading a `MemoryCore`: a base causal LM and the memory weights of one of three kinds.

- our own memory weights (`save_memory_weights`, memory/checkpoint.py), found by
  `memory_weights_for` there (a folder, a hub id, or a name such as
  "embedded");
- a released memory-model checkpoint (MemoRAG's and Activation Beacon's `beacon_*`
  settings and tensors, memory/released.py), which carries its own memory weights;
- none: the memory projections stay untrained copies of the base ones.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from .checkpoint import load_memory_weights, memory_weights_for, read_memory_weights_config
from .config import MemoryConfig
from .core import MemoryCore
from .released import (
    is_released_config,
    load_released_memory_weights,
    memory_config_from_released,
    released_settings,
)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json", "spiece.model")


def load_memory_model(
    cls: type[MemoryCore],
    base: str | None,
    memory_weights: str | Path | None,
    config: MemoryConfig | None,
    **load_kwargs,
) -> MemoryCore:
    """`MemoryModel.from_pretrained` (see its docstring): `cls` built over the loaded base, with its memory weights."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from memorag.runtime.cpu_dtype import settle_auto_dtype
    from memorag.runtime.embedded import resolve_lm

    name = base or "embedded"
    path = resolve_lm(base)
    base_config = AutoConfig.from_pretrained(path, trust_remote_code=False)
    released = is_released_config(base_config)
    if released:
        config = _released_config(name, base_config, memory_weights, config)
    else:
        memory_weights = memory_weights_for(base, memory_weights)  # a local folder (a hub id downloaded), or None
        config = _saved_config(memory_weights, config)
    load_kwargs.setdefault("dtype", "auto")
    load_kwargs.setdefault("trust_remote_code", False)
    tokenizer = _load_tokenizer(path)
    with _quiet_unused_weights(released):
        base_model = AutoModelForCausalLM.from_pretrained(path, **load_kwargs)
    base_model = settle_auto_dtype(base_model, load_kwargs).eval()
    model = cls(base_model, config=config, tokenizer=tokenizer, name=_display_name(name, path))
    if released:
        load_released_memory_weights(model, _local_folder(path))
        for key in released_settings(base_model.config):  # the settings now live in model.config
            delattr(base_model.config, key)
    elif memory_weights is not None:
        load_memory_weights(model, memory_weights)
    return model


def _released_config(name: str, base_config, memory_weights, config: MemoryConfig | None) -> MemoryConfig:
    """The settings of a released checkpoint, or `config` when it has the same memory projections."""
    if memory_weights is not None and str(memory_weights).strip().lower() != "auto":
        raise ValueError(f"{name} is a released memory-model checkpoint that carries its own memory weights; "
                         "do not pass memory_weights with it")
    trained = memory_config_from_released(released_settings(base_config))
    if config is not None and config.memory_params != trained.memory_params:
        raise ValueError(f"config.memory_params={config.memory_params!r} but {name} holds {trained.memory_params!r} "
                         "memory projections; pass config=None to use its own settings")
    return config or trained


def _saved_config(memory_weights: Path | None, config: MemoryConfig | None) -> MemoryConfig | None:
    """The settings saved with our memory weights, or `config` when it has the same memory projections."""
    if memory_weights is None:
        return config
    saved = read_memory_weights_config(memory_weights)
    if config is not None and config.memory_params != saved.memory_params:
        raise ValueError(f"config.memory_params={config.memory_params!r} but the memory weights in {memory_weights} "
                         f"hold {saved.memory_params!r} projections; pass config=None to use the saved config")
    return config or saved


def _load_tokenizer(path: str):
    """The tokenizer of a model folder or hub id; None for a local folder without tokenizer files."""
    from transformers import AutoTokenizer

    folder = Path(path)
    if folder.is_dir() and not any((folder / file).is_file() for file in TOKENIZER_FILES):
        return None
    return AutoTokenizer.from_pretrained(path)


def _local_folder(path: str) -> Path:
    """The local folder of a model: the path itself, or a hub id's snapshot in the download cache."""
    folder = Path(path)
    if folder.is_dir():
        return folder
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(path, allow_patterns=["*.json", "*.safetensors", "*.bin"]))


@contextmanager
def _quiet_unused_weights(active: bool):
    """Silence transformers' report of the `beacon_*` tensors it does not load (we load them ourselves)."""
    if not active:
        yield
        return
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _display_name(name: str, path: str) -> str:
    from memorag.runtime.embedded import EMBEDDED_LM

    return EMBEDDED_LM if path != name and name in ("embedded", EMBEDDED_LM) else name
