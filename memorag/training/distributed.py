"""What differs between plain / DDP, DeepSpeed and FSDP runs, in one place.

The memory model is a plain `nn.Module` and only its memory parameters are in the
optimizer, so every Accelerate backend trains it as is. What differs is where the
full memory parameters and the optimizer state live when a checkpoint is written
or read:

- single process / DDP: in the module and a torch optimizer (DDP runs with
  `find_unused_parameters`, since the last layer's memory query receives no gradient);
- DeepSpeed (ZeRO-2 / ZeRO-3): the engine holds the optimizer state; it is saved with
  `save_checkpoint(exclude_frozen_parameters=True)`, so the frozen base is never
  written; under ZeRO-3 the memory parameters are gathered before they are saved;
- FSDP (version 1, `use_orig_params`): the memory parameters are summoned in full
  before saving, and Accelerate's FSDP optimizer helpers save the optimizer state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch

from memorag.config import ConfigError
from memorag.memory import MemoryModel


def backend(accelerator) -> str:
    from accelerate.utils import DistributedType

    kind = accelerator.distributed_type
    if kind == DistributedType.DEEPSPEED:
        return "deepspeed"
    if kind == DistributedType.FSDP:
        return "fsdp"
    return "plain"


def configure_deepspeed(accelerator, micro_batch: int, accumulation: int, grad_clip: float) -> None:
    """Fill the DeepSpeed config's `auto` values from the training config; refuse contradictions."""
    if backend(accelerator) != "deepspeed":
        return
    settings = accelerator.state.deepspeed_plugin.deepspeed_config
    for key in ("optimizer", "scheduler"):
        if key in settings:
            raise ConfigError(f"the DeepSpeed config sets '{key}'; remove it: the optimizer and schedule come from "
                              "the training config (optim.*), and only memory parameters are in the optimizer")
    wanted = {"train_micro_batch_size_per_gpu": micro_batch, "gradient_accumulation_steps": accumulation,
              "gradient_clipping": grad_clip}
    for key, value in wanted.items():
        current = settings.get(key, "auto")
        if current == "auto":
            settings[key] = value
        elif float(current) != float(value):
            raise ConfigError(f"the DeepSpeed config sets {key}={current}, the training config {value}; "
                              f"set it to \"auto\" in the DeepSpeed JSON")


def configure_fsdp(accelerator, model: MemoryModel) -> None:
    """Wrap each decoder layer (the base model's `_no_split_modules`) and keep the original parameters."""
    if backend(accelerator) != "fsdp":
        return
    plugin = accelerator.state.fsdp_plugin
    if getattr(plugin, "fsdp_version", 1) != 1:
        raise ConfigError("FSDP version 2 is not supported for memory training; set fsdp_version: 1 "
                          "(configs/accelerate/fsdp.yaml)")
    if not getattr(plugin, "use_orig_params", False):
        raise ConfigError("FSDP needs fsdp_use_orig_params: true (frozen and trainable parameters share layers)")
    if not getattr(plugin, "transformer_cls_names_to_wrap", None):
        plugin.transformer_cls_names_to_wrap = list(getattr(model.base_model, "_no_split_modules", None) or [])


@contextlib.contextmanager
def full_memory_parameters(accelerator, model) -> Iterator[MemoryModel]:
    """The unwrapped model with its memory parameters whole (collective: every process enters)."""
    unwrapped = accelerator.unwrap_model(model)
    kind = backend(accelerator)
    if kind == "deepspeed" and accelerator.state.deepspeed_plugin.zero_stage == 3:
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(unwrapped.memory_parameters().values()), modifier_rank=None):
            yield unwrapped
    elif kind == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel

        with FullyShardedDataParallel.summon_full_params(model, writeback=False, recurse=True):
            yield unwrapped
    else:
        yield unwrapped


def save_optimizer(accelerator, model, optimizer, scheduler, folder: Path) -> None:
    """Optimizer (and scheduler) state into `folder`; every process calls it."""
    kind = backend(accelerator)
    if kind == "deepspeed":
        model.save_checkpoint(str(folder / "deepspeed"), tag="state", save_latest=False,
                              exclude_frozen_parameters=True)
        if accelerator.is_main_process:
            torch.save({"scheduler": scheduler.state_dict()}, folder / "optimizer.pt")
    elif kind == "fsdp":
        from accelerate.utils import save_fsdp_optimizer

        save_fsdp_optimizer(accelerator.state.fsdp_plugin, accelerator, optimizer, model, str(folder / "fsdp"))
        if accelerator.is_main_process:
            torch.save({"scheduler": scheduler.state_dict()}, folder / "optimizer.pt")
    elif accelerator.is_main_process:
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, folder / "optimizer.pt")


def load_optimizer(accelerator, model, optimizer, scheduler, folder: Path) -> None:
    kind = backend(accelerator)
    state = torch.load(folder / "optimizer.pt", map_location="cpu", weights_only=False)
    if kind == "deepspeed":
        model.load_checkpoint(str(folder / "deepspeed"), tag="state", load_module_strict=False,
                              load_optimizer_states=True, load_lr_scheduler_states=False)
    elif kind == "fsdp":
        from accelerate.utils import load_fsdp_optimizer

        load_fsdp_optimizer(accelerator.state.fsdp_plugin, accelerator, optimizer, model, str(folder / "fsdp"))
    else:
        optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
