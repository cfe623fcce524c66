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

`measure_peaks` times the machine's best bf16/fp32 rates: a large square matmul (the
ceiling for any FLOP) and PyTorch's fused CPU attention kernel at the memorize shape. The
bounds it gives are lower limits on memorize time: all FLOPs at the GEMM peak, and the
linear FLOPs at the GEMM peak plus the attention FLOPs at the attention kernel's rate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


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


def _rate(run, flops: float, repeats: int = 3) -> float:
    run()
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return flops * repeats / (time.perf_counter() - start)


def measure_peaks(dtype_name: str, shape: Shape = Shape(), window: int = 1024, memory: int = 4096) -> dict[str, float]:
    """FLOP/s of a 4096^3 matmul and of the fused CPU attention over `memory` + `window` keys."""
    import torch

    dtype = getattr(torch, dtype_name)
    size = 4096
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    gemm = _rate(lambda: a @ b, 2.0 * size**3)
    groups = shape.heads // shape.kv_heads
    query = torch.randn(1, shape.kv_heads, groups * window, shape.head_dim, dtype=dtype)  # grouped heads folded
    key = torch.randn(1, shape.kv_heads, memory, shape.head_dim, dtype=dtype)
    value = torch.randn_like(key)
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    attention = _rate(lambda: kernel(query, key, value, 0.0, False),
                      4.0 * shape.head_dim * shape.heads * window * memory)
    return {"gemm": gemm, "attention": attention}


def bounds(flops: dict[str, float], peaks: dict[str, float]) -> dict[str, float]:
    """Lower limits on the time (s): everything at the GEMM peak; attention at the kernel's rate."""
    total = flops["linear"] + flops["attention"]
    return {"at_gemm_peak_s": total / peaks["gemm"],
            "at_kernel_rates_s": flops["linear"] / peaks["gemm"] + flops["attention"] / peaks["attention"]}
