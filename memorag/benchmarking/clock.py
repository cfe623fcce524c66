"""Per-token timestamps of a decoding loop, taken through transformers' streamer protocol.

`generate` calls `put` once with the prompt, then once per step with the new tokens (one
per sequence): the first step's time includes reading the prompt (prefill); the steps
after it are decoding proper. Each `put` synchronizes the device first, so a timestamp
is when the step's kernels have finished, not when they were launched.
"""

from __future__ import annotations

import statistics
import time

from .device import BenchDevice


class TokenClock:
    """A streamer that records when each step's tokens arrive."""

    def __init__(self, device: BenchDevice):
        self.device = device
        self.stamps: list[float] = []

    def put(self, value) -> None:
        self.device.synchronize()
        self.stamps.append(time.perf_counter())

    def end(self) -> None:
        pass

    def summary(self, warmup_steps: int, sequences: int = 1) -> dict:
        """Prefill seconds, and the decoding steps after `warmup_steps`: ms per step (mean and median),
        tokens/s over all `sequences`; the first step (prefill) never counts as a decoding step."""
        steps = [b - a for a, b in zip(self.stamps[1:], self.stamps[2:])][warmup_steps:]  # [steps]
        if not steps:
            raise ValueError(f"{len(self.stamps) - 1} steps recorded; need more than {warmup_steps + 1}")
        mean = sum(steps) / len(steps)
        return {"prefill_s": self.stamps[1] - self.stamps[0], "decode_steps": len(steps),
                "ms_per_step": 1e3 * mean, "median_ms_per_step": 1e3 * statistics.median(steps),
                "tokens_per_s": sequences / mean, "step_ms": [round(1e3 * s, 3) for s in steps]}
