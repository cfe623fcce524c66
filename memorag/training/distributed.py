"""What differs between plain / DDP, DeepSpeed and FSDP runs, in one place.

The memory model is a plain `nn.Module` and only its memory parameters are in the
optimizer, so every Accelerate backend trains it as is. What differs is where the
full memory parameters and the optimizer state live when a checkpoint is written
or read:

- single process / DDP: in the module and a torch optimizer (DDP runs with
  `find_unused_parameters`, since the last layer's memory query receives no gradient);
- DeepSpeed (ZeRO-2 / ZeRO-3): the engine holds the optimizer state; it is saved with
  `save_checkpoint(exclude_frozen_parameters=True)`, so the frozen base is never
  written; under ZeRO-3 the memory parameters are gathered before they are saved.
  Under ZeRO-3 the memory model is built whole in each process's host memory (a 7B
  base in bf16: about 15 GB per process) and partitioned by DeepSpeed when it is
  prepared: the memory parameters start as copies of base parameters (projections,
  one embedding row), which a base partitioned at construction (`zero.Init`) no
  longer holds. The `auto` bucket sizes are filled from the base's hidden size,
  since the wrapped model's `config` is the memory config;
- FSDP (version 1, `use_orig_params`): the memory parameters are summoned in full
  before saving, and Accelerate's FSDP optimizer helpers save the optimizer state.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import torch

from memorag.config import ConfigError
from memorag.memory import MemoryModel

logger = logging.getLogger(__name__)


def backend(accelerator) -> str:
    from accelerate.utils import DistributedType

    kind = accelerator.distributed_type
    if kind == DistributedType.DEEPSPEED:
        return "deepspeed"
    if kind == DistributedType.FSDP:
        return "fsdp"
    return "plain"


def zero_stage(accelerator) -> int | None:
    """The ZeRO stage of a DeepSpeed run, None for other backends."""
    if backend(accelerator) != "deepspeed":
        return None
    return int(accelerator.state.deepspeed_plugin.zero_stage)


@contextlib.contextmanager
def whole_model_construction(accelerator) -> Iterator[None]:
    """Models built inside are not partitioned at construction, even under ZeRO-3.

    Accelerate registers its ZeRO-3 config with transformers, which then builds every
    model under `deepspeed.zero.Init`, leaving each parameter an empty shard; the memory
    model copies base parameters when it is built, so it is built whole here and
    DeepSpeed partitions it in `accelerator.prepare`.
    """
    if zero_stage(accelerator) != 3:
        yield
        return
    from transformers.integrations import is_deepspeed_zero3_enabled, unset_hf_deepspeed_config

    plugin = accelerator.state.deepspeed_plugin
    if plugin.zero3_init_flag:
        logger.warning("zero3_init_flag is on, but the memory model is built whole and partitioned by DeepSpeed "
                       "when prepared (its memory parameters are copies of base parameters); set zero3_init_flag: "
                       "false to silence this")
    unset_hf_deepspeed_config()
    try:
        if is_deepspeed_zero3_enabled():
            raise RuntimeError("transformers still sees a ZeRO-3 config; the memory model cannot be built whole")
        yield
    finally:
        plugin.set_deepspeed_weakref()


def check_activation_checkpointing(accelerator, gradient_checkpointing: bool) -> None:
    """Refuse per-window activation checkpointing under ZeRO-3, which fails in the backward pass.

    ZeRO-3 releases the frozen base parameters after the forward hooks of the recomputed
    window, so torch's checkpoint finds empty tensors where it saved full ones. DeepSpeed
    keeps them only while a module's backward is under way, and the memory model's output
    (a dataclass) gives it no module backward to attach to.
    """
    if zero_stage(accelerator) == 3 and gradient_checkpointing:
        raise ConfigError("model.gradient_checkpointing=true does not work under DeepSpeed ZeRO-3 (the recomputed "
                          "windows find the frozen base parameters already released); set "
                          "model.gradient_checkpointing=false, or train with ZeRO-2 "
                          "(configs/accelerate/deepspeed_zero2.yaml) to keep activation checkpointing")


def bucket_sizes(hidden_size: int) -> dict[str, int]:
    """DeepSpeed's hidden-size rules for the `auto` ZeRO bucket and threshold settings."""
    return {
        "reduce_bucket_size": hidden_size * hidden_size,
        "stage3_prefetch_bucket_size": int(0.9 * hidden_size * hidden_size),
        "stage3_param_persistence_threshold": 10 * hidden_size,
    }


def check_processes(accelerator) -> None:
    """Refuse a DeepSpeed launch whose processes Accelerate does not see (several processes on a CPU):
    each would run as process 0 of 1, writing the same files. Checked first, before the output folder."""
    if backend(accelerator) != "deepspeed":
        return
    if torch.distributed.is_initialized() and torch.distributed.get_world_size() != accelerator.num_processes:
        raise ConfigError(
            f"DeepSpeed runs {torch.distributed.get_world_size()} processes but Accelerate sees "
            f"{accelerator.num_processes} (on {accelerator.device.type}, Accelerate does not set up DeepSpeed's "
            "processes: every one would train as process 0); on a CPU launch one process (--num_processes 1)")


def configure_deepspeed(accelerator, micro_batch: int, accumulation: int, grad_clip: float,
                        hidden_size: int | None = None) -> None:
    """Fill the DeepSpeed config's `auto` values from the training config and the base's hidden size.

    Refuses contradictions, and `auto` sizes when `hidden_size` is not given.
    """
    if backend(accelerator) != "deepspeed":
        return
    check_processes(accelerator)
    settings = accelerator.state.deepspeed_plugin.deepspeed_config
    for key in ("optimizer", "scheduler"):
        if key in settings:
            raise ConfigError(f"the DeepSpeed config sets '{key}'; remove it: the optimizer and schedule come from "
                              "the training config (optim.*), and only memory parameters are in the optimizer")
    wanted = {"train_micro_batch_size_per_gpu": micro_batch, "gradient_accumulation_steps": accumulation,
              "train_batch_size": micro_batch * accumulation * accelerator.num_processes,
              "gradient_clipping": grad_clip}
    for key, value in wanted.items():
        current = settings.get(key, "auto")
        if current == "auto":
            settings[key] = value
        elif float(current) != float(value):
            raise ConfigError(f"the DeepSpeed config sets {key}={current}, the training config {value}; "
                              f"set it to \"auto\" in the DeepSpeed JSON")
    zero = settings.get("zero_optimization") or {}
    for key, value in bucket_sizes(hidden_size or 0).items():
        if zero.get(key) != "auto":
            continue
        if not hidden_size:
            raise ConfigError(f"the DeepSpeed config sets zero_optimization.{key} to \"auto\", which needs the "
                              "base model's hidden size; pass hidden_size or set an integer in the DeepSpeed JSON")
        zero[key] = value


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
    if zero_stage(accelerator) == 3:
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
