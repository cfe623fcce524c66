"""The reader stage: a LoRA adapter (peft) on the generator, trained to answer from the pipeline's prompts.

    trainer = ReaderTrainer(load_config(TrainConfig, "configs/reader/embedded.yaml"))
    summary = trainer.train()

The loop, checkpoints, exact resume, refusals and logs are the `Trainer`'s; what differs is
what is trained. The model is the generator's base (`model.base`: the embedded SmolLM2, a
hub id, a folder, or `random:FAMILY` for tests), frozen, with an adapter of `adapter.rank` on
the projections `adapter.target_modules`; only the adapter is in the optimizer and in the
checkpoints (`adapter_model.safetensors`, `adapter_config.json`: peft's format, so
`PeftModel.from_pretrained(base, DIR)` loads one). A sample is an answer prompt as the
generator measures it and the reply after it (`memorag.training.data.reader_samples`); the loss is
the reply's next-token cross-entropy, and logits are computed for the reply's rows only.

Precision `auto` is bfloat16 where the machine computes it natively (a GPU that supports it,
or a CPU with AMX or AVX-512 BF16), float32 elsewhere.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from memorag.storage.io import atomic_write_text, sha256_file

from .build import hf_config, load_tokenizer
from .config import AdapterSection, ModelSection
from .data import SFTBatches, SFTSpec
from .data.reader_samples import ReaderSample, render_reader_sample
from .errors import TrainingInputError
from .lora_rank import lower_rank, saved_rank
from .trainer import Trainer, use_bf16

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
IGNORE_INDEX = -100


@dataclass
class ReaderOutput:
    loss: torch.Tensor  # [] mean cross-entropy over the reply tokens
    loss_token_count: torch.Tensor  # [] reply tokens scored


def load_base(model: ModelSection, dtype: torch.dtype):
    """The generator's base causal LM (frozen, eval mode) and its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from memorag.runtime.embedded import resolve_lm

    if model.is_random:
        tokenizer = load_tokenizer(model.tokenizer or "byte")
        torch.manual_seed(model.init_seed)
        base = AutoModelForCausalLM.from_config(hf_config(model, tokenizer), dtype=dtype)
    else:
        if model.tokenizer is not None:
            raise ValueError("model.tokenizer applies to random bases only; a pretrained base uses its own tokenizer")
        path = resolve_lm(model.base)
        tokenizer = AutoTokenizer.from_pretrained(path)
        base = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        from .build import check_architecture

        check_architecture(model, base.config)
    for parameter in base.parameters():
        parameter.requires_grad_(False)
    return base.eval(), tokenizer


def _base_name(model: ModelSection) -> str:
    from memorag.runtime.embedded import EMBEDDED_LM, is_embedded_lm

    return EMBEDDED_LM if is_embedded_lm(model.base) else str(model.base)


class ReaderModel(nn.Module):
    """The base with its LoRA adapter (`base_model`, a peft model), the tokenizer, and the loss on replies."""

    def __init__(self, base, tokenizer, adapter: AdapterSection, base_name: str | None = None):
        from peft import LoraConfig, get_peft_model

        super().__init__()
        self.base_name = base_name  # what the saved adapter names as its base (peft's base_model_name_or_path)
        depth = int(getattr(base.config, "num_hidden_layers", 0))
        if adapter.layers is not None and max(adapter.layers) >= depth:
            raise TrainingInputError(f"adapter.layers={adapter.layers}: the base has layers 0..{depth - 1}")
        config = LoraConfig(r=adapter.rank, lora_alpha=adapter.alpha, lora_dropout=adapter.dropout,
                            target_modules=list(adapter.target_modules), bias="none", task_type="CAUSAL_LM",
                            layers_to_transform=list(adapter.layers) if adapter.layers is not None else None)
        self.base_model = get_peft_model(base, config)
        self.base_model.train(adapter.dropout > 0)  # dropout draws only when there is dropout
        self.tokenizer = tokenizer
        self.max_positions = int(getattr(base.config, "max_position_embeddings", 0) or 1 << 30)
        for parameter in self.adapter_parameters().values():
            parameter.data = parameter.data.float()

    def adapter_parameters(self) -> dict[str, nn.Parameter]:
        return {name: p for name, p in self.base_model.named_parameters() if p.requires_grad}

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> ReaderOutput:
        """input_ids, labels [B, T] (right-padded; labels -100 but on the replies). Only the rows from the
        first one that predicts a label on are projected to the vocabulary."""
        targets = labels[:, 1:]  # [B, T-1]: the token each position predicts
        scored = targets != IGNORE_INDEX
        first = int(scored.any(dim=0).float().argmax()) if bool(scored.any()) else targets.shape[1] - 1
        keep = targets.shape[1] - first  # positions first..T-2 predict; position T-1 predicts nothing
        output = self.base_model(input_ids=input_ids, logits_to_keep=keep + 1)
        logits = output.logits[:, :-1].float()  # [B, keep, V]
        kept_targets = targets[:, first:]  # [B, keep]
        count = (kept_targets != IGNORE_INDEX).sum()
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), kept_targets.reshape(-1),
                                           ignore_index=IGNORE_INDEX, reduction="sum") / count.clamp(min=1)
        return ReaderOutput(loss, count)

    def save_adapter(self, folder: Path) -> None:
        """The adapter alone into `folder` (created): its weights and its peft config."""
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file

        folder.mkdir(parents=True, exist_ok=True)
        state = {name: tensor.detach().contiguous().cpu() for name, tensor in
                 get_peft_model_state_dict(self.base_model).items()}
        save_file(state, str(folder / ADAPTER_WEIGHTS))
        settings = self.base_model.peft_config["default"].to_dict()
        if self.base_name is not None:  # the name a user loads, not this machine's cache folder
            settings["base_model_name_or_path"] = self.base_name
        settings = json.loads(json.dumps(settings, default=lambda value: sorted(value) if isinstance(value, set)
                                         else str(value)))
        atomic_write_text(folder / ADAPTER_CONFIG, json.dumps(settings, indent=1, sort_keys=True) + "\n")

    def load_adapter(self, folder: Path, lower: bool = False) -> None:
        """The adapter saved in `folder` (peft's files) into this one; with `lower`, one of a higher rank is
        first brought to this one's rank (`lower_rank`: its scaled updates kept as closely as the rank allows)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        path = folder / ADAPTER_WEIGHTS
        if not path.is_file():
            raise TrainingInputError(f"{path} does not exist: name a folder an adapter was saved to (a run's final/ "
                                     "or checkpoint-N/)")
        state = load_file(str(path))
        settings = self.base_model.peft_config["default"]
        rank = saved_rank(state)
        if lower and rank > settings.r:
            saved = json.loads((folder / ADAPTER_CONFIG).read_text()) if (folder / ADAPTER_CONFIG).is_file() else {}
            if "lora_alpha" not in saved:
                raise TrainingInputError(f"{folder / ADAPTER_CONFIG} is missing or names no lora_alpha: the saved "
                                         "adapter's scale is needed to lower its rank")
            scale = (saved["lora_alpha"] / rank) / (settings.lora_alpha / settings.r)
            state = lower_rank(state, settings.r, scale)
        result = set_peft_model_state_dict(self.base_model, state)
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        if unexpected:
            raise ValueError(f"{path} holds tensors this adapter does not have: {unexpected[:3]}")
        missing = [key for key in getattr(result, "missing_keys", []) or [] if "lora_" in key]
        if missing:
            raise ValueError(f"{path} lacks tensors this adapter has: {missing[:3]}; it was saved with another "
                             "rank, projections or layers: set adapter.* as it was")


class ReaderBatches(SFTBatches):
    """Reader samples in SFT's resumable batches; the data position also records the files' sha256, so
    a resume over other data (rebuilt differently, on another machine) is refused, not silently mixed."""

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "sha256": [sha256_file(path) for path in self.files]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        now = [sha256_file(path) for path in self.files]
        if "sha256" in state and state["sha256"] != now:
            raise ValueError(f"the data files {[str(p) for p in self.files]} differ from those this run was trained "
                             "on (their sha256); rebuild them with the command in docs/training.md, or resume with "
                             "the files the checkpoint was trained on")
        super().load_state_dict(state)


class ReaderTrainer(Trainer):
    """The `Trainer` over a `ReaderModel`: see the module docstring."""

    @staticmethod
    def _use_bf16(precision: str) -> bool:
        if precision == "auto" and not torch.cuda.is_available():
            from memorag.runtime.cpu_dtype import native_on_cpu

            return native_on_cpu(torch.bfloat16)
        return use_bf16(precision)

    def _build_model(self) -> ReaderModel:
        from .build import base_dtype
        from .distributed import backend

        if backend(self.accelerator) != "plain":
            raise TrainingInputError(f"the reader trains in one process or with DDP, not under "
                                     f"{backend(self.accelerator)}: its adapter is small enough to need neither; "
                                     "launch with configs/accelerate/cpu.yaml or multi_gpu_ddp.yaml")
        cfg = self.cfg
        base, tokenizer = load_base(cfg.model, base_dtype(cfg.model, self.bf16))
        if cfg.model.gradient_checkpointing:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.reader_model = ReaderModel(base, tokenizer, cfg.adapter, base_name=_base_name(cfg.model))
        if cfg.adapter.init_from is not None:
            self.reader_model.load_adapter(Path(cfg.adapter.init_from), lower=True)
        return self.reader_model

    def _trainable_parameters(self, model: ReaderModel) -> dict[str, nn.Parameter]:
        return model.adapter_parameters()

    def _load_weights(self, model: ReaderModel, folder: Path) -> None:
        model.load_adapter(folder)

    def _save_weights(self, folder: Path) -> None:
        if self.accelerator.is_main_process:
            self.unwrapped.save_adapter(folder)

    def _window_ratios(self, length: int, seed: int) -> Counter:
        return Counter()  # no memory: no windows

    def _forward(self, input_ids: torch.Tensor, labels: torch.Tensor, seed: int):
        return self.model(input_ids, labels)

    def _build_data(self) -> ReaderBatches:
        from memorag.generation.local import LocalGenerator
        from memorag.runtime.stop_tokens import stop_token_ids

        cfg, data = self.cfg, self.cfg.data
        base = self.reader_model.base_model
        generator = LocalGenerator(base, self.tokenizer, shared=True)  # measures prompts as the pipeline's does
        stops = stop_token_ids(self.tokenizer, base)
        spec = SFTSpec(window=data.length_multiple, sequences_per_batch=data.batch_size * self.world,
                       max_length=data.max_length, seed=cfg.seed,
                       max_epochs=None if cfg.optim.max_steps else cfg.optim.epochs)
        render = lambda sample: render_reader_sample(generator.measure, self.tokenizer, stops[0] if stops else None,
                                                     sample)
        return ReaderBatches(data.files, render, spec, fits=lambda length: length <= self.max_positions,
                             parse=ReaderSample.from_record)
