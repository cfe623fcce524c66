"""Learning-rate schedules and the per-micro-batch ratio seeds: pure functions of the step."""

from __future__ import annotations

import hashlib
import math
from collections import Counter

from memorag.memory.schedule import window_ratio


def lr_factor(step: int, total_steps: int, warmup_steps: int = 0, schedule: str = "cosine",
              min_ratio: float = 0.0) -> float:
    """Multiplier of the peak learning rate for optimizer step `step` (0-based).

    Linear warmup over `warmup_steps` (from 1/(warmup+1) up to 1), then `cosine` or
    `linear` decay to `min_ratio` at `total_steps`, or `constant`.
    """
    if warmup_steps and step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    if schedule == "constant":
        return 1.0
    span = max(total_steps - warmup_steps, 1)
    progress = min(max(step - warmup_steps, 0) / span, 1.0)
    if schedule == "cosine":
        decay = 0.5 * (1.0 + math.cos(math.pi * progress))
    elif schedule == "linear":
        decay = 1.0 - progress
    else:
        raise ValueError(f"unknown schedule {schedule!r}; use cosine, linear or constant")
    return min_ratio + (1.0 - min_ratio) * decay


def ratio_seed(seed: int, step: int, micro_batch: int, rank: int) -> int:
    """The `ratio_seed` of one forward: a stable function of (seed, optimizer step, micro-batch, process)."""
    digest = hashlib.sha256(f"memorag-ratios:{seed}:{step}:{micro_batch}:{rank}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def ratio_counts(num_tokens: int, window: int, ratios: list[int], ratio_mix: str, seed: int) -> Counter:
    """How many compacted windows used each ratio in one forward of `num_tokens` tokens.

    Every window but the last is compacted into memory (the last one is only read).
    """
    windows = max(-(-num_tokens // window) - 1, 0)
    return Counter(window_ratio(index, ratios, ratio_mix, seed) for index in range(windows))
