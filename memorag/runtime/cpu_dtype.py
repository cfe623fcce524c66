"""The precision a causal LM computes in on the CPU when its dtype is "auto".

"auto" means the checkpoint's own dtype, which for current checkpoints is bfloat16 (or
float16). A CPU computes those natively only with the matching instructions (AMX or
AVX-512 BF16 for bfloat16, AMX-FP16 for float16); elsewhere (AVX2-only CPUs, such as
most AMD EPYC and older Xeon ones) every matrix product converts them and runs several
times slower than in float32: on a 2-core AMD EPYC the embedded model memorizes 4,096
tokens 5.1x faster in float32 (13.3 s against 67.5 s, raw output in
results/benchmarks/cpu-dtype-amd-2026-11-26/). So on such a CPU "auto" computes in
float32, as long as the float32 weights take at most a quarter of the machine's memory;
a larger model keeps its checkpoint's dtype. An explicit dtype is always kept.
"""

from __future__ import annotations

import logging
import os

import torch
from torch import nn

logger = logging.getLogger(__name__)

MEMORY_SHARE = 4  # float32 weights may take at most 1/MEMORY_SHARE of the machine's memory


def native_on_cpu(dtype: torch.dtype) -> bool:
    """Whether this CPU multiplies matrices in `dtype` natively (float32 always does)."""
    if dtype == torch.bfloat16:
        return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    if dtype == torch.float16:
        return bool(torch.cpu._is_amx_fp16_supported())
    return True


def machine_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def auto_cpu_dtype(checkpoint_dtype: torch.dtype, num_parameters: int, memory_bytes: int | None = None
                   ) -> torch.dtype:
    """What a model stored in `checkpoint_dtype` computes in on this CPU under dtype "auto"."""
    if checkpoint_dtype not in (torch.bfloat16, torch.float16) or native_on_cpu(checkpoint_dtype):
        return checkpoint_dtype
    memory = machine_memory_bytes() if memory_bytes is None else memory_bytes
    return torch.float32 if 4 * num_parameters * MEMORY_SHARE <= memory else checkpoint_dtype


def settle_auto_dtype(model: nn.Module, load_kwargs: dict) -> nn.Module:
    """`model` as loaded by `from_pretrained(**load_kwargs)`, cast to float32 where "auto" asked for
    the checkpoint's dtype and this CPU has no native instructions for it (see the module's docstring)."""
    if load_kwargs.get("dtype", "auto") != "auto" or "quantization_config" in load_kwargs:
        return model
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu":
        return model
    count = sum(weight.numel() for weight in model.parameters())
    chosen = auto_cpu_dtype(parameter.dtype, count)
    if chosen == parameter.dtype:
        return model
    logger.info("this CPU has no native %s matrix instructions: computing in %s (several times faster here; "
                "pass dtype=%s to keep the checkpoint's)", parameter.dtype, chosen,
                str(parameter.dtype).removeprefix("torch."))
    return model.to(chosen)
