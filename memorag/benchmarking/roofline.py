"""How fast memorize could possibly be on this machine: its FLOPs and the best measured kernel rates.

The benchmarks' lower bounds (`benchmarks/roofline.py` prints them for a grid of lengths
and ratios; `benchmarks/memorize.py` and `benchmarks/train.py` set them beside their timings).

`memorize_flops` counts the work of reading N tokens exactly as `MemoryModel.memorize`
does it (tests/benchmarks/test_roofline.py checks the count against the real calls):
- linear layers: every raw row and every memory row passes through each layer's
  q/k/v/o projections and MLP (memory rows through the memory projections, same shapes);
  no logits are computed;
- attention: window w (w complete windows already compacted, M_w = w * L / r memory
  entries) has T = L + L / r rows, raw and memory tokens interleaved; each sees the M_w
  entries and, causally, the window's rows before it (T (T + 1) / 2 scores). Each
  query-key score costs 4 * head_dim FLOPs per query head (q.k and the weighted sum of
  v, a multiply and an add each).

`measure_peaks` times a device's best rates in a precision: a large square matmul (the
ceiling for any FLOP), the fused attention kernel at the memorize shape (on the CPU
PyTorch's flash-attention kernel for the CPU; on CUDA `scaled_dot_product_attention`,
whichever backend it picks) and a large copy (bytes read and written per second, the
ceiling for decoding, which reads every weight and cached key once per token). On CUDA
the kernels are timed between CUDA events after a synchronization; on the CPU by the
wall clock. The bounds are lower limits on the time: all FLOPs at the GEMM peak, the
linear FLOPs at the GEMM peak plus the attention FLOPs at the attention kernel's rate,
and for decoding the bytes a token must read at the copy rate (`decode_bound_s`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shape:
    """A Llama-style decoder's dimensions (defaults: SmolLM2-135M, the embedded model)."""

    hidden: int = 576
    heads: int = 9
    kv_heads: int = 3
    head_dim: int = 64
    intermediate: int = 1536
    layers: int = 30

    @classmethod
    def of(cls, config) -> Shape:
        """The shape of a transformers config."""
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(config.hidden_size, config.num_attention_heads, config.num_key_value_heads, head_dim,
                   config.intermediate_size, config.num_hidden_layers)

    def linear_flops_per_row(self) -> int:
        """One row through one layer: q, k, v, o projections and the gated MLP."""
        attention = 2 * self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return attention + 3 * 2 * self.hidden * self.intermediate

    def flops_per_score(self) -> int:
        return 4 * self.head_dim * self.heads


def memorize_scores(num_tokens: int, window: int, ratio: int) -> tuple[int, int]:
    """(query-key scores per layer and query head, memory rows) of memorizing `num_tokens`."""
    if num_tokens % window:
        raise ValueError(f"num_tokens={num_tokens} is not a whole number of windows of {window}")
    per_window = window // ratio
    rows = window + per_window  # raw and memory rows of one window
    scores = 0
    for w in range(num_tokens // window):
        entries = w * per_window  # memory entries before window w
        scores += rows * entries + rows * (rows + 1) // 2
    return scores, per_window * (num_tokens // window)


def memorize_flops(num_tokens: int, window: int, ratio: int, shape: Shape = Shape()) -> dict[str, float]:
    scores, memory_rows = memorize_scores(num_tokens, window, ratio)
    linear = (num_tokens + memory_rows) * shape.layers * shape.linear_flops_per_row()
    attention = scores * shape.layers * shape.flops_per_score()
    return {"linear": float(linear), "attention": float(attention)}


def plain_flops(num_tokens: int, shape: Shape = Shape()) -> dict[str, float]:
    """A plain causal forward without logits."""
    linear = num_tokens * shape.layers * shape.linear_flops_per_row()
    attention = num_tokens * (num_tokens + 1) // 2 * shape.layers * shape.flops_per_score()
    return {"linear": float(linear), "attention": float(attention)}


def _seconds_per_run(run, device, repeats: int) -> float:
    """Seconds per call of `run` after one warm-up call: CUDA events on CUDA, the wall clock elsewhere."""
    import torch

    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / repeats
    start_s = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - start_s) / repeats


def _rate(run, flops: float, device=None, repeats: int = 3) -> float:
    import torch

    return flops / _seconds_per_run(run, device or torch.device("cpu"), repeats)


def measure_peaks(dtype_name: str, shape: Shape = Shape(), window: int = 1024, memory: int = 4096,
                  device: str = "cpu", gemm_size: int | None = None, copy_mb: int | None = None) -> dict[str, float]:
    """FLOP/s of a `gemm_size`^3 matmul (default 4096 on the CPU, 8192 on CUDA), of fused attention of
    `window` queries over `memory` keys (all heads of `shape`), and bytes/s of a copy of `copy_mb` MiB
    (default 256 on the CPU, 1024 on CUDA), on `device` in `dtype_name`."""
    import torch

    dtype, where = getattr(torch, dtype_name), torch.device(device)
    cuda = where.type == "cuda"
    repeats = 20 if cuda else 3
    return {"gemm": _gemm_rate(gemm_size or (8192 if cuda else 4096), dtype, where, repeats),
            "attention": _attention_rate(shape, window, memory, dtype, where, repeats),
            "copy_bytes_per_s": _copy_rate((copy_mb or (1024 if cuda else 256)) * 2**20, where, repeats)}


GEMM_PROBE = 512  # the side of the first, small product that says how fast this dtype multiplies here
GEMM_BUDGET_S = 2.0  # the longest one timed product may take


def gemm_side(size: int, probe_rate: float, budget_s: float = GEMM_BUDGET_S) -> int:
    """`size` halved until one size^3 product takes at most `budget_s` at `probe_rate` FLOP/s (not below
    GEMM_PROBE): a CPU without native instructions for a dtype (bf16 on AVX2) multiplies a 4096-side
    product in minutes, and the peak's timing would stall the benchmark that asked for it."""
    while size > GEMM_PROBE and 2.0 * size**3 / probe_rate > budget_s:
        size //= 2
    return size


def _gemm_rate(size: int, dtype, where, repeats: int) -> float:
    import torch

    if size > GEMM_PROBE:
        probe = torch.randn(GEMM_PROBE, GEMM_PROBE, dtype=dtype, device=where)
        fitted = gemm_side(size, _rate(lambda: probe @ probe, 2.0 * GEMM_PROBE**3, where, 1))
        if fitted < size:
            logger.warning("the %s GEMM peak is timed at side %d, not %d: a %d-side product would take more than "
                           "%.0f s here", dtype, fitted, size, size, GEMM_BUDGET_S)
        size = fitted
    a = torch.randn(size, size, dtype=dtype, device=where)
    b = torch.randn(size, size, dtype=dtype, device=where)
    return _rate(lambda: a @ b, 2.0 * size**3, where, repeats)


def _attention_rate(shape: Shape, window: int, memory: int, dtype, where, repeats: int) -> float:
    """`window` queries over `memory` keys, no mask: SDPA on CUDA, the fused CPU kernel on the CPU."""
    import torch

    flops = 4.0 * shape.head_dim * shape.heads * window * memory
    key = torch.randn(1, shape.kv_heads, memory, shape.head_dim, dtype=dtype, device=where)
    value = torch.randn_like(key)
    if where.type == "cuda":
        from torch.nn.functional import scaled_dot_product_attention

        query = torch.randn(1, shape.heads, window, shape.head_dim, dtype=dtype, device=where)
        return _rate(lambda: scaled_dot_product_attention(query, key, value, enable_gqa=True), flops, where, repeats)
    groups = shape.heads // shape.kv_heads
    query = torch.randn(1, shape.kv_heads, groups * window, shape.head_dim, dtype=dtype)  # grouped heads folded
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    return _rate(lambda: kernel(query, key, value, 0.0, False), flops, where, repeats)


def _copy_rate(nbytes: int, where, repeats: int) -> float:
    """Bytes read and written per second by a copy of `nbytes`."""
    import torch

    source = torch.empty(nbytes, dtype=torch.uint8, device=where)
    target = torch.empty_like(source)
    return 2.0 * nbytes / _seconds_per_run(lambda: target.copy_(source), where, repeats)


def decode_bound_s(weight_bytes: float, cache_bytes: float, peaks: dict[str, float]) -> float:
    """Lower limit on one decoding step (s): every weight and every cached key and value read once at
    the copy rate (the FLOPs of one token are negligible beside them)."""
    return (weight_bytes + cache_bytes) / peaks["copy_bytes_per_s"]


def bounds(flops: dict[str, float], peaks: dict[str, float]) -> dict[str, float]:
    """Lower limits on the time (s): everything at the GEMM peak; attention at the kernel's rate."""
    total = flops["linear"] + flops["attention"]
    return {"at_gemm_peak_s": total / peaks["gemm"],
            "at_kernel_rates_s": flops["linear"] / peaks["gemm"] + flops["attention"] / peaks["attention"]}
